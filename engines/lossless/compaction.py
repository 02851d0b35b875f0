"""Compaction sweeps, in memory: leaf passes over raw chunks, condensed passes over runs, until done.

:func:`sweep` drives the pure planners of :mod:`engines.lossless.planning`, summarising each chosen
chunk or run through :mod:`engines.lossless.summaries` (normal → aggressive → deterministic fallback),
and returns the new item list plus every summary node to write. Nothing touches the database here:
the engine writes the outcome in one transaction.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Sequence
from dataclasses import dataclass, field

from engines.lossless.assemble import RenderedSummary, render_summary
from engines.lossless.planning import (
    MAX_SWEEP_ROUNDS,
    SWEEP_TARGET_SHARE,
    PlanItem,
    SweepSettings,
    plan_condensed_pass,
    plan_leaf_pass,
    summary_prefix_tokens,
    tail_start_of,
    total_tokens,
)
from engines.lossless.summaries import leaf_topics, message_source, summarize_with_escalation
from openclaw_ctx._time import iso_from_ms
from openclaw_ctx.store.repo import NewSummary, SummaryRef, new_summary_id
from openclaw_ctx.summarize.base import Summarizer
from openclaw_ctx.tokens import TokenCounter

__all__ = ["SweepOutcome", "sweep"]


# --- the sweep ------------------------------------------------------------------------------


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
        source = "\n\n".join(message_source(i.message) for i in chunk if i.message is not None)
        done = await summarize_with_escalation(
            self.summarizer,
            self.counter,
            self.s,
            depth=0,
            leaf=True,
            source=source,
            previous=self._previous(start, None),
            topics=leaf_topics(chunk),
            room=sum(i.tokens for i in chunk) - self._overhead(0, [], chunk),
        )
        times = [t for i in chunk if (t := iso_from_ms(getattr(i.message, "timestamp", None)))]
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
        done = await summarize_with_escalation(
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
