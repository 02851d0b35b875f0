"""The pure planning half of the built-in compaction (openclaw-reference §4): no I/O, no awaits.

Threshold, cut point and the plan; the summary text (file-operation lists, chunking, composition)
lives in :mod:`openclaw_ctx.compaction.summary_text` and is re-exported here.
:mod:`openclaw_ctx.compaction.builtin` loads, calls these, and writes.
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from openclaw_ctx.compaction.summary_text import (
    BASE_CHUNK_RATIO,
    MIN_CHUNK_RATIO,
    SAFETY_MARGIN,
    SUMMARIZATION_OVERHEAD_TOKENS,
    FileOps,
    adaptive_chunk_ratio,
    chunk_messages,
    compose_summary,
    extract_file_ops,
    is_oversized,
    max_chunk_tokens,
    oversized_note,
)
from openclaw_ctx.config import CompactionSettings
from openclaw_ctx.messages import (
    AgentMessage,
    AssistantMessage,
    BashExecutionMessage,
    BranchSummaryMessage,
    CompactionSummaryMessage,
    CustomMessage,
    ImageContent,
    TextContent,
    ThinkingContent,
    ToolCall,
    ToolResultMessage,
    UserMessage,
)
from openclaw_ctx.store.repo import MessageItem, ResolvedItem, SummaryItem
from openclaw_ctx.summarize.prompts import serialize_for_summary, serialize_message

__all__ = [
    "BASE_CHUNK_RATIO",
    "CutPoint",
    "FileOps",
    "MIN_CHUNK_RATIO",
    "NO_FIT_ERROR",
    "SAFETY_MARGIN",
    "SUMMARIZATION_OVERHEAD_TOKENS",
    "CompactionPlan",
    "adaptive_chunk_ratio",
    "chunk_messages",
    "compose_summary",
    "estimate_tokens",
    "extract_file_ops",
    "find_cut_point",
    "is_oversized",
    "keep_recent_budget",
    "max_chunk_tokens",
    "oversized_note",
    "plan_compaction",
    "plan_messages",
    "serialize_for_summary",
    "serialize_message",
    "should_compact",
    "summary_target",
]

IMAGE_CHARS = 4800
NO_FIT_ERROR = "No complete recent message fits within keepRecentTokens"

Entry = ResolvedItem | AgentMessage


# --- estimates and the threshold ------------------------------------------------------------------


def _content_chars(content: str | Sequence[Any]) -> int:
    if isinstance(content, str):
        return len(content)
    chars = 0
    for block in content:
        if isinstance(block, TextContent):
            chars += len(block.text)
        elif isinstance(block, ImageContent):
            chars += IMAGE_CHARS
    return chars


def estimate_tokens(message: AgentMessage) -> int:
    """OpenClaw's planning estimate ``ceil(chars / 4)`` of one message (images count 4,800 chars).

    Used only where no stored count exists; stored `token_count`s are preferred everywhere.
    """
    chars = 0
    if isinstance(message, UserMessage | ToolResultMessage | CustomMessage):
        chars = _content_chars(message.content)
    elif isinstance(message, AssistantMessage):
        for block in message.content:
            if isinstance(block, TextContent):
                chars += len(block.text)
            elif isinstance(block, ThinkingContent):
                chars += len(block.thinking)
            elif isinstance(block, ToolCall):
                chars += len(block.name) + len(json.dumps(block.arguments, ensure_ascii=False))
    elif isinstance(message, BashExecutionMessage):
        chars = 0 if message.exclude_from_context else len(message.command) + len(message.output)
    elif isinstance(message, BranchSummaryMessage | CompactionSummaryMessage):
        chars = len(message.summary)
    return math.ceil(chars / 4)


def should_compact(context_tokens: int, context_window: int, settings: CompactionSettings) -> bool:
    """OpenClaw's threshold: ``enabled and contextTokens > contextWindow − reserve`` (reserve floored)."""
    return settings.enabled and context_tokens > context_window - settings.effective_reserve()


# --- the cut point ----------------------------------------------------------------------------------


def _message(entry: Entry) -> AgentMessage | None:
    if isinstance(entry, MessageItem):
        return entry.message
    return None if isinstance(entry, SummaryItem) else entry


def _tokens(entry: Entry) -> int:
    if isinstance(entry, SummaryItem) or (isinstance(entry, MessageItem) and entry.token_count > 0):
        return entry.token_count
    return estimate_tokens(entry.message if isinstance(entry, MessageItem) else entry)


def _is_cut_point(entry: Entry) -> bool:
    message = _message(entry)
    # A summary item renders as a compactionSummary/user message: a valid place to start the kept part.
    return message is None or not isinstance(message, ToolResultMessage)


def _is_turn_start(entry: Entry) -> bool:
    message = _message(entry)
    return isinstance(
        message, UserMessage | BashExecutionMessage | CustomMessage | BranchSummaryMessage | CompactionSummaryMessage
    )


@dataclass(frozen=True)
class CutPoint:
    """Where the kept part starts and whether that splits a turn.

    Entries ``[0, first_kept_index)`` are summarised: for a split turn ``[0, turn_start_index)`` as
    history and ``[turn_start_index, first_kept_index)`` as the turn prefix.
    """

    first_kept_index: int
    turn_start_index: int = -1
    is_split_turn: bool = False
    error: str | None = None

    @property
    def history_end(self) -> int:
        """End (exclusive) of the history part."""
        return self.turn_start_index if self.is_split_turn else self.first_kept_index


def _owner_indices(entries: Sequence[Entry]) -> dict[int, int]:
    """For each tool-result index, the index of the assistant message that made its call."""
    call_at: dict[str, int] = {}
    owners: dict[int, int] = {}
    for i, entry in enumerate(entries):
        message = _message(entry)
        if isinstance(message, AssistantMessage):
            for block in message.content:
                if isinstance(block, ToolCall):
                    call_at.setdefault(block.id, i)
        elif isinstance(message, ToolResultMessage) and message.tool_call_id in call_at:
            owners[i] = call_at[message.tool_call_id]
    return owners


def _keep_groups_whole(cut: int, owners: dict[int, int]) -> int:
    # Move the cut back until no kept result's call is summarised (async results join their call group).
    moved = True
    while moved:
        moved = False
        for result_index, owner in owners.items():
            if result_index >= cut > owner:
                cut = owner
                moved = True
    return cut


def find_cut_point(
    entries: Sequence[Entry],
    keep_recent_tokens: int,
    *,
    start: int = 0,
    preserve_from_index: int | None = None,
) -> CutPoint:
    """Choose the first kept entry: walk back from the end until `keep_recent_tokens` are kept.

    Never cuts at a tool result; when the entry that crosses the budget is a tool result, the cut
    moves to the assistant message that made its call, so a large trailing result keeps its group.
    No valid cut point at all (or a non-positive budget) keeps nothing (``first_kept_index = end``,
    with :data:`NO_FIT_ERROR`). `preserve_from_index` forces that entry and everything after it to
    be kept (a pending user message).

    Args:
        entries: Context entries (or plain messages), oldest first.
        keep_recent_tokens: Tokens of recent context to keep verbatim.
        start: First entry that may be summarised.
        preserve_from_index: Index that must be kept, if any.

    Returns:
        The cut point.
    """
    end = len(entries)
    cut_points = [i for i in range(start, end) if _is_cut_point(entries[i])]
    owners = _owner_indices(entries)
    error: str | None = None
    if not cut_points or keep_recent_tokens <= 0:
        cut, error = end, NO_FIT_ERROR
    else:
        cut = cut_points[0]
        accumulated = 0
        for i in range(end - 1, start - 1, -1):
            accumulated += _tokens(entries[i])
            if accumulated >= keep_recent_tokens:
                after = [c for c in cut_points if c >= i]
                before = [c for c in cut_points if c < i]
                cut = after[0] if after else before[-1] if before else end
                if cut == end:
                    error = NO_FIT_ERROR
                break
    if preserve_from_index is not None and start <= preserve_from_index < cut:
        cut, error = preserve_from_index, None
    cut = max(start, _keep_groups_whole(cut, owners))
    while start < cut < end and not _is_cut_point(entries[cut]):
        cut -= 1
    return _split_turn(entries, cut, start, error)


def _split_turn(entries: Sequence[Entry], cut: int, start: int, error: str | None) -> CutPoint:
    if cut >= len(entries) or cut <= start or _is_turn_start(entries[cut]):
        return CutPoint(cut, -1, False, error)
    message = _message(entries[cut])
    if message is None:  # a summary item: not inside a turn
        return CutPoint(cut, -1, False, error)
    for i in range(cut - 1, start - 1, -1):
        if _message(entries[i]) is None:
            break
        if _is_turn_start(entries[i]):
            return CutPoint(cut, i, True, error)
    return CutPoint(cut, -1, False, error)


# --- the plan ---------------------------------------------------------------------------------------


@dataclass
class CompactionPlan:
    """What a compaction summarises, what it keeps, and the summaries it updates."""

    cut: CutPoint
    previous: list[SummaryItem]
    history: list[MessageItem]
    prefix: list[MessageItem]
    kept: list[ResolvedItem]
    orphans: list[MessageItem] = field(default_factory=list)

    @property
    def covered(self) -> list[MessageItem]:
        """Every message entry the summary covers (history, turn prefix, orphaned results)."""
        return self.history + self.prefix + self.orphans


def keep_recent_budget(settings: CompactionSettings, token_budget: int | None) -> int:
    """`keepRecentTokens`, capped at a third of a given budget."""
    # A small budget must still leave room after compaction (OpenClaw #130226: forced no-op compactions).
    if token_budget:
        return min(settings.keep_recent_tokens, max(1, token_budget // 3))
    return settings.keep_recent_tokens


def summary_target(settings: CompactionSettings, token_budget: int | None) -> int:
    """Output budget: ``0.8 · reserve`` (OpenClaw), at most a quarter of a given budget, at least 256."""
    target = math.floor(0.8 * settings.effective_reserve()) or 1024
    if token_budget:
        target = min(target, max(256, token_budget // 4))
    return max(256, target)


def plan_compaction(entries: list[ResolvedItem], keep_recent: int) -> CompactionPlan:
    cut = find_cut_point(entries, keep_recent)
    before = entries[: cut.first_kept_index]
    previous = [e for e in before if isinstance(e, SummaryItem)]
    history = [e for e in entries[: cut.history_end] if isinstance(e, MessageItem)]
    prefix = [e for e in entries[cut.history_end : cut.first_kept_index] if isinstance(e, MessageItem)]
    kept: list[ResolvedItem] = []
    orphans: list[MessageItem] = []
    calls: set[str] = set()
    for entry in entries[cut.first_kept_index :]:
        message = _message(entry)
        if isinstance(message, AssistantMessage):
            calls.update(b.id for b in message.content if isinstance(b, ToolCall))
        if isinstance(entry, MessageItem) and isinstance(message, ToolResultMessage):
            if message.tool_call_id not in calls:
                orphans.append(entry)  # its call is nowhere in the context: summarised, never shown alone
                continue
        kept.append(entry)
    return CompactionPlan(cut, previous, history, prefix, kept, orphans)


def plan_messages(entries: Sequence[ResolvedItem]) -> list[AgentMessage]:
    """The messages of some entries, in order."""
    return [e.message for e in entries if isinstance(e, MessageItem)]
