"""A transcript's tree: the active branch from the leaf back to the root, and the model context it rebuilds to.

Entries form an append-only tree through `parentId`; the active branch runs from the leaf (the last
appended entry) to the root. :meth:`Transcript.session_context` derives what OpenClaw's
buildSessionContext shows the model: the latest compaction's summary, the entries it kept, and
everything after it.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from openclaw_ctx._time import ms_from_iso
from openclaw_ctx.messages import (
    AgentMessage,
    AssistantMessage,
    BranchSummaryMessage,
    CompactionSummaryMessage,
    CustomMessage,
)
from openclaw_ctx.transcripts.entries import (
    BranchSummaryEntry,
    CompactionEntry,
    CustomMessageEntry,
    Entry,
    MessageEntry,
    ModelChangeEntry,
    SessionHeader,
    ThinkingLevelChangeEntry,
    TranscriptLineError,
)

__all__ = ["SessionContext", "Transcript", "context_message"]


@dataclass(frozen=True)
class SessionContext:
    """What buildSessionContext derives from a branch: the messages, and the latest settings."""

    messages: list[AgentMessage]
    thinking_level: str
    model: dict[str, str | None] | None


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

    def branch_break(self, leaf_id: str | None = None) -> tuple[Entry, str] | None:
        """Where the active branch stops short of the root: its first entry and the parent id no line holds."""
        path = self.active_branch(leaf_id)
        if not path:
            return None
        missing, seen = path[0].parent_id, set()
        while missing is not None and missing in self.broken_parents and missing not in seen:
            seen.add(missing)
            missing = self.broken_parents[missing]
        return (path[0], missing) if missing is not None and missing not in self.by_id else None

    def context_entries(self, leaf_id: str | None = None) -> list[Entry]:
        """The branch entries that make up model context, in order (buildSessionContext's selection).

        With a compaction on the branch: the latest compaction entry first, then the entries from its
        `firstKeptEntryId` up to it, then everything after it; older compactions in that range are left
        out. Only entries for which :func:`context_message` returns a message are included (besides the
        compaction itself).
        """
        path = self.active_branch(leaf_id)
        at = max((i for i, e in enumerate(path) if isinstance(e, CompactionEntry)), default=-1)
        if at < 0:
            return [e for e in path if context_message(e) is not None]
        compaction = path[at]
        assert isinstance(compaction, CompactionEntry)
        ids = [e.id for e in path[:at]]
        kept = path[ids.index(compaction.first_kept_entry_id) : at] if compaction.first_kept_entry_id in ids else []
        # Only the newest compaction speaks: older ones inside the kept slice are not re-emitted
        # (OpenClaw's buildSessionContext takes messages, custom messages and branch summaries there).
        rest = [*kept, *path[at + 1 :]]
        return [compaction, *(e for e in rest if not isinstance(e, CompactionEntry) and context_message(e) is not None)]

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

    def reject(self, entry: Entry, reason: str) -> None:
        """Turn an entry read as valid into a malformed line (reported, kept verbatim; the tree walks through it)."""
        self.entries.remove(entry)
        self.by_id.pop(entry.id, None)
        self.broken_parents[entry.id] = entry.parent_id
        raw = entry.source if entry.source is not None else str(entry.raw)
        self.errors.append(TranscriptLineError(self.path, entry.line_no, reason, raw, entry.id, entry.parent_id))
        self.errors.sort(key=lambda e: e.line_no)


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
