"""A transcript's tree: the active branch OpenClaw navigates to, and the model context it rebuilds.

Entries form an append-only tree through `parentId`, read the way OpenClaw 2026.9 reads it
(:mod:`openclaw_ctx.transcripts.navigation`: stale parents, `leaf` records, side appends, resets).
:meth:`Transcript.session_context` derives what OpenClaw's buildSessionContext shows the model: the
last boundary on the branch (a compaction's summary, or a reset), the entries it kept, and everything
after it.
"""

from __future__ import annotations

import heapq
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from openclaw_ctx._time import ms_from_iso
from openclaw_ctx.messages import (
    AgentMessage,
    AssistantMessage,
    BashExecutionMessage,
    BranchSummaryMessage,
    CompactionSummaryMessage,
    CustomMessage,
    ToolResultMessage,
    UserMessage,
)
from openclaw_ctx.transcripts.entries import (
    BranchSummaryEntry,
    CompactionEntry,
    CustomEntry,
    CustomMessageEntry,
    Entry,
    LabelEntry,
    MessageEntry,
    ModelChangeEntry,
    ResetEntry,
    SessionHeader,
    SessionInfoEntry,
    ThinkingLevelChangeEntry,
    TranscriptLineError,
    UnknownEntry,
)
from openclaw_ctx.transcripts.navigation import Navigation, first_kept_overrides, scan
from openclaw_ctx.transcripts.pairing import paired_results

__all__ = ["SessionContext", "Transcript", "context_message"]

Part = Literal["current", "retained", "reset-retained"]
_RESET_REASONS = frozenset({"new", "reset", "idle", "daily", "cron-stale"})
_REPLAY_CHECKPOINTS = frozenset(
    {"anthropic-compaction", "openai-responses-compaction", "openai-responses-retained-compaction"}
)


@dataclass(frozen=True)
class SessionContext:
    """What buildSessionContext derives from a branch: the messages, and the latest settings."""

    messages: list[AgentMessage]
    thinking_level: str | None
    model: dict[str, str | None] | None


@dataclass
class Transcript:
    """A whole transcript: header, entries in file order, and the lines that could not be read."""

    path: str
    header: SessionHeader | None
    entries: list[Entry]
    errors: list[TranscriptLineError]
    by_id: dict[str, Entry] = field(default_factory=dict, repr=False)
    _navigation: Navigation | None = field(default=None, repr=False)
    _first_kept: dict[str, str] | None = field(default=None, repr=False)

    def navigation(self) -> Navigation:
        """The tree as OpenClaw navigates it (computed once; malformed lines that name an id are opaque records)."""
        if self._navigation is None:
            self._navigation = scan(self._records())
        return self._navigation

    def _records(self) -> Iterator[Mapping[str, Any]]:
        lines: Iterator[tuple[int, Mapping[str, Any]]] = heapq.merge(
            ((e.line_no, e.raw) for e in self.entries),
            ((e.line_no, {"id": e.entry_id, "parentId": e.parent_id}) for e in self.errors if e.entry_id is not None),
            key=lambda pair: pair[0],
        )
        return (record for _, record in lines)

    @property
    def leaf(self) -> Entry | None:
        """Where OpenClaw's navigation ends: the last appended entry, unless `leaf` records or side appends moved it."""
        leaf = self.navigation().leaf
        return self.by_id.get(leaf) if leaf is not None else None

    def parent_of(self, entry_id: str) -> str | None:
        """An entry's parent as navigation resolved it (its `parentId`, unless that was stale or reparented)."""
        node = self.navigation().by_id.get(entry_id)
        return node.parent if node is not None else None

    def active_branch(self, leaf_id: str | None = None) -> list[Entry]:
        """Entries from the root to the leaf (default: navigation's leaf), along the resolved parents."""
        return [self.by_id[n.id] for n in self.navigation().path(leaf_id) if n.id in self.by_id]

    def first_kept(self, boundary: CompactionEntry | ResetEntry) -> str | None:
        """A boundary's `firstKeptEntryId`, moved off an opaque record the way OpenClaw moves it."""
        if self._first_kept is None:
            nodes = self.navigation().path()
            written = {
                e.id: e.first_kept_entry_id for e in self.by_id.values() if isinstance(e, CompactionEntry | ResetEntry)
            }
            indexed = {e.id: _indexed(e) for e in self.by_id.values()}
            self._first_kept = dict(first_kept_overrides(nodes, self.navigation(), indexed, written))
        return self._first_kept.get(boundary.id, boundary.first_kept_entry_id)

    def context_window(self, leaf_id: str | None = None) -> list[tuple[Entry, Part]]:
        """The branch entries OpenClaw's iterateSessionContextEntries selects, with the part each one is in.

        The last compaction or reset on the branch comes first ("current"), then the entries it kept from
        its `firstKeptEntryId` ("retained"; after a reset only user and assistant messages and their paired
        tool results, "reset-retained"), then everything after it. Only messages, custom messages and
        branch summaries count; a message with ``excludeFromContext: true`` does not (unless a reset kept it).
        """
        path = self.active_branch(leaf_id)
        at = max((i for i, e in enumerate(path) if isinstance(e, CompactionEntry | ResetEntry)), default=-1)
        boundary = path[at] if at >= 0 else None
        first = at
        reset_kept: set[str] | None = None
        if isinstance(boundary, CompactionEntry | ResetEntry):
            kept_id = self.first_kept(boundary)
            first = next((i for i, e in enumerate(path[:at]) if e.id == kept_id), at)
            if isinstance(boundary, ResetEntry):
                reset_kept = _reset_kept(path[first:at])
        window: list[tuple[Entry, Part]] = [(boundary, "current")] if boundary is not None else []
        for i, entry in enumerate(path):
            retained = i < at
            if i == at or (retained and (i < first or (reset_kept is not None and entry.id not in reset_kept))):
                continue
            if not isinstance(entry, MessageEntry | CustomMessageEntry | BranchSummaryEntry):
                continue
            kept_by_reset = reset_kept is not None and entry.id in reset_kept
            if isinstance(entry, MessageEntry) and not kept_by_reset and _excluded(entry.message):
                continue
            window.append(
                (entry, ("reset-retained" if reset_kept is not None else "retained") if retained else "current")
            )
        return window

    def context_entries(self, leaf_id: str | None = None) -> list[Entry]:
        """The entries that make up model context, in order: the compaction (if any) first, then each message."""
        return [
            entry
            for entry, _ in self.context_window(leaf_id)
            if not isinstance(entry, ResetEntry) and not (isinstance(entry, BranchSummaryEntry) and not entry.summary)
        ]

    def session_context(self, leaf_id: str | None = None) -> SessionContext:
        """Messages, thinking level and model the way OpenClaw's buildSessionContext derives them."""
        thinking: str | None = "off"
        model: dict[str, str | None] | None = None
        for entry in self.active_branch(leaf_id):
            if isinstance(entry, ThinkingLevelChangeEntry):
                thinking = entry.thinking_level
            elif isinstance(entry, ModelChangeEntry):
                model = {"provider": entry.provider, "modelId": entry.model_id}
            elif isinstance(entry, MessageEntry) and isinstance(entry.message, AssistantMessage):
                model = {"provider": entry.message.provider, "modelId": entry.message.model}
        messages: list[AgentMessage] = []
        for entry, part in self.context_window(leaf_id):
            message = context_message(entry)
            if message is None or isinstance(entry, ResetEntry):
                continue
            if part != "current" and isinstance(message, AssistantMessage):
                message = _without_replay_checkpoint(message)
            messages.append(message)
        return SessionContext(messages, thinking, model)

    def context_messages(self, leaf_id: str | None = None) -> list[AgentMessage]:
        """The messages OpenClaw would put in the model context for the active branch."""
        return self.session_context(leaf_id).messages

    def reject(self, entry: Entry, reason: str) -> None:
        """Turn an entry read as valid into a malformed line (reported, kept verbatim, opaque to navigation)."""
        self.entries.remove(entry)
        self.by_id.pop(entry.id, None)
        raw = entry.source if entry.source is not None else str(entry.raw)
        self.errors.append(TranscriptLineError(self.path, entry.line_no, reason, raw, entry.id, entry.parent_id))
        self.errors.sort(key=lambda e: e.line_no)
        self._navigation = self._first_kept = None


def _excluded(message: AgentMessage) -> bool:
    if isinstance(message, BashExecutionMessage):
        return message.exclude_from_context
    return (message.model_extra or {}).get("excludeFromContext") is True


def _without_replay_checkpoint(message: AssistantMessage) -> AssistantMessage:
    """An assistant message outside the current part loses a provider compaction checkpoint bound to its old prefix."""
    replay = (message.model_extra or {}).get("providerReplay")
    if not (isinstance(replay, dict) and replay.get("type") in _REPLAY_CHECKPOINTS):
        return message
    stripped = message.model_copy(deep=False)
    assert stripped.__pydantic_extra__ is not None
    stripped.__pydantic_extra__ = {k: v for k, v in stripped.__pydantic_extra__.items() if k != "providerReplay"}
    return stripped


def _reset_kept(entries: list[Entry]) -> set[str]:
    """The entries a reset keeps from its range: user and assistant messages, and tool results paired with a call."""
    messages = [e for e in entries if isinstance(e, MessageEntry)]
    paired = paired_results([e.message for e in messages])
    return {
        e.id
        for i, e in enumerate(messages)
        if isinstance(e.message, UserMessage | AssistantMessage)
        or (isinstance(e.message, ToolResultMessage) and i in paired)
    }


def _indexed(entry: Entry) -> bool:
    """Whether OpenClaw indexes the entry (its schema accepts it); other records are opaque to its navigation."""
    raw = entry.raw
    if isinstance(entry, MessageEntry):
        m = entry.message
        if isinstance(m, ToolResultMessage):
            return {"tool_name", "is_error"} <= m.model_fields_set
        if isinstance(m, BashExecutionMessage):
            return "output" in m.model_fields_set
        return isinstance(m, UserMessage | AssistantMessage | CustomMessage)
    if isinstance(entry, CompactionEntry):
        return bool(entry.first_kept_entry_id) and "tokensBefore" in raw
    if isinstance(entry, ResetEntry):
        return entry.reason in _RESET_REASONS
    if isinstance(entry, BranchSummaryEntry):
        return isinstance(raw.get("fromId"), str)
    if isinstance(entry, CustomEntry):
        return bool(entry.custom_type)
    if isinstance(entry, CustomMessageEntry):
        return bool(entry.custom_type) and isinstance(raw.get("display"), bool)
    if isinstance(entry, ModelChangeEntry):
        return bool(entry.provider and entry.model_id)
    if isinstance(entry, ThinkingLevelChangeEntry):
        return bool(entry.thinking_level)
    if isinstance(entry, LabelEntry):
        return bool(entry.target_id) and isinstance(raw.get("label", ""), str)
    if isinstance(entry, SessionInfoEntry):
        return isinstance(raw.get("name", ""), str)
    return not isinstance(entry, UnknownEntry)


def _compaction_message(entry: CompactionEntry) -> CompactionSummaryMessage:
    return CompactionSummaryMessage(
        summary=entry.summary, tokens_before=entry.tokens_before, timestamp=ms_from_iso(entry.timestamp)
    )


def context_message(entry: Entry) -> AgentMessage | None:
    """The message an entry contributes to model context, or None (custom, settings, labels, …)."""
    if isinstance(entry, MessageEntry):
        return entry.message
    if isinstance(entry, CompactionEntry):
        return _compaction_message(entry)
    stamp = ms_from_iso(entry.timestamp)
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
