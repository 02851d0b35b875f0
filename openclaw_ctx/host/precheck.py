"""The pre-prompt overflow precheck (OpenClaw's `shouldPreemptivelyCompactBeforePrompt`), pure."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from openclaw_ctx.messages import AgentMessage, ImageContent, TextContent, ToolResultMessage

__all__ = ["SAFETY_MARGIN", "PrecheckResult", "precheck", "reducible_tool_chars", "truncate_tool_results"]

SAFETY_MARGIN = 1.2
Route = Literal["fits", "compact_only", "truncate_tool_results_only", "compact_then_truncate"]
TOOL_RESULT_KEEP_CHARS = 4000


@dataclass(frozen=True)
class PrecheckResult:
    """Whether the prompt fits and, if not, which route recovers it."""

    route: Route
    estimated_tokens: int
    budget: int
    overflow_tokens: int


def reducible_tool_chars(messages: Sequence[AgentMessage], keep_chars: int = TOOL_RESULT_KEEP_CHARS) -> int:
    """Characters truncation of oversized tool results could remove."""
    total = 0
    for message in messages:
        if isinstance(message, ToolResultMessage):
            size = sum(len(b.text) for b in message.content if isinstance(b, TextContent))
            total += max(0, size - keep_chars)
    return total


def precheck(
    estimated_raw_tokens: int,
    *,
    context_window: int,
    reserve_tokens: int,
    reducible_chars: int,
) -> PrecheckResult:
    """Decide the route: ``estimate × 1.2`` against ``window − reserve``."""
    estimated = math.ceil(estimated_raw_tokens * SAFETY_MARGIN)
    budget = max(1, context_window - reserve_tokens)
    overflow = max(0, estimated - budget)
    if overflow == 0:
        return PrecheckResult("fits", estimated, budget, 0)
    overflow_chars = overflow * 4
    needed = max(overflow_chars + 512 * 4, int(1.5 * overflow_chars))
    if reducible_chars <= 0:
        route: Route = "compact_only"
    elif reducible_chars >= needed:
        route = "truncate_tool_results_only"
    else:
        route = "compact_then_truncate"
    return PrecheckResult(route, estimated, budget, overflow)


def truncate_tool_results(
    messages: Sequence[AgentMessage], keep_chars: int = TOOL_RESULT_KEEP_CHARS
) -> list[AgentMessage]:
    """Copies of the messages with oversized tool-result text cut to head + tail (the store is untouched)."""
    out: list[AgentMessage] = []
    head = keep_chars * 3 // 4
    tail = keep_chars - head
    for message in messages:
        if not isinstance(message, ToolResultMessage):
            out.append(message)
            continue
        blocks: list[TextContent | ImageContent] = []
        changed = False
        for block in message.content:
            if isinstance(block, TextContent) and len(block.text) > keep_chars:
                n = len(block.text)
                text = (
                    block.text[:head]
                    + "\n...\n"
                    + block.text[-tail:]
                    + f"\n\n[Tool result trimmed: kept first {head} chars and last {tail} chars of {n} chars.]"
                )
                blocks.append(TextContent(text=text))
                changed = True
            else:
                blocks.append(block)
        out.append(message.model_copy(update={"content": blocks}) if changed else message)
    return out


def estimate_text_tokens(text: str) -> int:
    """OpenClaw's chars/4 estimate (for text with no stored count, e.g. the system prompt)."""
    return math.ceil(len(text) / 4)
