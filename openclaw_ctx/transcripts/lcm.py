"""Lossless-claw's summary DAG, context projection and the runtime's records, inside OpenClaw JSONL transcripts.

OpenClaw has no entry type for a DAG summary, so export writes each `leaf` / `condensed` node as a
``custom`` entry — extension state that OpenClaw keeps in the file and never shows the model — and
import rebuilds the rows from it (every entry carries ``data.version``, 1 today):

- ``customType: "openclaw-ctx/lcm-summary"``: ``data`` is the whole `summaries` row (``summaryId``,
  ``kind``, ``depth``, ``content``, ``tokenCount``, ``earliestAt``/``latestAt``, the descendant and
  source token counts, ``summarizer``, ``model``, ``fallbackLevel``, ``details``, ``createdAt``) plus
  its edges: ``sourceEntryIds`` (the entry ids of the messages it covers, in `summary_messages`
  order) and ``sourceSummaryIds`` (`summary_parents` order). A node is written in the file of the
  session it was created in, after every node it was built from. A `legacy` node the runtime wrote
  gets one too, with ``compactionEntryId``: the `compaction` entry OpenClaw reads it as (written
  after it, and repeated at the start of the successor's file) then stands for this very node, so a
  DAG that mixes both kinds after `openclaw-ctx migrate` keeps its ids and edges.
- ``customType: "openclaw-ctx/lcm-large-content"``: ``data`` is a `large_content` row (``fileId``,
  ``entryId`` of the stubbed message, ``kind``, ``name``, ``mimeType``, ``byteSize``, ``tokenCount``,
  ``stub``, ``stubTokenCount``, ``createdAt``), in the file of the message's session.
- ``customType: "openclaw-ctx/turn"``: a `turns` row of the session (``turn``, ``assembledTokens``,
  ``budget``, ``compacted``, ``at``), and ``customType: "openclaw-ctx/compaction-record"``: a
  `compactions` audit row the runtime wrote (its columns; the first kept message by
  ``firstKeptMessageEntryId``), in the file of the session it rotated to. With them `stats` of an
  imported key is the original's.
- ``customType: "openclaw-ctx/lcm-context"``: ``data`` is ``{engineId, items}``, the session's
  `context_items` in order, each ``{ordinal, entryId | summaryId, tokenCount}``; written last, for a
  session of lossless-claw or one whose context holds a DAG node. The last one on the active branch
  is the session's projection; without one, import falls back to buildSessionContext.

Import restores the rows in the file's transaction, with the same ids, through the store's own
writers where it has them (:func:`~openclaw_ctx.store.repo.insert_summary`, whose rows the `summaries_fts`
triggers index, and :func:`~openclaw_ctx.store.repo.record_compaction`).
A row already stored under the key is skipped, so re-importing adds nothing. Data that does not
validate, or that names a message or summary the store does not have, makes the line a malformed
one: reported as ``file:line: reason`` and kept verbatim, and the rest of the file imports.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator
from pydantic.alias_generators import to_camel
from sqlalchemy import func, insert, literal_column, select, update
from sqlalchemy.ext.asyncio import AsyncConnection

from engines.lossless.models import LargeContent
from openclaw_ctx.store.models import (
    Compaction,
    ContextItem,
    Message,
    Session,
    Summary,
    SummaryMessage,
    SummaryParent,
    Turn,
)
from openclaw_ctx.store.repo import NewSummary, SessionRow, insert_summary, record_compaction
from openclaw_ctx.transcripts.jsonl import CustomEntry, Entry, Transcript, TranscriptLineError

__all__ = [
    "COMPACTION_TYPE",
    "CONTEXT_TYPE",
    "IMPORT_SUMMARIZER",
    "LARGE_CONTENT_TYPE",
    "LCM_ENGINE_ID",
    "SUMMARY_TYPE",
    "TURN_TYPE",
    "CompactionData",
    "ContextData",
    "LargeContentData",
    "LcmEntries",
    "Restored",
    "SummaryData",
    "TurnData",
    "compaction_data",
    "context_data",
    "large_content_data",
    "reject",
    "resolve_context",
    "restore_compactions",
    "restore_large_content",
    "restore_summaries",
    "restore_turns",
    "set_engine",
    "split_lcm_entries",
    "summary_data",
    "turn_data",
]

IMPORT_SUMMARIZER = "openclaw-import"
"""The summarizer of a legacy summary rebuilt from an OpenClaw `compaction` entry (never written as lcm-summary)."""
SUMMARY_TYPE = "openclaw-ctx/lcm-summary"
CONTEXT_TYPE = "openclaw-ctx/lcm-context"
LARGE_CONTENT_TYPE = "openclaw-ctx/lcm-large-content"
TURN_TYPE = "openclaw-ctx/turn"
COMPACTION_TYPE = "openclaw-ctx/compaction-record"
LCM_ENGINE_ID = "lossless-claw"
FORMAT_VERSION = 1
_DAG_KINDS = ("leaf", "condensed")
_CHUNK = 500

NonNegative = Annotated[int, Field(ge=0)]
EntryIdOf = Callable[[str | None, int], str]
"""How export names a message: ``(messages.entry_id, messages.message_id) -> transcript entry id``."""


class _Data(BaseModel):
    model_config = ConfigDict(strict=True, alias_generator=to_camel, populate_by_name=True, extra="ignore")

    version: Annotated[int, Field(ge=1, le=FORMAT_VERSION)] = FORMAT_VERSION


class SummaryData(_Data):
    """The ``data`` of an ``openclaw-ctx/lcm-summary`` entry: one `summaries` row and its edges."""

    summary_id: Annotated[str, Field(min_length=1)]
    kind: Literal["leaf", "condensed", "legacy"]
    depth: NonNegative = 0
    content: str
    token_count: NonNegative
    earliest_at: str | None = None
    latest_at: str | None = None
    descendant_count: NonNegative = 0
    descendant_token_count: NonNegative = 0
    source_message_token_count: NonNegative = 0
    summarizer: str
    model: str | None = None
    fallback_level: str = "none"
    details: Any = None
    created_at: str | None = None
    source_entry_ids: list[str] = Field(default_factory=list)
    source_summary_ids: list[str] = Field(default_factory=list)
    compaction_entry_id: str | None = None  # legacy only: the `compaction` entry this node is written as

    @model_validator(mode="after")
    def _edges_are_sets(self) -> SummaryData:
        for name, ids in (("sourceEntryIds", self.source_entry_ids), ("sourceSummaryIds", self.source_summary_ids)):
            if len(set(ids)) != len(ids):
                raise ValueError(f"{name} lists an id twice")
        if self.summary_id in self.source_summary_ids:
            raise ValueError("sourceSummaryIds names the summary itself")
        return self


class ContextItemData(_Data):
    """One context item: a message (by transcript entry id) or a summary (by id)."""

    ordinal: NonNegative
    entry_id: str | None = None
    summary_id: str | None = None
    token_count: NonNegative

    @model_validator(mode="after")
    def _one_ref(self) -> ContextItemData:
        if (self.entry_id is None) == (self.summary_id is None):
            raise ValueError("an item needs exactly one of entryId and summaryId")
        return self


class ContextData(_Data):
    """The ``data`` of an ``openclaw-ctx/lcm-context`` entry: a session's `context_items`."""

    engine_id: str | None = None
    items: list[ContextItemData]

    @model_validator(mode="after")
    def _ordinals_unique(self) -> ContextData:
        ordinals = [i.ordinal for i in self.items]
        if len(set(ordinals)) != len(ordinals):
            raise ValueError("two items share an ordinal")
        return self


class LargeContentData(_Data):
    """The ``data`` of an ``openclaw-ctx/lcm-large-content`` entry: one `large_content` row (a stubbed message)."""

    file_id: Annotated[str, Field(min_length=1)]
    entry_id: Annotated[str, Field(min_length=1)]
    kind: str
    name: str | None = None
    mime_type: str | None = None
    byte_size: NonNegative
    token_count: NonNegative
    stub: str
    stub_token_count: NonNegative
    created_at: str | None = None


class TurnData(_Data):
    """The ``data`` of an ``openclaw-ctx/turn`` entry: one `turns` row of the session."""

    turn: Annotated[int, Field(ge=1)]
    assembled_tokens: NonNegative
    budget: NonNegative
    compacted: Annotated[int, Field(ge=0, le=1)] = 0
    at: str | None = None


class CompactionData(_Data):
    """The ``data`` of an ``openclaw-ctx/compaction-record`` entry: one `compactions` audit row."""

    before_session_id: Annotated[str, Field(min_length=1)]
    after_session_id: str | None = None
    engine_id: str
    trigger: str
    ok: int
    compacted: int
    reason: str | None = None
    tokens_before: int
    tokens_after: int | None = None
    summary_id: str | None = None
    first_kept_message_entry_id: str | None = None
    first_kept_entry_id: str | None = None
    summaries_created: NonNegative = 0
    started_at: Annotated[str, Field(min_length=1)]
    duration_ms: NonNegative = 0
    details: Any = None


def _dump(model: BaseModel) -> dict[str, Any]:
    # Export builds the models with model_construct: a stored row is written as it is, never refused
    # (import validates, and reports a row it cannot take).
    return model.model_dump(by_alias=True)


# --- export ------------------------------------------------------------------------------------------


async def summary_data(
    conn: AsyncConnection,
    entry_id_of: EntryIdOf,
    compaction_id_of: Callable[[str], str],
    *,
    session_id: str | None = None,
    summary_ids: list[str] | None = None,
) -> list[dict[str, Any]]:
    """The lcm-summary ``data`` of every summary created in `session_id` (or of `summary_ids`), sources first.

    That is every `leaf` and `condensed` node, and every `legacy` one the runtime wrote (a legacy node
    rebuilt from an imported `compaction` entry is rebuilt from it again). `entry_id_of(entry_id,
    message_id)` gives the transcript entry id a message is exported under, `compaction_id_of(summary_id)`
    the id of the `compaction` entry a legacy node is written as. Insertion (rowid) order is a valid
    order: the foreign keys of the edges make a node's sources older.
    """
    rows = (
        await conn.execute(
            select(Summary)
            .where(
                Summary.session_id == session_id if summary_ids is None else Summary.summary_id.in_(summary_ids),
                Summary.summarizer != IMPORT_SUMMARIZER,
            )
            .order_by(literal_column("summaries.rowid"))
        )
    ).all()
    if not rows:
        return []
    ids = [r.summary_id for r in rows]
    messages: dict[str, list[str]] = {}
    parents: dict[str, list[str]] = {}
    for start in range(0, len(ids), _CHUNK):
        chunk = ids[start : start + _CHUNK]
        edges = await conn.execute(
            select(SummaryMessage.summary_id, Message.entry_id, Message.message_id)
            .join(Message, Message.message_id == SummaryMessage.message_id)
            .where(SummaryMessage.summary_id.in_(chunk))
            .order_by(SummaryMessage.summary_id, SummaryMessage.ordinal)
        )
        for summary_id, entry_id, message_id in edges:
            messages.setdefault(summary_id, []).append(entry_id_of(entry_id, message_id))
        links = await conn.execute(
            select(SummaryParent.summary_id, SummaryParent.source_summary_id)
            .where(SummaryParent.summary_id.in_(chunk))
            .order_by(SummaryParent.summary_id, SummaryParent.ordinal)
        )
        for summary_id, source in links:
            parents.setdefault(summary_id, []).append(source)
    out = []
    for row in rows:
        data = SummaryData.model_construct(
            summary_id=row.summary_id,
            kind=row.kind,
            depth=row.depth,
            content=row.content,
            token_count=row.token_count,
            earliest_at=row.earliest_at,
            latest_at=row.latest_at,
            descendant_count=row.descendant_count,
            descendant_token_count=row.descendant_token_count,
            source_message_token_count=row.source_message_token_count,
            summarizer=row.summarizer,
            model=row.model,
            fallback_level=row.fallback_level,
            details=_loads(row.details_json),
            created_at=row.created_at,
            source_entry_ids=messages.get(row.summary_id, []),
            source_summary_ids=parents.get(row.summary_id, []),
            compaction_entry_id=compaction_id_of(row.summary_id) if row.kind == "legacy" else None,
        )
        dumped = _dump(data)
        if data.compaction_entry_id is None:
            del dumped["compactionEntryId"]
        out.append(dumped)
    return out


def _loads(raw: str | None) -> Any:
    return json.loads(raw) if raw is not None else None


async def context_data(conn: AsyncConnection, session: SessionRow, entry_id_of: EntryIdOf) -> dict[str, Any] | None:
    """The lcm-context ``data`` of a session whose projection is lossless-claw's, else None.

    That is a session of the lossless engine, or one whose context holds a leaf or condensed node.
    """
    rows = (
        await conn.execute(
            select(
                ContextItem.ordinal,
                ContextItem.item_type,
                ContextItem.summary_id,
                ContextItem.token_count,
                Message.entry_id,
                Message.message_id,
                Summary.kind,
            )
            .outerjoin(Message, Message.message_id == ContextItem.message_id)
            .outerjoin(Summary, Summary.summary_id == ContextItem.summary_id)
            .where(ContextItem.session_id == session.session_id)
            .order_by(ContextItem.ordinal)
        )
    ).all()
    if session.engine_id != LCM_ENGINE_ID and not any(r.kind in _DAG_KINDS for r in rows):
        return None
    items = [
        ContextItemData.model_construct(
            ordinal=r.ordinal,
            entry_id=entry_id_of(r.entry_id, r.message_id) if r.item_type == "message" else None,
            summary_id=r.summary_id if r.item_type == "summary" else None,
            token_count=r.token_count,
        )
        for r in rows
    ]
    data = _dump(ContextData.model_construct(engine_id=session.engine_id, items=items))
    data["items"] = [{k: v for k, v in item.items() if v is not None and k != "version"} for item in data["items"]]
    return data


async def large_content_data(conn: AsyncConnection, session_id: str, entry_id_of: EntryIdOf) -> list[dict[str, Any]]:
    """The lcm-large-content ``data`` of every externalised message written in `session_id`."""
    rows = (
        await conn.execute(
            select(LargeContent, Message.entry_id.label("entry_id"))
            .join(Message, Message.message_id == LargeContent.message_id)
            .where(Message.session_id == session_id)
            .order_by(literal_column("large_content.rowid"))
        )
    ).all()
    return [
        _dump(
            LargeContentData.model_construct(
                file_id=r.file_id,
                entry_id=entry_id_of(r.entry_id, r.message_id),
                kind=r.kind,
                name=r.name,
                mime_type=r.mime_type,
                byte_size=r.byte_size,
                token_count=r.token_count,
                stub=r.stub,
                stub_token_count=r.stub_token_count,
                created_at=r.created_at,
            )
        )
        for r in rows
    ]


async def turn_data(conn: AsyncConnection, session_id: str) -> list[dict[str, Any]]:
    """The ``openclaw-ctx/turn`` data of the turns whose messages went to `session_id`."""
    rows = (await conn.execute(select(Turn).where(Turn.session_id == session_id).order_by(Turn.turn))).all()
    return [
        _dump(
            TurnData.model_construct(
                turn=r.turn, assembled_tokens=r.assembled_tokens, budget=r.budget, compacted=r.compacted, at=r.at
            )
        )
        for r in rows
    ]


async def compaction_data(conn: AsyncConnection, session_id: str, entry_id_of: EntryIdOf) -> list[dict[str, Any]]:
    """The ``openclaw-ctx/compaction-record`` data of the runtime's compactions that ended in `session_id`.

    A row lives in the file of the session it rotated to (or of the one it compacted, without a
    rotation), which imports after every row it names. Rows an import derived from `compaction`
    entries (trigger ``import``) are derived again and not written.
    """
    rows = (
        await conn.execute(
            select(Compaction, Message.entry_id.label("kept_entry_id"))
            .outerjoin(Message, Message.message_id == Compaction.first_kept_message_id)
            .where(
                func.coalesce(Compaction.after_session_id, Compaction.before_session_id) == session_id,
                Compaction.trigger != "import",
            )
            .order_by(Compaction.compaction_id)
        )
    ).all()
    out = []
    for r in rows:
        kept = entry_id_of(r.kept_entry_id, r.first_kept_message_id) if r.first_kept_message_id is not None else None
        data = CompactionData.model_construct(
            before_session_id=r.before_session_id,
            after_session_id=r.after_session_id,
            engine_id=r.engine_id,
            trigger=r.trigger,
            ok=r.ok,
            compacted=r.compacted,
            reason=r.reason,
            tokens_before=r.tokens_before,
            tokens_after=r.tokens_after,
            summary_id=r.summary_id,
            first_kept_message_entry_id=kept,
            first_kept_entry_id=r.first_kept_entry_id,
            summaries_created=r.summaries_created,
            started_at=r.started_at,
            duration_ms=r.duration_ms,
            details=_loads(r.details_json),
        )
        out.append(_dump(data))
    return out


# --- import ------------------------------------------------------------------------------------------


@dataclass
class LcmEntries:
    """The lcm entries of a transcript that validated, in file order."""

    summaries: list[tuple[CustomEntry, SummaryData]]
    contexts: list[tuple[CustomEntry, ContextData]]
    large: list[tuple[CustomEntry, LargeContentData]]
    turns: list[tuple[CustomEntry, TurnData]]
    compactions: list[tuple[CustomEntry, CompactionData]]


def _reason(custom_type: str, exc: ValidationError) -> str:
    error = exc.errors()[0]
    where = ".".join(str(p) for p in error["loc"])
    return f"{custom_type} data{'.' + where if where else ''}: {error['msg']}"


def reject(t: Transcript, entry: Entry, reason: str) -> None:
    """Turn an entry read as valid into a malformed line (reported, kept verbatim; the tree walks through it)."""
    t.entries.remove(entry)
    t.by_id.pop(entry.id, None)
    t.broken_parents[entry.id] = entry.parent_id
    raw = entry.source if entry.source is not None else str(entry.raw)
    t.errors.append(TranscriptLineError(t.path, entry.line_no, reason, raw, entry.id, entry.parent_id))
    t.errors.sort(key=lambda e: e.line_no)


_MODELS: dict[str, tuple[str, type[_Data]]] = {
    SUMMARY_TYPE: ("summaries", SummaryData),
    CONTEXT_TYPE: ("contexts", ContextData),
    LARGE_CONTENT_TYPE: ("large", LargeContentData),
    TURN_TYPE: ("turns", TurnData),
    COMPACTION_TYPE: ("compactions", CompactionData),
}


def split_lcm_entries(t: Transcript) -> LcmEntries:
    """Validate every lcm entry of `t`; the invalid ones become malformed lines of `t`."""
    found = LcmEntries([], [], [], [], [])
    for entry in list(t.entries):
        if not isinstance(entry, CustomEntry) or entry.custom_type not in _MODELS:
            continue
        data = entry.data if isinstance(entry.data, dict) else None
        if data is None:
            reject(t, entry, f"{entry.custom_type} data: expected an object")
            continue
        field_name, model = _MODELS[entry.custom_type]
        try:
            getattr(found, field_name).append((entry, model.model_validate(data)))
        except ValidationError as exc:
            reject(t, entry, _reason(entry.custom_type, exc))
    return found


async def _message_ids(conn: AsyncConnection, session_key: str, entry_ids: Iterable[str]) -> dict[str, tuple[int, int]]:
    wanted = list(set(entry_ids))
    found: dict[str, tuple[int, int]] = {}
    for start in range(0, len(wanted), _CHUNK):
        rows = await conn.execute(
            select(Message.entry_id, Message.message_id, Message.token_count).where(
                Message.session_key == session_key, Message.entry_id.in_(wanted[start : start + _CHUNK])
            )
        )
        found.update({e: (m, n) for e, m, n in rows if e is not None})
    return found


async def _summary_keys(conn: AsyncConnection, summary_ids: Iterable[str]) -> dict[str, str]:
    wanted = list(set(summary_ids))
    found: dict[str, str] = {}
    for start in range(0, len(wanted), _CHUNK):
        rows = await conn.execute(
            select(Summary.summary_id, Summary.session_key).where(
                Summary.summary_id.in_(wanted[start : start + _CHUNK])
            )
        )
        found.update((row.summary_id, row.session_key) for row in rows)
    return found


@dataclass
class Restored:
    """What :func:`restore_summaries` did."""

    created: set[str]
    """Summaries inserted by this import."""
    by_compaction: dict[str, str]
    """``compaction`` entry id → the legacy summary it stands for (inserted now or before)."""


async def restore_summaries(conn: AsyncConnection, session: SessionRow, t: Transcript, found: LcmEntries) -> Restored:
    """Insert the file's summary nodes that the store lacks, with their edges.

    A node already stored under this key is skipped (re-imports add nothing); one whose sources are
    not stored, or whose id belongs to another key, becomes a malformed line of `t`.
    """
    nodes = found.summaries
    messages = await _message_ids(conn, session.session_key, (e for _, d in nodes for e in d.source_entry_ids))
    known = await _summary_keys(
        conn, [d.summary_id for _, d in nodes] + [s for _, d in nodes for s in d.source_summary_ids]
    )
    done = Restored(set(), {})
    for entry, data in nodes:
        if data.summary_id in known:
            if known[data.summary_id] != session.session_key:
                reject(
                    t,
                    entry,
                    f"{SUMMARY_TYPE}: {data.summary_id!r} is already stored under key {known[data.summary_id]!r}",
                )
            elif data.compaction_entry_id is not None:
                done.by_compaction[data.compaction_entry_id] = data.summary_id
            continue
        missing = [e for e in data.source_entry_ids if e not in messages]
        if missing:
            reject(t, entry, f"{SUMMARY_TYPE}: source message entry {missing[0]!r} is not stored under this key")
            continue
        absent = [s for s in data.source_summary_ids if known.get(s) != session.session_key]
        if absent:
            reject(t, entry, f"{SUMMARY_TYPE}: source summary {absent[0]!r} is not stored under this key")
            continue
        await insert_summary(
            conn,
            session,
            NewSummary(
                kind=data.kind,
                content=data.content,
                token_count=data.token_count,
                summarizer=data.summarizer,
                source_message_ids=[messages[e][0] for e in data.source_entry_ids],
                source_summary_ids=list(data.source_summary_ids),
                depth=data.depth,
                model=data.model,
                fallback_level=data.fallback_level,
                earliest_at=data.earliest_at,
                latest_at=data.latest_at,
                descendant_count=data.descendant_count,
                descendant_token_count=data.descendant_token_count,
                source_message_token_count=data.source_message_token_count,
                details=data.details,
                summary_id=data.summary_id,
                created_at=data.created_at,
            ),
        )
        known[data.summary_id] = session.session_key
        done.created.add(data.summary_id)
        if data.compaction_entry_id is not None:
            done.by_compaction[data.compaction_entry_id] = data.summary_id
    return done


async def restore_large_content(conn: AsyncConnection, session: SessionRow, t: Transcript, found: LcmEntries) -> int:
    """Insert the file's `large_content` rows the store lacks; returns how many.

    A row already stored (same file id, same key) is skipped; one whose message is not stored, is
    already externalised under another file id, or whose file id belongs to another key, becomes a
    malformed line of `t`.
    """
    if not found.large:
        return 0
    messages = await _message_ids(conn, session.session_key, (d.entry_id for _, d in found.large))
    stored = {
        row.file_id: (row.session_key, row.message_id)
        for row in await conn.execute(
            select(LargeContent.file_id, LargeContent.session_key, LargeContent.message_id).where(
                LargeContent.file_id.in_([d.file_id for _, d in found.large])
                | LargeContent.message_id.in_([m for m, _ in messages.values()])
            )
        )
    }
    taken = {message_id: file_id for file_id, (_, message_id) in stored.items()}
    created = 0
    for entry, data in found.large:
        message = messages.get(data.entry_id)
        if data.file_id in stored:
            if stored[data.file_id][0] != session.session_key:
                reject(
                    t,
                    entry,
                    f"{LARGE_CONTENT_TYPE}: {data.file_id!r} is already stored under key {stored[data.file_id][0]!r}",
                )
            continue
        if message is None:
            reject(t, entry, f"{LARGE_CONTENT_TYPE}: message entry {data.entry_id!r} is not stored under this key")
            continue
        if message[0] in taken:
            reject(t, entry, f"{LARGE_CONTENT_TYPE}: message entry {data.entry_id!r} is stored as {taken[message[0]]}")
            continue
        values = data.model_dump(exclude={"version", "entry_id", "created_at"})
        if data.created_at is not None:
            values["created_at"] = data.created_at
        await conn.execute(
            insert(LargeContent).values(session_key=session.session_key, message_id=message[0], **values)
        )
        stored[data.file_id] = (session.session_key, message[0])
        taken[message[0]] = data.file_id
        created += 1
    return created


async def restore_turns(conn: AsyncConnection, session: SessionRow, t: Transcript, found: LcmEntries) -> int:
    """Insert the file's `turns` rows the key lacks; returns how many.

    A turn number the key already has is skipped when it belongs to this session (a re-import) and is
    a malformed line of `t` otherwise.
    """
    if not found.turns:
        return 0
    stored = {
        row.turn: row.session_id
        for row in await conn.execute(select(Turn.turn, Turn.session_id).where(Turn.session_key == session.session_key))
    }
    rows = []
    for entry, data in found.turns:
        if data.turn in stored:
            if stored[data.turn] != session.session_id:
                reject(t, entry, f"{TURN_TYPE}: turn {data.turn} of this key is stored for session {stored[data.turn]}")
            continue
        stored[data.turn] = session.session_id
        values = data.model_dump(exclude={"version", "at"}) | ({"at": data.at} if data.at is not None else {})
        rows.append(values | {"session_key": session.session_key, "session_id": session.session_id})
    if rows:
        await conn.execute(insert(Turn), rows)
    return len(rows)


async def restore_compactions(conn: AsyncConnection, session: SessionRow, t: Transcript, found: LcmEntries) -> int:
    """Append the file's `compactions` audit rows the store lacks; returns how many.

    A row is known by its key, session, trigger and start time. One that names a session, summary or
    message this key does not have is a malformed line of `t`.
    """
    if not found.compactions:
        return 0
    datas = [d for _, d in found.compactions]
    sessions = {
        sid
        for (sid,) in await conn.execute(
            select(Session.session_id).where(
                Session.session_key == session.session_key,
                Session.session_id.in_({d.before_session_id for d in datas} | {d.after_session_id for d in datas}),
            )
        )
    }
    summaries = await _summary_keys(conn, (d.summary_id for d in datas if d.summary_id))
    messages = await _message_ids(conn, session.session_key, (d.first_kept_message_entry_id or "" for d in datas))
    stored = {
        (row.before_session_id, row.trigger, row.started_at)
        for row in await conn.execute(
            select(Compaction.before_session_id, Compaction.trigger, Compaction.started_at).where(
                Compaction.session_key == session.session_key
            )
        )
    }
    created = 0
    for entry, data in found.compactions:
        if (data.before_session_id, data.trigger, data.started_at) in stored:
            continue
        named = [data.before_session_id, *([data.after_session_id] if data.after_session_id else [])]
        problem = (
            next((f"session {s!r}" for s in named if s not in sessions), None)
            or (
                f"summary {data.summary_id!r}"
                if data.summary_id and summaries.get(data.summary_id) != session.session_key
                else None
            )
            or (
                f"message entry {data.first_kept_message_entry_id!r}"
                if data.first_kept_message_entry_id and data.first_kept_message_entry_id not in messages
                else None
            )
        )
        if problem is not None:
            reject(t, entry, f"{COMPACTION_TYPE}: {problem} is not stored under this key")
            continue
        kept = messages[data.first_kept_message_entry_id][0] if data.first_kept_message_entry_id else None
        await record_compaction(
            conn,
            session_key=session.session_key,
            first_kept_message_id=kept,
            **data.model_dump(exclude={"version", "first_kept_message_entry_id"}),
        )
        stored.add((data.before_session_id, data.trigger, data.started_at))
        created += 1
    return created


async def resolve_context(
    conn: AsyncConnection, session: SessionRow, t: Transcript, found: LcmEntries
) -> tuple[str | None, list[dict[str, Any]]] | None:
    """The engine id and `context_items` rows of the last lcm-context entry on the active branch, or None.

    An entry that names a message or summary the store does not have becomes a malformed line of `t`
    (and the one before it on the branch is tried).
    """
    branch = {e.id for e in t.active_branch()}
    for entry, data in reversed([(e, d) for e, d in found.contexts if e.id in branch]):
        messages = await _message_ids(conn, session.session_key, (i.entry_id for i in data.items if i.entry_id))
        summaries = await _summary_keys(conn, (i.summary_id for i in data.items if i.summary_id))
        problem = next(
            (
                f"entry {i.entry_id!r}" if i.entry_id is not None else f"summary {i.summary_id!r}"
                for i in data.items
                if (i.entry_id is not None and i.entry_id not in messages)
                or (i.summary_id is not None and summaries.get(i.summary_id) != session.session_key)
            ),
            None,
        )
        if problem is not None:
            reject(t, entry, f"{CONTEXT_TYPE}: item {problem} is not stored under this key")
            continue
        rows = [
            {
                "session_id": session.session_id,
                "ordinal": i.ordinal,
                "item_type": "message" if i.entry_id is not None else "summary",
                "message_id": messages[i.entry_id][0] if i.entry_id is not None else None,
                "summary_id": i.summary_id,
                "token_count": i.token_count,
            }
            for i in data.items
        ]
        return data.engine_id, rows
    return None


async def set_engine(conn: AsyncConnection, session: SessionRow, engine_id: str | None) -> None:
    """Record whose projection the session's context items are."""
    if engine_id is not None and engine_id != session.engine_id:
        await conn.execute(update(Session).where(Session.session_id == session.session_id).values(engine_id=engine_id))
