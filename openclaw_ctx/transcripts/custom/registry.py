"""The extension point for the ``openclaw-ctx/*`` custom entries: stored rows a transcript cannot otherwise hold.

OpenClaw keeps a ``custom`` entry in the file and never shows it to the model, so export writes such
rows as custom entries and import rebuilds them. An :class:`EntryKind` says how one kind of row
travels: the model its ``data`` validates against (every ``data`` carries ``version``, 1 today), how
export collects a session's rows and how import restores them. Core registers the kinds whose rows
are core tables; an engine registers the kinds of its own tables (see :mod:`.load`).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Annotated, Any, Generic, Literal, TypeVar, cast

from pydantic import BaseModel, ConfigDict, Field, ValidationError
from pydantic.alias_generators import to_camel
from sqlalchemy.ext.asyncio import AsyncConnection

from openclaw_ctx.store.repo import SessionRow
from openclaw_ctx.transcripts.entries import CustomEntry
from openclaw_ctx.transcripts.tree import Transcript

__all__ = [
    "FORMAT_VERSION",
    "EntryData",
    "EntryIdOf",
    "EntryKind",
    "EntryKinds",
    "ExportNames",
    "FoundEntries",
    "RestoreScope",
    "dump",
    "from_row",
    "validate_entries",
]

FORMAT_VERSION = 1
EntryIdOf = Callable[[str | None, int], str]
"""How export names a message: ``(messages.entry_id, messages.message_id) -> transcript entry id``."""


class EntryData(BaseModel):
    """Base of every kind's ``data``: camelCase on the wire, strict on import, unknown keys ignored."""

    model_config = ConfigDict(strict=True, alias_generator=to_camel, populate_by_name=True, extra="ignore")

    version: Annotated[int, Field(ge=1, le=FORMAT_VERSION)] = FORMAT_VERSION


D = TypeVar("D", bound=EntryData)


def dump(model: BaseModel) -> dict[str, Any]:
    """The wire form of a model that export built with ``model_construct``.

    A stored row is written as it is, never refused: import validates, and reports a row it cannot take.
    """
    return model.model_dump(by_alias=True)


def from_row(model: type[D], row: Any, **computed: Any) -> D:
    """Export's data for a stored row: each field from the row's column of that name, unless `computed` gives it."""
    fields = [name for name in model.model_fields if name != "version" and name not in computed]
    # cast: the pydantic plugin types model_construct on a type variable as the bound.
    return cast(D, model.model_construct(**{name: getattr(row, name) for name in fields}, **computed))


@dataclass(frozen=True)
class ExportNames:
    """How export names what rows point at: messages by transcript entry id, legacy nodes by compaction entry."""

    entry_id_of: EntryIdOf
    compaction_id_of: Callable[[str], str]


@dataclass(frozen=True)
class RestoreScope:
    """Where an import restores rows: the file's transaction, its session, and the read transcript.

    An entry whose row cannot be restored is turned into a malformed line with ``transcript.reject``.
    """

    conn: AsyncConnection
    session: SessionRow
    transcript: Transcript


ExportRows = Callable[[AsyncConnection, SessionRow, ExportNames], Awaitable[list[dict[str, Any]]]]
"""The ``data`` of a session's rows of one kind, in the order they are to be written."""


@dataclass(frozen=True)
class EntryKind(Generic[D]):
    """One ``customType``: how its rows are exported, validated and restored."""

    custom_type: str
    data: type[D]
    row_key: Callable[[Mapping[str, Any]], str] | None = None
    """What names the row one entry carries (a file holds each row once); None: not a row per entry."""
    stamp: str | None = None
    """The ``data`` field that gives the entry its timestamp (else the session's creation time)."""
    export_rows: ExportRows | None = None
    """A session's rows, written after its messages; None: core writes this kind itself."""
    restore: Callable[[RestoreScope, list[tuple[CustomEntry, D]]], Awaitable[int]] | None = None
    """Insert the rows the store lacks; returns how many. None: core restores this kind itself."""
    restore_after: Literal["messages", "summaries"] = "summaries"
    """What must be stored before these rows are: the file's messages, or also its summaries."""
    position: int = 100
    """Order among kinds, on export and on import."""


@dataclass
class EntryKinds:
    """The registered kinds, by ``customType``."""

    _kinds: dict[str, EntryKind[Any]] = field(default_factory=dict)
    missing: dict[str, str] = field(default_factory=dict)
    """``customType`` → the engine that writes it, for kinds its engine did not register (not installed)."""

    def register(self, kind: EntryKind[Any]) -> None:
        """Add a kind.

        Raises:
            ValueError: the ``customType`` is registered already.
        """
        if kind.custom_type in self._kinds:
            raise ValueError(f"transcript entry kind {kind.custom_type!r} is already registered")
        self._kinds[kind.custom_type] = kind
        self.missing.pop(kind.custom_type, None)

    def get(self, custom_type: str) -> EntryKind[Any] | None:
        """The kind of a ``customType``, if registered."""
        return self._kinds.get(custom_type)

    def __iter__(self) -> Iterator[EntryKind[Any]]:
        return iter(sorted(self._kinds.values(), key=lambda k: (k.position, k.custom_type)))

    def restored_after(self, stage: Literal["messages", "summaries"]) -> list[EntryKind[Any]]:
        """The kinds that restore their own rows at `stage`, in order."""
        return [k for k in self if k.restore is not None and k.restore_after == stage]


@dataclass
class FoundEntries:
    """The custom entries of a transcript that validated, per kind, in file order."""

    by_type: dict[str, list[tuple[CustomEntry, EntryData]]] = field(default_factory=dict)

    def of(self, kind: EntryKind[D]) -> list[tuple[CustomEntry, D]]:
        """The entries of one kind, with their validated ``data``."""
        return cast(list[tuple[CustomEntry, D]], self.by_type.get(kind.custom_type, []))


def _reason(custom_type: str, exc: ValidationError) -> str:
    error = exc.errors()[0]
    where = ".".join(str(p) for p in error["loc"])
    return f"{custom_type} data{'.' + where if where else ''}: {error['msg']}"


def validate_entries(t: Transcript, kinds: EntryKinds) -> FoundEntries:
    """Validate the entries of every registered kind in `t`.

    An invalid one becomes a malformed line of `t`, and so does one of a kind whose engine is not installed.
    """
    found = FoundEntries()
    for entry in list(t.entries):
        if not isinstance(entry, CustomEntry):
            continue
        kind = kinds.get(entry.custom_type)
        if kind is None:
            if entry.custom_type in kinds.missing:
                engine = kinds.missing[entry.custom_type]
                t.reject(entry, f"{entry.custom_type} needs the {engine} engine, which is not installed")
            continue
        if not isinstance(entry.data, dict):
            t.reject(entry, f"{entry.custom_type} data: expected an object")
            continue
        try:
            data = kind.data.model_validate(entry.data)
        except ValidationError as exc:
            t.reject(entry, _reason(entry.custom_type, exc))
            continue
        found.by_type.setdefault(entry.custom_type, []).append((entry, data))
    return found
