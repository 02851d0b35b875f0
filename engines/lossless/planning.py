"""Pure compaction planners, in memory: which raw chunk a leaf pass folds, which run a condensed pass folds.

:func:`plan_leaf_pass` and :func:`plan_condensed_pass` pick what to summarise from a list of
:class:`PlanItem` (a message or a summary with its tokens); :func:`engines.lossless.compaction.sweep`
drives them. Nothing touches the database or a summarizer here.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from engines.lossless.assemble import fresh_tail_start
from engines.lossless.config import LosslessConfig
from openclaw_ctx.contract import AbortSignal
from openclaw_ctx.messages import AgentMessage, ToolResultMessage, tool_call_ids

__all__ = [
    "MAX_SWEEP_ROUNDS",
    "SWEEP_TARGET_SHARE",
    "PlanItem",
    "plan_condensed_pass",
    "plan_leaf_pass",
    "summary_prefix_tokens",
    "tail_start_of",
    "total_tokens",
]


@dataclass(frozen=True)
class PlanItem:
    """One context item as the planner sees it (`message` is the model's view: a stub if externalised)."""

    kind: Literal["message", "summary"]
    ref: int | str
    tokens: int
    message: AgentMessage | None = None
    entry_id: str | None = None
    depth: int = 0
    content: str = ""
    earliest_at: str | None = None
    latest_at: str | None = None
    descendant_count: int = 0
    descendant_token_count: int = 0
    source_message_token_count: int = 0


# A threshold sweep's pressure phase condenses until the context is this share of the threshold,
# not just under it, so the next turns fit before another sweep rewrites the prompt prefix
# (reference #282). Replaying the example at 32k: 30 compactions in 76 turns, against 40 at 1.0.
SWEEP_TARGET_SHARE = 0.8
# Rounds of `maxSweepIterations` passes one compaction may chain (the reference's maxRounds).
MAX_SWEEP_ROUNDS = 10


def total_tokens(items: Sequence[PlanItem]) -> int:
    """Sum of the items' tokens."""
    return sum(i.tokens for i in items)


def tail_start_of(items: Sequence[PlanItem], config: LosslessConfig, budget: int) -> int:
    """Where the protected fresh tail of `items` begins for a `budget`-token window."""
    view = [(i.message if i.kind == "message" else None, i.tokens) for i in items]
    return fresh_tail_start(view, config.fresh_tail_count, config.tail_max_tokens(budget))


def summary_prefix_tokens(items: Sequence[PlanItem], tail_start: int) -> int:
    """Tokens of summary items before the tail."""
    return sum(i.tokens for i in items[:tail_start] if i.kind == "summary")


def plan_leaf_pass(
    items: Sequence[PlanItem], tail_start: int, leaf_chunk_tokens: int, *, search_from: int = 0
) -> tuple[int, int] | None:
    """The oldest contiguous raw chunk before the tail, as ``(start, end)``; None when there is none.

    `search_from` is where to start looking (a caller that knows no raw message lies before it).

    The chunk stops at a summary item, at the tail, or before the message that would exceed
    `leaf_chunk_tokens` (it always takes at least one), and is then extended over the results of
    tool calls it contains so a call is never summarised apart from its result.
    """
    start = next((i for i in range(search_from, tail_start) if items[i].kind == "message"), None)
    if start is None:
        return None
    end = start
    used = 0
    while end < tail_start and items[end].kind == "message":
        if end > start and used + items[end].tokens > leaf_chunk_tokens:
            break
        used += items[end].tokens
        end += 1
    calls = {cid for it in items[start:end] if it.message is not None for cid in tool_call_ids(it.message)}
    while end < tail_start and isinstance(items[end].message, ToolResultMessage):
        result = items[end].message
        assert isinstance(result, ToolResultMessage)
        if result.tool_call_id not in calls:
            break
        end += 1
    return start, end


def plan_condensed_pass(
    items: Sequence[PlanItem],
    tail_start: int,
    config: LosslessConfig,
    *,
    max_depth: int,
    hard: bool,
    mixed: bool = False,
) -> tuple[int, int] | None:
    """The oldest qualifying same-depth run of summaries before the tail, shallowest depth first.

    A run is contiguous summaries of one depth (any message or depth change ends it), capped at
    `leafChunkTokens` (but never below the fan-in). It qualifies with at least the fan-in (`leafMinFanout` for depth 0,
    `condensedMinFanout` deeper, `condensedMinFanoutHard` when `hard`) and, unless `hard`, at least
    max(condensedTargetTokens, 10% of leafChunkTokens) tokens. `max_depth` limits the new node's
    depth (-1 = unlimited). With `mixed` (budget compaction only), when no same-depth run
    qualifies, the oldest run of summaries of any depths is taken.
    """
    depths = sorted({it.depth for it in items[:tail_start] if it.kind == "summary"})
    min_tokens = 0 if hard else max(config.condensed_target_tokens, config.leaf_chunk_tokens // 10)
    for depth in depths:
        if max_depth >= 0 and depth + 1 > max_depth:
            continue
        fanout = (
            config.condensed_min_fanout_hard
            if hard
            else (config.leaf_min_fanout if depth == 0 else config.condensed_min_fanout)
        )
        i = 0
        while i < tail_start:
            if items[i].kind != "summary" or items[i].depth != depth:
                i += 1
                continue
            j = i
            used = 0
            while j < tail_start and items[j].kind == "summary" and items[j].depth == depth:
                # The token cap never cuts a run below the fan-in it needs.
                if j - i >= fanout and used + items[j].tokens > config.leaf_chunk_tokens:
                    break
                used += items[j].tokens
                j += 1
            if j - i >= fanout and used >= min_tokens:
                return i, j
            # Skip the rest of this run (a capped prefix that failed cannot qualify later in it).
            while j < tail_start and items[j].kind == "summary" and items[j].depth == depth:
                j += 1
            i = j
    if mixed:
        return _mixed_run(items, tail_start, config.condensed_min_fanout_hard)
    return None


def _mixed_run(items: Sequence[PlanItem], tail_start: int, fanout: int) -> tuple[int, int] | None:
    # Last resort of budget compaction: the oldest contiguous run of summaries of any depths.
    i = 0
    while i < tail_start:
        j = i
        while j < tail_start and items[j].kind == "summary":
            j += 1
        if j - i >= fanout:
            return i, j
        i = j + 1
    return None


@dataclass
class SweepSettings:
    """How one compaction sweeps."""

    config: LosslessConfig
    budget: int
    target: Literal["threshold", "budget"] = "threshold"
    force: bool = False
    call_instructions: str = ""
    abort_signal: AbortSignal | None = None
    session_key: str = ""
