"""Summary retention (issue 16 item 6d): do the built-in summaries keep the facts a later turn asks about?

Data: the recall benchmark's long multi-session conversations (:mod:`bench.recall_data`, test
split), each fact stated once and asked about later. Every conversation is recorded turn by turn
through the real runtime at a 4k window, so both engines compact it many times; then the view the
model would be sent next is assembled, and a question counts as *kept* when its annotated answer
appears verbatim in that view (in a summary or in the fresh tail).

Baseline, same process, same data: the same engines with the truncation summarizer (the
deterministic fallback: the source cut to the target length), the floor any summarizer must beat.
Also reported: how many answers sit inside summaries (not the raw tail), per question class.
"""

from __future__ import annotations

import asyncio
from collections import Counter
from pathlib import Path
from typing import Any

from bench.b_recall_quality import load, opened
from bench.core import BenchContext, Row, Size, Stat, pick
from bench.recall_data import Conversation, generate
from openclaw_ctx.messages import (
    AgentMessage,
    BranchSummaryMessage,
    CompactionSummaryMessage,
    UserMessage,
    flatten_text,
)
from openclaw_ctx.summarize import ExtractiveSummarizer, Summarizer, SummaryOutput, SummaryRequest
from openclaw_ctx.summarize.fallback import deterministic_fallback
from openclaw_ctx.tokens import get_counter

NAME = "summary_retention"
TITLE = "Summary retention: answers still in the model's view after compaction (built-in vs truncation)"
ENGINES = ("legacy", "lossless-claw")


class TruncationSummarizer:
    """The floor: the source cut to the target length (the engines' deterministic fallback)."""

    name = "truncation"

    async def summarize(self, request: SummaryRequest) -> SummaryOutput:
        """The first `target_tokens` of the source, with the fallback's marker."""
        counter = get_counter()
        source = (
            f"{request.previous_summary}\n\n{request.source_text}" if request.previous_summary else request.source_text
        )
        text = deterministic_fallback(source, request.target_tokens, counter)
        return SummaryOutput(text=text, summarizer=self.name, output_tokens=counter.count(text))


async def retention(
    path: Path, engine: str, summarizer: Summarizer, conversations: list[Conversation]
) -> dict[str, Any]:
    """Record every conversation, assemble each key once, and count the answers in view."""
    seconds = await load(path, engine, conversations, vectors=False, summarizer=summarizer)
    kept: Counter[str] = Counter()
    asked: Counter[str] = Counter()
    in_summary = 0
    async with opened(path, engine, vectors=False, summarizer=summarizer) as runtime:
        for conv in conversations:
            result, _ = await runtime.assemble(conv.key)
            everything = "\n".join(flatten_text(m) for m in result.messages).lower()
            summaries = "\n".join(flatten_text(m) for m in result.messages if _is_summary(m)).lower()
            for q in conv.questions:
                if not q.answer:
                    continue
                asked[q.qclass] += 1
                answer = q.answer.lower()
                kept[q.qclass] += answer in everything
                in_summary += answer in summaries
    return {"kept": kept, "asked": asked, "in_summary": in_summary, "seconds": seconds}


def _is_summary(message: AgentMessage) -> bool:
    """A legacy compaction summary, or a lossless summary node (sent as a user message in XML)."""
    if isinstance(message, CompactionSummaryMessage | BranchSummaryMessage):
        return True
    return isinstance(message, UserMessage) and flatten_text(message).startswith("<summary")


def _fresh(path: Path) -> Path:
    """`path` with no database left from an earlier run (a rerun would only dedupe)."""
    for suffix in ("", "-wal", "-shm"):
        Path(f"{path}{suffix}").unlink(missing_ok=True)
    return path


def run(size: Size, ctx: BenchContext) -> list[Row]:
    """Rows per engine: the share of answers kept, ours against the truncation floor."""
    conversations = generate("test")[: pick(size, 1, 4, 4)]
    return asyncio.run(_run(ctx.workdir, conversations))


async def _run(workdir: Path, conversations: list[Conversation]) -> list[Row]:
    rows: list[Row] = []
    for engine in ENGINES:
        results: dict[str, dict[str, Any]] = {}
        for summarizer in (ExtractiveSummarizer(), TruncationSummarizer()):
            path = _fresh(workdir / f"retention-{engine}-{summarizer.name}.db")
            results[summarizer.name] = await retention(path, engine, summarizer, conversations)
        ours, base = results[ExtractiveSummarizer.name], results[TruncationSummarizer.name]
        total = sum(ours["asked"].values())
        share, floor = sum(ours["kept"].values()) / total, sum(base["kept"].values()) / total
        rows.append(
            Row(NAME, f"answers in view, {engine}", "share", Stat.of([share]), True,
                baseline=Stat.of([floor]), baseline_name="truncation summarizer",
                note=f"{sum(ours['kept'].values())}/{total} vs {sum(base['kept'].values())}/{total}; "
                     f"inside summaries {ours['in_summary']} vs {base['in_summary']}")
        )  # fmt: skip
        print(f"\n{engine}: kept {sum(ours['kept'].values())}/{total} (truncation {sum(base['kept'].values())}), "
              f"inside summaries {ours['in_summary']} (truncation {base['in_summary']}); "
              f"record {ours['seconds']:.1f} s (truncation {base['seconds']:.1f} s)")  # fmt: skip
        for qclass in sorted(ours["asked"]):
            n = ours["asked"][qclass]
            print(f"  {qclass:<12} {ours['kept'][qclass]:>3}/{n:<3} truncation {base['kept'][qclass]:>3}/{n}")
    return rows
