"""The typed entries of an OpenClaw transcript (JSONL, version 3) and the parsing of one decoded line.

Each line is ``{type, id, parentId, timestamp, ...}``; :func:`parse_entry` checks the fields OpenClaw
relies on and raises :class:`EntryError` naming the first one that is missing or ill-typed. Every
entry keeps its JSON object in `raw`, so writing it back gives the line OpenClaw wrote.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from openclaw_ctx.errors import InvalidMessageError
from openclaw_ctx.messages import MAX_SAFE_INTEGER, AgentMessage, parse_message, to_wire

__all__ = [
    "ENTRY_TYPES",
    "NEWEST_READABLE_VERSION",
    "TRANSCRIPT_VERSION",
    "BranchSummaryEntry",
    "CompactionEntry",
    "CustomEntry",
    "CustomMessageEntry",
    "Entry",
    "EntryError",
    "LabelEntry",
    "MessageEntry",
    "ModelChangeEntry",
    "ResetEntry",
    "SessionHeader",
    "SessionInfoEntry",
    "ThinkingLevelChangeEntry",
    "TranscriptLineError",
    "UnknownEntry",
    "parse_entry",
    "parse_header",
]

TRANSCRIPT_VERSION = 3
"""The version export writes: pi's, which every OpenClaw reads."""
NEWEST_READABLE_VERSION = 4
"""OpenClaw 2026.9 writes version 4; its entries read as version 3's (it migrates nothing from 3 to 4)."""
ENTRY_TYPES = (
    "message",
    "compaction",
    "reset",
    "branch_summary",
    "custom",
    "custom_message",
    "model_change",
    "thinking_level_change",
    "label",
    "session_info",
)


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
    # The line as read, when writing `raw` back would not give the same bytes (spacing, key escapes).
    source: str | None = field(default=None, repr=False, compare=False)

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
    # The line exactly as read: always for non-message entries (small); for a message only when writing
    # it from its parsed form (`to_json`) would not give the same bytes (key order, JS floats, a v1 line).
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
class ResetEntry(Entry):
    """`reset` (OpenClaw 2026.9, `/new` and `/reset`): a context boundary without a summary.

    Context restarts after it; with `first_kept_entry_id` the user and assistant messages (and the tool
    results paired with them) from that entry up to the reset stay in context.
    """

    first_kept_entry_id: str | None
    reason: str | None


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
    """An entry this code does not interpret (a kind it does not know, a `system` message); kept raw."""


class EntryError(ValueError):
    """A line that is JSON but not a valid entry (the message names the field)."""


def _opt_str(obj: dict[str, Any], key: str, where: str) -> str | None:
    value = obj.get(key)
    if value is not None and not isinstance(value, str):
        raise EntryError(f"{where}.{key}: expected a string, got {type(value).__name__}")
    return value


def _req_str(obj: dict[str, Any], key: str, where: str) -> str:
    value = _opt_str(obj, key, where)
    if value is None:
        raise EntryError(f"{where}.{key}: required")
    return value


def _opt_bool(obj: dict[str, Any], key: str, where: str) -> bool | None:
    value = obj.get(key)
    if value is not None and not isinstance(value, bool):
        raise EntryError(f"{where}.{key}: expected a boolean, got {type(value).__name__}")
    return value


def _typed_fields(kind: str, obj: dict[str, Any]) -> tuple[type[Entry], dict[str, Any]]:
    where = kind
    if kind == "message":
        if isinstance(obj.get("message"), dict) and obj["message"].get("role") == "system":
            # OpenClaw keeps system messages in the transcript but never sends them to a model.
            return UnknownEntry, {}
        try:
            message = parse_message(obj.get("message"), where="message")
        except InvalidMessageError as exc:
            raise EntryError(exc.detail) from exc
        return MessageEntry, {"message": message}
    if kind == "compaction":
        tokens = obj.get("tokensBefore", 0)
        if isinstance(tokens, bool) or not isinstance(tokens, int) or abs(tokens) > MAX_SAFE_INTEGER:
            raise EntryError(f"compaction.tokensBefore: expected an integer of at most 2**53, got {tokens!r:.40}")
        return CompactionEntry, {
            "summary": _req_str(obj, "summary", where),
            "first_kept_entry_id": _opt_str(obj, "firstKeptEntryId", where),
            "tokens_before": tokens,
            "details": obj.get("details"),
            "from_hook": _opt_bool(obj, "fromHook", where),
        }
    if kind == "reset":
        return ResetEntry, {
            "first_kept_entry_id": _opt_str(obj, "firstKeptEntryId", where),
            "reason": _opt_str(obj, "reason", where),
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
            raise EntryError("custom_message.content: expected a string or a list of blocks")
        display = _opt_bool(obj, "display", where)
        custom_type = _req_str(obj, "customType", where)
        try:
            parse_message({"role": "custom", "customType": custom_type, "content": content}, where="custom_message")
        except InvalidMessageError as exc:
            raise EntryError(exc.detail) from exc
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
        raise EntryError("entry.type: required")
    entry_id = _req_str(obj, "id", kind)
    if not entry_id:
        raise EntryError(f"{kind}.id: must not be empty")
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


def parse_header(obj: dict[str, Any]) -> SessionHeader:
    version = obj.get("version", 1)
    if isinstance(version, bool) or not isinstance(version, int):
        raise EntryError(f"session.version: expected an integer, got {version!r}")
    if version > NEWEST_READABLE_VERSION:
        raise EntryError(f"session.version: {version} is newer than this reader (max {NEWEST_READABLE_VERSION})")
    return SessionHeader(
        id=_req_str(obj, "id", "session"),
        version=version,
        timestamp=_opt_str(obj, "timestamp", "session"),
        cwd=_opt_str(obj, "cwd", "session"),
        parent_session=_opt_str(obj, "parentSession", "session"),
        raw=obj,
    )
