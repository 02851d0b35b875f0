"""OpenClaw session transcripts (JSONL, version 3): a streaming reader and the context they rebuild to.

A transcript file is one header line (``{"type":"session","version":3,"id",...}``) followed by entries
``{type, id, parentId, timestamp, ...}`` forming an append-only tree; the active branch runs from the
leaf (the last appended entry) back to the root. Reading is line by line, so a file of any size is
never loaded whole, and a malformed line becomes a :class:`TranscriptLineError` in
``Transcript.errors`` instead of stopping the read.

Example::

    transcript = read_transcript("session.jsonl")
    for error in transcript.errors:
        print(error)                      # file:line: reason
    messages = transcript.context_messages()   # what OpenClaw's buildSessionContext shows the model
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from openclaw_ctx.errors import InvalidMessageError
from openclaw_ctx.messages import (
    AgentMessage,
    AssistantMessage,
    BranchSummaryMessage,
    CompactionSummaryMessage,
    CustomMessage,
    parse_message,
    to_wire,
)

__all__ = [
    "ENTRY_TYPES",
    "TRANSCRIPT_VERSION",
    "BranchSummaryEntry",
    "CompactionEntry",
    "CustomEntry",
    "CustomMessageEntry",
    "Entry",
    "LabelEntry",
    "MessageEntry",
    "ModelChangeEntry",
    "SessionContext",
    "SessionHeader",
    "SessionInfoEntry",
    "ThinkingLevelChangeEntry",
    "Transcript",
    "TranscriptLineError",
    "UnknownEntry",
    "context_message",
    "iso_to_ms",
    "iter_entries",
    "iter_lines",
    "parse_entry",
    "read_transcript",
]

TRANSCRIPT_VERSION = 3
ENTRY_TYPES = (
    "message",
    "compaction",
    "branch_summary",
    "custom",
    "custom_message",
    "model_change",
    "thinking_level_change",
    "label",
    "session_info",
)
_PROGRESS_CHUNK = 1 << 20
_NO_HEADER = 'missing session header (line 1 must be {"type":"session",…})'


@dataclass(frozen=True)
class TranscriptLineError:
    """A line that could not be read; `entry_id`/`parent_id` are kept when the JSON still names them."""

    file: str
    line_no: int
    reason: str
    raw: str
    entry_id: str | None = None
    parent_id: str | None = None

    def __str__(self) -> str:
        return f"{self.file}:{self.line_no}: {self.reason}"


@dataclass(frozen=True)
class SessionHeader:
    """Line 1 of a transcript."""

    id: str
    version: int
    timestamp: str | None
    cwd: str | None
    parent_session: str | None
    raw: dict[str, Any]

    def to_json(self) -> dict[str, Any]:
        """The header as written to the file (unknown keys kept)."""
        return dict(self.raw)


@dataclass(kw_only=True)
class Entry:
    """Base of every transcript entry. `raw` is the entry's JSON object (without `message` for messages)."""

    type: str
    id: str
    parent_id: str | None
    timestamp: str | None
    line_no: int
    raw: dict[str, Any] = field(repr=False)
    # The line exactly as read (kept for non-message entries only, which are small).
    source: str | None = field(default=None, repr=False)

    def to_json(self) -> dict[str, Any]:
        """The entry as a JSON object for the file."""
        return dict(self.raw)


@dataclass(kw_only=True)
class MessageEntry(Entry):
    """`message`: one AgentMessage."""

    message: AgentMessage

    def to_json(self) -> dict[str, Any]:
        """The envelope keys followed by the message in OpenClaw's wire form."""
        return {**self.raw, "message": to_wire(self.message)}


@dataclass(kw_only=True)
class CompactionEntry(Entry):
    """`compaction`: the summary that replaces the branch's entries before `first_kept_entry_id`."""

    summary: str
    first_kept_entry_id: str | None
    tokens_before: int
    details: Any = None
    from_hook: bool | None = None


@dataclass(kw_only=True)
class BranchSummaryEntry(Entry):
    """`branch_summary`: summary of a branch the conversation came back from (in context)."""

    from_id: str | None
    summary: str
    details: Any = None
    from_hook: bool | None = None


@dataclass(kw_only=True)
class CustomEntry(Entry):
    """`custom`: extension state, never in model context."""

    custom_type: str
    data: Any = None


@dataclass(kw_only=True)
class CustomMessageEntry(Entry):
    """`custom_message`: extension-injected content that IS in model context."""

    custom_type: str
    content: Any
    details: Any = None
    display: bool = True


@dataclass(kw_only=True)
class ModelChangeEntry(Entry):
    """`model_change`: the user switched provider/model."""

    provider: str | None
    model_id: str | None


@dataclass(kw_only=True)
class ThinkingLevelChangeEntry(Entry):
    """`thinking_level_change`: the reasoning effort changed."""

    thinking_level: str | None


@dataclass(kw_only=True)
class LabelEntry(Entry):
    """`label`: a bookmark on another entry (`label` None clears it)."""

    target_id: str | None
    label: str | None


@dataclass(kw_only=True)
class SessionInfoEntry(Entry):
    """`session_info`: the session's display name."""

    name: str | None


@dataclass(kw_only=True)
class UnknownEntry(Entry):
    """An entry type this code does not know; kept raw."""


@dataclass(frozen=True)
class SessionContext:
    """What buildSessionContext derives from a branch: the messages, and the latest settings."""

    messages: list[AgentMessage]
    thinking_level: str
    model: dict[str, str | None] | None


class _EntryError(ValueError):
    """A line that is JSON but not a valid entry."""


def _opt_str(obj: dict[str, Any], key: str, where: str) -> str | None:
    value = obj.get(key)
    if value is not None and not isinstance(value, str):
        raise _EntryError(f"{where}.{key}: expected a string, got {type(value).__name__}")
    return value


def _req_str(obj: dict[str, Any], key: str, where: str) -> str:
    value = _opt_str(obj, key, where)
    if value is None:
        raise _EntryError(f"{where}.{key}: required")
    return value


def _opt_bool(obj: dict[str, Any], key: str, where: str) -> bool | None:
    value = obj.get(key)
    if value is not None and not isinstance(value, bool):
        raise _EntryError(f"{where}.{key}: expected a boolean, got {type(value).__name__}")
    return value


def _typed_fields(kind: str, obj: dict[str, Any]) -> tuple[type[Entry], dict[str, Any]]:
    where = kind
    if kind == "message":
        try:
            message = parse_message(obj.get("message"), where="message")
        except InvalidMessageError as exc:
            raise _EntryError(exc.detail) from exc
        return MessageEntry, {"message": message}
    if kind == "compaction":
        tokens = obj.get("tokensBefore", 0)
        if isinstance(tokens, bool) or not isinstance(tokens, int):
            raise _EntryError(f"compaction.tokensBefore: expected an integer, got {tokens!r}")
        return CompactionEntry, {
            "summary": _req_str(obj, "summary", where),
            "first_kept_entry_id": _opt_str(obj, "firstKeptEntryId", where),
            "tokens_before": tokens,
            "details": obj.get("details"),
            "from_hook": _opt_bool(obj, "fromHook", where),
        }
    if kind == "branch_summary":
        return BranchSummaryEntry, {
            "from_id": _opt_str(obj, "fromId", where),
            "summary": _req_str(obj, "summary", where),
            "details": obj.get("details"),
            "from_hook": _opt_bool(obj, "fromHook", where),
        }
    if kind == "custom":
        return CustomEntry, {"custom_type": _req_str(obj, "customType", where), "data": obj.get("data")}
    if kind == "custom_message":
        content = obj.get("content")
        if not isinstance(content, str | list):
            raise _EntryError("custom_message.content: expected a string or a list of blocks")
        display = _opt_bool(obj, "display", where)
        custom_type = _req_str(obj, "customType", where)
        try:
            parse_message({"role": "custom", "customType": custom_type, "content": content}, where="custom_message")
        except InvalidMessageError as exc:
            raise _EntryError(exc.detail) from exc
        return CustomMessageEntry, {
            "custom_type": custom_type,
            "content": content,
            "details": obj.get("details"),
            "display": True if display is None else display,
        }
    if kind == "model_change":
        return ModelChangeEntry, {
            "provider": _opt_str(obj, "provider", where),
            "model_id": _opt_str(obj, "modelId", where),
        }
    if kind == "thinking_level_change":
        return ThinkingLevelChangeEntry, {"thinking_level": _opt_str(obj, "thinkingLevel", where)}
    if kind == "label":
        return LabelEntry, {"target_id": _opt_str(obj, "targetId", where), "label": _opt_str(obj, "label", where)}
    if kind == "session_info":
        return SessionInfoEntry, {"name": _opt_str(obj, "name", where)}
    return UnknownEntry, {}


def parse_entry(obj: dict[str, Any], line_no: int) -> Entry:
    """Build the typed entry for one decoded line.

    Raises:
        ValueError: naming the missing or ill-typed field.
    """
    kind = obj.get("type")
    if not isinstance(kind, str) or not kind:
        raise _EntryError("entry.type: required")
    entry_id = _req_str(obj, "id", kind)
    if not entry_id:
        raise _EntryError(f"{kind}.id: must not be empty")
    cls, extra = _typed_fields(kind, obj)
    raw = {k: v for k, v in obj.items() if k != "message"} if cls is MessageEntry else obj
    return cls(
        type=kind,
        id=entry_id,
        parent_id=_opt_str(obj, "parentId", kind),
        timestamp=_opt_str(obj, "timestamp", kind),
        line_no=line_no,
        raw=raw,
        **extra,
    )


def _parse_header(obj: dict[str, Any]) -> SessionHeader:
    version = obj.get("version", 1)
    if isinstance(version, bool) or not isinstance(version, int):
        raise _EntryError(f"session.version: expected an integer, got {version!r}")
    if version > TRANSCRIPT_VERSION:
        raise _EntryError(f"session.version: {version} is newer than this reader (max {TRANSCRIPT_VERSION})")
    return SessionHeader(
        id=_req_str(obj, "id", "session"),
        version=version,
        timestamp=_opt_str(obj, "timestamp", "session"),
        cwd=_opt_str(obj, "cwd", "session"),
        parent_session=_opt_str(obj, "parentSession", "session"),
        raw=obj,
    )


def iter_lines(
    path: str | Path, *, on_bytes: Callable[[int], None] | None = None
) -> Iterator[tuple[int, str, dict[str, Any] | TranscriptLineError]]:
    """Decode a JSONL file line by line: ``(line_no, raw, object | error)``; blank lines are skipped.

    Args:
        path: the transcript file.
        on_bytes: called with the number of bytes consumed, about every megabyte and at the end.
    """
    name = str(path)
    pending = 0
    with open(path, "rb") as handle:
        for line_no, data in enumerate(handle, start=1):
            pending += len(data)
            if on_bytes is not None and pending >= _PROGRESS_CHUNK:
                on_bytes(pending)
                pending = 0
            data = data.rstrip(b"\r\n")
            if not data.strip():
                continue
            try:
                raw = data.decode("utf-8")
            except UnicodeDecodeError as exc:
                text = data.decode("utf-8", "replace")
                yield line_no, text, TranscriptLineError(name, line_no, f"not valid UTF-8 (byte {exc.start})", text)
                continue
            try:
                obj = json.loads(raw)
            except json.JSONDecodeError as exc:
                yield (
                    line_no,
                    raw,
                    TranscriptLineError(name, line_no, f"not valid JSON ({exc.msg} at char {exc.pos})", raw),
                )
                continue
            if not isinstance(obj, dict):
                reason = f"expected a JSON object, got {type(obj).__name__}"
                yield line_no, raw, TranscriptLineError(name, line_no, reason, raw)
                continue
            yield line_no, raw, obj
    if on_bytes is not None and pending:
        on_bytes(pending)


def _legacy_upgrade(obj: dict[str, Any], line_no: int, previous_id: str | None, order: list[str]) -> None:
    # v1 files had no tree fields and v2 called custom messages "hookMessage"; upgrade in place like pi does.
    if "id" not in obj:
        obj["id"] = f"{line_no:08x}"
        obj.setdefault("parentId", previous_id)
    if obj.get("type") == "compaction" and "firstKeptEntryId" not in obj:
        index = obj.get("firstKeptEntryIndex")
        if isinstance(index, int) and 0 <= index < len(order):
            obj["firstKeptEntryId"] = order[index]
    message = obj.get("message")
    if isinstance(message, dict) and message.get("role") == "hookMessage":
        message["role"] = "custom"


def iter_entries(
    path: str | Path, *, on_bytes: Callable[[int], None] | None = None
) -> Iterator[SessionHeader | Entry | TranscriptLineError]:
    """Stream a transcript: its header, then each entry or line error, in file order (see `iter_lines`)."""
    name = str(path)
    header: SessionHeader | None = None
    seen: dict[str, int] = {}
    order: list[str] = []
    first = True
    for line_no, raw, obj in iter_lines(path, on_bytes=on_bytes):
        if isinstance(obj, TranscriptLineError):
            first = False
            yield obj
            continue
        if first:
            first = False
            if obj.get("type") == "session":
                try:
                    header = _parse_header(obj)
                except _EntryError as exc:
                    yield TranscriptLineError(name, line_no, str(exc), raw)
                    continue
                yield header
                continue
            yield TranscriptLineError(
                name, line_no, 'missing session header (line 1 must be {"type":"session",…})', raw
            )
        if header is not None and header.version < TRANSCRIPT_VERSION:
            _legacy_upgrade(obj, line_no, order[-1] if order else None, order)
        entry_id, parent = obj.get("id"), obj.get("parentId")
        ids = (entry_id if isinstance(entry_id, str) else None, parent if isinstance(parent, str) else None)
        try:
            if obj.get("type") == "session":
                raise _EntryError("a second session header")
            entry = parse_entry(obj, line_no)
        except _EntryError as exc:
            yield TranscriptLineError(name, line_no, str(exc), raw, *ids)
            continue
        if entry.id in seen:
            reason = f"duplicate entry id {entry.id!r} (first at line {seen[entry.id]})"
            yield TranscriptLineError(name, line_no, reason, raw)
            continue
        seen[entry.id] = line_no
        order.append(entry.id)
        if not isinstance(entry, MessageEntry):
            entry.source = raw
        yield entry


def iso_to_ms(value: str | None) -> int | None:
    """An ISO-8601 timestamp as epoch milliseconds (None when absent or unparseable)."""
    if not value:
        return None
    try:
        return int(datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp() * 1000)
    except ValueError:
        return None


@dataclass
class Transcript:
    """A whole transcript: header, entries in file order, and the lines that could not be read."""

    path: str
    header: SessionHeader | None
    entries: list[Entry]
    errors: list[TranscriptLineError]
    by_id: dict[str, Entry] = field(default_factory=dict, repr=False)
    # Malformed lines that still named an id: the tree walks through them to their parent.
    broken_parents: dict[str, str | None] = field(default_factory=dict, repr=False)

    @property
    def leaf(self) -> Entry | None:
        """The last appended entry (OpenClaw's leaf after loading)."""
        return self.entries[-1] if self.entries else None

    def active_branch(self, leaf_id: str | None = None) -> list[Entry]:
        """Entries from the root to the leaf (default: the last appended entry), following `parentId`."""
        current = leaf_id if leaf_id is not None else (self.leaf.id if self.leaf else None)
        path: list[Entry] = []
        visited: set[str] = set()
        while current is not None and current not in visited:
            visited.add(current)
            entry = self.by_id.get(current)
            if entry is not None:
                path.append(entry)
                current = entry.parent_id
            else:
                current = self.broken_parents.get(current)
        path.reverse()
        return path

    def context_entries(self, leaf_id: str | None = None) -> list[Entry]:
        """The branch entries that make up model context, in order (buildSessionContext's selection).

        With a compaction on the branch: the latest compaction entry first, then the entries from its
        `firstKeptEntryId` up to it, then everything after it. Only entries for which
        :func:`context_message` returns a message are included (besides the compaction itself).
        """
        path = self.active_branch(leaf_id)
        at = max((i for i, e in enumerate(path) if isinstance(e, CompactionEntry)), default=-1)
        if at < 0:
            return [e for e in path if context_message(e) is not None]
        compaction = path[at]
        assert isinstance(compaction, CompactionEntry)
        ids = [e.id for e in path[:at]]
        kept = path[ids.index(compaction.first_kept_entry_id) : at] if compaction.first_kept_entry_id in ids else []
        return [compaction, *(e for e in [*kept, *path[at + 1 :]] if context_message(e) is not None)]

    def session_context(self, leaf_id: str | None = None) -> SessionContext:
        """Messages, thinking level and model the way OpenClaw's buildSessionContext derives them."""
        thinking: str = "off"
        model: dict[str, str | None] | None = None
        for entry in self.active_branch(leaf_id):
            if isinstance(entry, ThinkingLevelChangeEntry) and entry.thinking_level:
                thinking = entry.thinking_level
            elif isinstance(entry, ModelChangeEntry):
                model = {"provider": entry.provider, "modelId": entry.model_id}
            elif isinstance(entry, MessageEntry) and isinstance(entry.message, AssistantMessage):
                model = {"provider": entry.message.provider, "modelId": entry.message.model}
        messages = [m for m in (context_message(e) for e in self.context_entries(leaf_id)) if m is not None]
        return SessionContext(messages, thinking, model)

    def context_messages(self, leaf_id: str | None = None) -> list[AgentMessage]:
        """The messages OpenClaw would put in the model context for the active branch."""
        return self.session_context(leaf_id).messages


def _compaction_message(entry: CompactionEntry) -> CompactionSummaryMessage:
    return CompactionSummaryMessage(
        summary=entry.summary, tokens_before=entry.tokens_before, timestamp=iso_to_ms(entry.timestamp)
    )


def context_message(entry: Entry) -> AgentMessage | None:
    """The message an entry contributes to model context, or None (custom, settings, labels, …)."""
    if isinstance(entry, MessageEntry):
        return entry.message
    if isinstance(entry, CompactionEntry):
        return _compaction_message(entry)
    stamp = iso_to_ms(entry.timestamp)
    if isinstance(entry, BranchSummaryEntry) and entry.summary:
        return BranchSummaryMessage(summary=entry.summary, from_id=entry.from_id, timestamp=stamp)
    if isinstance(entry, CustomMessageEntry):
        return CustomMessage.model_validate(
            {
                "customType": entry.custom_type,
                "content": entry.content,
                "display": entry.display,
                "details": entry.details,
                "timestamp": stamp,
            }
        )
    return None


def read_transcript(path: str | Path, *, on_bytes: Callable[[int], None] | None = None) -> Transcript:
    """Read a whole transcript, line by line; malformed lines are collected in `errors`, never raised.

    `on_bytes` reports reading progress as in :func:`iter_lines`.

    Raises:
        OSError: the file cannot be opened.
    """
    transcript = Transcript(path=str(path), header=None, entries=[], errors=[])
    for item in iter_entries(path, on_bytes=on_bytes):
        if isinstance(item, SessionHeader):
            transcript.header = item
        elif isinstance(item, TranscriptLineError):
            transcript.errors.append(item)
            if item.entry_id is not None and item.entry_id not in transcript.by_id:
                transcript.broken_parents.setdefault(item.entry_id, item.parent_id)
        else:
            transcript.entries.append(item)
            transcript.by_id[item.id] = item
    return transcript
