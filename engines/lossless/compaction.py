"""Compaction planning and sweeps, in memory: leaf passes over raw chunks, condensed passes over runs.

Pure planners (:func:`plan_leaf_pass`, :func:`plan_condensed_pass`) pick what to summarise from a
list of :class:`PlanItem`; :func:`sweep` drives them, calling the summarizer with escalation
(normal → aggressive → deterministic fallback), and returns the new item list plus every summary
node to write. Nothing touches the database here: the engine writes the outcome in one transaction.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Literal

from engines.lossless.assemble import RenderedSummary, fresh_tail_start, render_summary
from engines.lossless.config import LosslessConfig
from engines.lossless.prompts import (
    EXPAND_FOOTER,
    SYSTEM_PROMPT,
    condensed_prompt,
    condensed_target_tokens,
    leaf_prompt,
    leaf_target_tokens,
)
from openclaw_ctx.contract import AbortSignal
from openclaw_ctx.errors import SummarizerAuthError, SummarizerError
from openclaw_ctx.messages import AgentMessage, ToolResultMessage, flatten_text, tool_call_ids
from openclaw_ctx.store.repo import NewSummary, SummaryRef, new_summary_id
from openclaw_ctx.summarize.base import Summarizer, SummaryOutput, SummaryRequest
from openclaw_ctx.summarize.fallback import deterministic_fallback, truncate_to_tokens
from openclaw_ctx.tokens import TokenCounter

__all__ = [
    "PlanItem",
    "SweepOutcome",
    "SweepSettings",
    "plan_condensed_pass",
    "plan_leaf_pass",
    "summary_prefix_tokens",
    "sweep",
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


# --- summarizing with escalation ----------------------------------------------------------------


@dataclass(frozen=True)
class _Summarized:
    text: str
    summarizer: str
    model: str | None
    fallback_level: str


async def _attempt(summarizer: Summarizer, request: SummaryRequest) -> SummaryOutput | None:
    # `summaryTimeoutMs` bounds every summarizer, whatever its own transport does: a hung call
    # escalates like a failed one instead of holding the key's lock forever.
    try:
        async with asyncio.timeout(request.timeout_s):
            out = await summarizer.summarize(request)
    except SummarizerAuthError:
        raise
    except (SummarizerError, TimeoutError):
        return None
    return out if out.text.strip() else None


def _with_footer(text: str, fallback_topics: str) -> str:
    return text if EXPAND_FOOTER in text else f"{text.rstrip()}\n{EXPAND_FOOTER} {fallback_topics}"


async def _summarize(
    summarizer: Summarizer,
    counter: TokenCounter,
    settings: SweepSettings,
    *,
    depth: int,
    leaf: bool,
    source: str,
    previous: str | None,
    topics: str,
    room: int,
) -> _Summarized:
    # `room`: what the sources cost in context minus the new node's XML wrapper. A summary is only
    # accepted when it is smaller than that, so every pass shrinks the context (convergence).
    config, call_instructions = settings.config, settings.call_instructions
    input_tokens = counter.count(source)
    limit = max(1, min(input_tokens, room))
    target = 0
    for aggressive, level in ((False, "none"), (True, "aggressive")):
        if leaf:
            target = leaf_target_tokens(input_tokens, config.leaf_target_tokens, aggressive=aggressive)
            prompt = leaf_prompt(
                source,
                previous_context=previous,
                target_tokens=target,
                aggressive=aggressive,
                custom_instructions=config.custom_instructions,
                call_instructions=call_instructions,
            )
        else:
            target = condensed_target_tokens(config.condensed_target_tokens, aggressive=aggressive)
            prompt = condensed_prompt(
                source,
                depth=depth,
                previous_context=previous,
                target_tokens=target,
                aggressive=aggressive,
                custom_instructions=config.custom_instructions,
                call_instructions=call_instructions,
            )
        request = SummaryRequest(
            kind="leaf" if leaf else "condensed",
            source_text=source,
            target_tokens=target,
            system_prompt=SYSTEM_PROMPT,
            prompt=prompt,
            # previous_context is context for a model only: a summarizer that merges
            # `previous_summary` into its output would repeat earlier leaves in every new one.
            previous_summary=None,
            custom_instructions="\n".join(p for p in (config.custom_instructions, call_instructions) if p) or None,
            depth=depth,
            aggressive=aggressive,
            timeout_s=config.summary_timeout_ms / 1000,
            # Provider summarizers count their spend guard per session key.
            metadata={"session_key": settings.session_key} if settings.session_key else {},
        )
        out = await _attempt(summarizer, request)
        if out is None:
            continue
        text = out.text.strip()
        tokens = counter.count(text)
        if tokens >= limit:
            continue
        cap = int(config.summary_max_overage_factor * target)
        if tokens > cap:
            text = truncate_to_tokens(text, target, counter).rstrip() + f"\n[Capped from {tokens} tokens to ~{target}]"
            level = "capped"
        model = out.model or config.summary_model or None
        return _Summarized(_with_footer(text, topics), out.summarizer or summarizer.name, model, level)
    cap = min(config.fallback_max_tokens, max(64, limit // 2))
    text = deterministic_fallback(source, cap, counter)
    return _Summarized(_with_footer(text, topics), "deterministic-fallback", None, "deterministic")


# --- source text ------------------------------------------------------------------------------


def _iso(ms: int | None) -> str | None:
    if ms is None:
        return None
    return datetime.fromtimestamp(ms / 1000, UTC).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"


def _header_time(ms: int | None) -> str:
    if ms is None:
        return "unknown time"
    return datetime.fromtimestamp(ms / 1000, UTC).strftime("%Y-%m-%d %H:%M UTC")


def _message_source(message: AgentMessage) -> str:
    tool = f" | tool={message.tool_name}" if isinstance(message, ToolResultMessage) and message.tool_name else ""
    body = flatten_text(message, include_thinking=False).replace("[image]", "[Media attachment]")
    return f"[{_header_time(getattr(message, 'timestamp', None))} | {message.role}{tool}]\n{body}"


def _leaf_topics(chunk: Sequence[PlanItem]) -> str:
    tools = sorted({m.tool_name for i in chunk if isinstance(m := i.message, ToolResultMessage) and m.tool_name})
    extra = f" (tool output of {', '.join(tools)})" if tools else ""
    return f"the exact wording of {len(chunk)} messages{extra}"


# --- the sweep ------------------------------------------------------------------------------


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


@dataclass
class SweepOutcome:
    """The new item list and the nodes to write, oldest first (sources before the nodes built on them)."""

    items: list[PlanItem]
    created: list[NewSummary] = field(default_factory=list)
    rendered: dict[str, RenderedSummary] = field(default_factory=dict)
    passes: int = 0
    stop_reason: str = "nothing to compact"


class _Sweeper:
    def __init__(self, items: list[PlanItem], settings: SweepSettings, summarizer: Summarizer, counter: TokenCounter):
        self.out = SweepOutcome(items=list(items))
        self.s = settings
        self.c = settings.config
        self.summarizer = summarizer
        self.counter = counter
        self.passes_left = self.c.max_sweep_iterations
        self.deadline = time.monotonic() + self.c.sweep_deadline_ms / 1000
        # Kept up to date pass by pass: recomputing them scans every item, and a 100k-message sweep
        # makes thousands of passes. A pass only replaces items before the tail with one node, which
        # moves the tail's start by what it removed and leaves no raw message before its own.
        self._tail: int | None = None
        self._raw_from = 0

    def tail(self) -> int:
        """Where the protected fresh tail of the current items begins."""
        if self._tail is None:
            self._tail = tail_start_of(self.out.items, self.c, self.s.budget)
        return self._tail

    def can_continue(self) -> bool:
        if self.s.abort_signal is not None:
            self.s.abort_signal.raise_if_aborted()
        if self.passes_left <= 0:
            self.out.stop_reason = "max sweep iterations reached"
            return False
        if time.monotonic() >= self.deadline:
            self.out.stop_reason = "sweep deadline reached"
            return False
        return True

    def _add(self, start: int, end: int, node: NewSummary, parents: list[str]) -> None:
        ref = SummaryRef(
            node.summary_id,
            node.kind,
            node.depth,
            node.content,
            node.descendant_count,
            node.earliest_at,
            node.latest_at,
            node.summarizer,
            node.fallback_level,
        )
        rendered = render_summary(ref, parents, self.counter)
        item = PlanItem(
            "summary",
            node.summary_id,
            rendered.tokens,
            depth=node.depth,
            content=node.content,
            earliest_at=node.earliest_at,
            latest_at=node.latest_at,
            descendant_count=node.descendant_count,
            descendant_token_count=node.descendant_token_count,
            source_message_token_count=node.source_message_token_count,
        )
        self.out.items[start:end] = [item]
        if self._tail is not None:
            self._tail -= end - start - 1
        self._raw_from = start + 1 if node.kind == "leaf" else min(self._raw_from, start)
        self.out.created.append(node)
        self.out.rendered[node.summary_id] = rendered
        self.out.passes += 1
        self.passes_left -= 1

    def _overhead(self, depth: int, parents: list[str], sources: Sequence[PlanItem]) -> int:
        # Tokens the XML wrapper of a node over `sources` costs (its content excluded).
        stamp = "2026-01-01T00:00:00.000Z"
        kind = "condensed" if parents else "leaf"
        probe = SummaryRef("sum_" + "0" * 16, kind, depth, "", len(sources), stamp, stamp, "", "none")
        return render_summary(probe, parents, self.counter).tokens

    def _previous(self, start: int, depth: int | None) -> str | None:
        found = [
            i.content
            for i in reversed(self.out.items[:start])
            if i.kind == "summary" and (depth is None or i.depth == depth)
        ][:2]
        return "\n\n".join(reversed(found)) or None

    async def leaf(self, start: int, end: int) -> None:
        chunk = self.out.items[start:end]
        source = "\n\n".join(_message_source(i.message) for i in chunk if i.message is not None)
        done = await _summarize(
            self.summarizer,
            self.counter,
            self.s,
            depth=0,
            leaf=True,
            source=source,
            previous=self._previous(start, None),
            topics=_leaf_topics(chunk),
            room=sum(i.tokens for i in chunk) - self._overhead(0, [], chunk),
        )
        times = [t for i in chunk if (t := _iso(getattr(i.message, "timestamp", None)))]
        node = NewSummary(
            kind="leaf",
            content=done.text,
            token_count=self.counter.count(done.text),
            summarizer=done.summarizer,
            model=done.model,
            fallback_level=done.fallback_level,
            source_message_ids=[int(i.ref) for i in chunk],
            depth=0,
            earliest_at=min(times) if times else None,
            latest_at=max(times) if times else None,
            source_message_token_count=sum(i.tokens for i in chunk),
            summary_id=new_summary_id(),
        )
        self._add(start, end, node, [])

    async def condense(self, start: int, end: int) -> None:
        run = self.out.items[start:end]
        depth = max(i.depth for i in run) + 1
        source = "\n\n".join(f"[{i.earliest_at or '?'} - {i.latest_at or '?'}]\n{i.content}" for i in run)
        done = await _summarize(
            self.summarizer,
            self.counter,
            self.s,
            depth=depth,
            leaf=False,
            source=source,
            previous=self._previous(start, 0) if depth == 1 else None,
            topics=f"the details of {len(run)} depth-{depth - 1} summaries",
            room=sum(i.tokens for i in run) - self._overhead(depth, [str(i.ref) for i in run], run),
        )
        early = [i.earliest_at for i in run if i.earliest_at]
        late = [i.latest_at for i in run if i.latest_at]
        node = NewSummary(
            kind="condensed",
            content=done.text,
            token_count=self.counter.count(done.text),
            summarizer=done.summarizer,
            model=done.model,
            fallback_level=done.fallback_level,
            source_summary_ids=[str(i.ref) for i in run],
            depth=depth,
            earliest_at=min(early) if early else None,
            latest_at=max(late) if late else None,
            descendant_count=sum(i.descendant_count + 1 for i in run),
            descendant_token_count=sum(i.tokens + i.descendant_token_count for i in run),
            source_message_token_count=sum(i.source_message_token_count for i in run),
            summary_id=new_summary_id(),
        )
        self._add(start, end, node, [str(i.ref) for i in run])

    async def leaf_phase(self, stop_at: int | None) -> None:
        while self.can_continue():
            if stop_at is not None and total_tokens(self.out.items) <= stop_at:
                return
            plan = plan_leaf_pass(self.out.items, self.tail(), self.c.leaf_chunk_tokens, search_from=self._raw_from)
            if plan is None:
                return
            await self.leaf(*plan)
            await asyncio.sleep(0)

    async def condensed_phase(
        self, *, max_depth: int, hard: bool, until: int, prefix_only: bool, mixed: bool = False
    ) -> None:
        while self.can_continue():
            tail = self.tail()
            size = summary_prefix_tokens(self.out.items, tail) if prefix_only else total_tokens(self.out.items)
            if size <= until:
                return
            plan = plan_condensed_pass(self.out.items, tail, self.c, max_depth=max_depth, hard=hard, mixed=mixed)
            if plan is None:
                return
            await self.condense(*plan)
            await asyncio.sleep(0)


async def sweep(
    items: Sequence[PlanItem], settings: SweepSettings, summarizer: Summarizer, counter: TokenCounter
) -> SweepOutcome:
    """Run a compaction over `items` in memory, in rounds under `compactUntilUnderDeadlineMs`.

    ``threshold`` target: a full sweep: leaf passes until no raw chunk remains outside the tail;
    condensed passes (up to `sweepMaxDepth`) while the summary prefix exceeds its target; then,
    while still over `SWEEP_TARGET_SHARE` of the threshold, a pressure phase with the hard fan-in and
    no depth limit. Sweeps are chained while one stops at its pass cap with work left. ``budget``
    target: leaf passes and pressure condensation (any depth mix as a last resort) until the total
    is within the budget. Each round is bounded by `maxSweepIterations` passes and `sweepDeadlineMs`;
    at most `MAX_SWEEP_ROUNDS` rounds run, and a round that makes no progress ends the compaction.

    Raises:
        SummarizerAuthError: the summarizer's credentials were rejected (write nothing).
        AbortError: the abort signal fired.
    """
    cfg = settings.config
    runner = _Sweeper(list(items), settings, summarizer, counter)
    threshold = cfg.threshold_tokens(settings.budget)
    deadline = time.monotonic() + cfg.compact_until_under_deadline_ms / 1000
    for _ in range(MAX_SWEEP_ROUNDS):
        before = runner.out.passes
        runner.passes_left = cfg.max_sweep_iterations
        runner.deadline = min(deadline, time.monotonic() + cfg.sweep_deadline_ms / 1000)
        if settings.target == "threshold":
            await runner.leaf_phase(None)
            if cfg.sweep_max_depth != 0:
                prefix_target = cfg.summary_prefix_target(settings.budget)
                await runner.condensed_phase(
                    max_depth=cfg.sweep_max_depth, hard=False, until=prefix_target, prefix_only=True
                )
            await runner.condensed_phase(
                max_depth=-1, hard=True, until=int(threshold * SWEEP_TARGET_SHARE), prefix_only=False
            )
            more = runner.passes_left <= 0  # the pass cap, not a lack of work, ended this sweep
        else:
            await runner.leaf_phase(settings.budget)
            await runner.condensed_phase(max_depth=-1, hard=True, until=settings.budget, prefix_only=False, mixed=True)
            more = total_tokens(runner.out.items) > settings.budget
        if not more or runner.out.passes == before or time.monotonic() >= deadline:
            break
    final = total_tokens(runner.out.items)
    limit = threshold if settings.target == "threshold" else settings.budget
    if runner.out.passes and final <= limit:
        runner.out.stop_reason = "under target"
    elif runner.out.passes and runner.out.stop_reason == "nothing to compact":
        runner.out.stop_reason = "no further compaction possible outside the fresh tail"
    return runner.out
