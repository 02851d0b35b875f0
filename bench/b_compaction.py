"""Compaction (issue 7 item 4): a full lossless-claw sweep of a long session with the embedded summarizer.

Start: the cached uncompacted history (:mod:`bench.history`, ``raw``) of N messages, copied fresh for
every run. One ``engine.compact(force=True, target=threshold, budget=128k)`` with the sweep limits
lifted (unlimited iterations and depth), so a single call compacts the whole session down to the
threshold target: leaf passes over the raw history, then condensed passes over the summaries.

The summarizer is wrapped to time each call by kind, which splits the sweep into
- summarizer time (the embedded extractive summarizer: pure Python text work; with an LLM this is
  the model latency), per leaf and per condensed summary, and
- everything else: loading the context, planning, token counting, and the one write transaction.

Growth: the per-message cost at the largest N divided by the per-message cost at the smallest N
(1.0 = linear; target ≤ 1.25 to allow for noise).
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

from bench import history
from bench.core import BenchContext, Row, Size, Stat, Target, pick
from openclaw_ctx.store.store import Store
from openclaw_ctx.summarize.base import SummaryOutput, SummaryRequest

NAME = "compaction"
TITLE = "Compaction: full lossless sweep, 10k → 100k messages"


class TimedSummarizer:
    """Delegates to a summarizer and records (kind, seconds) for every call."""

    def __init__(self, inner: Any) -> None:
        self._inner = inner
        self.name = inner.name
        self.calls: list[tuple[str, float]] = []

    async def summarize(self, request: SummaryRequest) -> SummaryOutput:
        """Summarise through the wrapped summarizer, timing the call."""
        start = time.perf_counter()
        try:
            out: SummaryOutput = await self._inner.summarize(request)
            return out
        finally:
            self.calls.append((request.kind, time.perf_counter() - start))


async def _sweep(path: Any) -> dict[str, Any]:
    store = await Store.open(path)
    try:
        engine = history.engine_for(store, "lossless-claw", history.SWEEP_CONFIG)
        timed = TimedSummarizer(engine.summarizer)
        engine.summarizer = timed
        start = time.perf_counter()
        result = await history.compact_full_with(engine, store)
        seconds = time.perf_counter() - start
    finally:
        await store.close()
    details = result.result.details if result.result else {}
    return {
        "seconds": seconds,
        "calls": timed.calls,
        "tokens_before": result.result.tokens_before if result.result else 0,
        "tokens_after": result.result.tokens_after if result.result else 0,
        "max_depth": (details or {}).get("max_depth"),
    }


def run(size: Size, ctx: BenchContext) -> list[Row]:
    """Run the compaction benchmark at `size`."""
    sizes: tuple[int, ...] = pick(size, (300, 1000), (1000, 10_000), (10_000, 100_000))
    rows: list[Row] = []
    per_msg: dict[int, Stat] = {}
    for n in sizes:
        # The largest sweep takes minutes at full size: one run of it, ctx.repeat of the smaller.
        runs = 1 if (n >= 100_000) else ctx.repeat
        results = []
        for r in range(runs):
            h = history.history(ctx, n, "raw", copy_as=f"compaction-{n}-{r}.db")
            ctx.log(f"compaction: sweeping {n:,} messages (run {r + 1}/{runs})")
            results.append(asyncio.run(_sweep(h.path)))
        seconds = Stat.of([x["seconds"] for x in results])
        per_msg[n] = Stat.of([x["seconds"] / n for x in results]).scaled(1e6)
        calls = [c for x in results for c in x["calls"]]
        leaf = [s for k, s in calls if k == "leaf"]
        condensed = [s for k, s in calls if k == "condensed"]
        summarizer_share = Stat.of([sum(s for _, s in x["calls"]) / x["seconds"] for x in results]).scaled(100)
        last = results[-1]
        extra = {
            "messages": n,
            "leaf_summaries": len(leaf) // runs,
            "condensed_summaries": len(condensed) // runs,
            "tokens_before": last["tokens_before"],
            "tokens_after": last["tokens_after"],
            "max_depth": last["max_depth"],
            "runs": runs,
        }
        note = (
            f"{extra['leaf_summaries']} leaf + {extra['condensed_summaries']} condensed, depth {last['max_depth']}, "
            f"{last['tokens_before']:,} → {last['tokens_after']:,} tok; {summarizer_share.median:.0f}% in summarizer"
        )
        rows.append(
            Row(
                NAME,
                f"full sweep of {n:,} msgs",
                "msg/s",
                seconds.rate(n),
                True,
                layer="LosslessContextEngine.compact (sweep + one write txn)",
                note=note,
                extra=extra,
            )
        )
        if leaf:
            rows.append(
                Row(NAME, f"per leaf summary ({n:,} msgs)", "ms", Stat.of(leaf).scaled(1000), False, extra=extra)
            )
        if condensed:
            rows.append(
                Row(
                    NAME,
                    f"per condensed summary ({n:,} msgs)",
                    "ms",
                    Stat.of(condensed).scaled(1000),
                    False,
                    extra=extra,
                )
            )
        non_summarizer = Stat.of([(x["seconds"] - sum(s for _, s in x["calls"])) / n for x in results]).scaled(1e6)
        rows.append(
            Row(
                NAME,
                f"sweep bookkeeping outside the summarizer ({n:,} msgs)",
                "µs/msg",
                non_summarizer,
                False,
                layer="load + plan + write (engine, compaction, repo)",
                extra=extra,
            )
        )
    small, large = sizes[0], sizes[-1]
    rows.append(
        Row(
            NAME,
            f"growth: per-message sweep cost at {large:,} vs {small:,} msgs",
            "µs/msg",
            per_msg[large],
            False,
            per_msg[small],
            f"per-message cost at {small:,}",
            Target("ratio", "<=", 1.25),
            note="1.0 = linear in history",
        )
    )
    return rows
