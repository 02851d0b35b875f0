"""Recall quality (issue 16): does ``recall`` find the evidence turn of a question asked in other words?

Dataset: :mod:`bench.recall_data` (4 conversations x 6 sessions x 40 turns per split, 35 annotated
questions each, five classes). Each conversation is stored turn by turn through the real runtime
(``Runtime.record_turn``) on both engines at a 4k window, so most of it is compacted away; then
every question is asked of the key's whole history in every mode, and of the baseline: raw SQLite
FTS5 bm25 over the same ``messages`` rows, the question's words joined with OR, in the same run.

A question scores at rank r when the r-th message hit is one of its evidence turns (summary hits
are skipped in the count, as the baseline has none). The fusion weights are tuned on ``dev``
(``python -m bench.b_recall_quality --tune``) and scored on ``test``.

Also measured: recall latency p50/p99 (hybrid, one key, warm process) and the ingest cost of the
same turns with vector upkeep on versus off.
"""

from __future__ import annotations

import argparse
import asyncio
import sqlite3
import tempfile
import time
from collections import defaultdict
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from datetime import datetime
from pathlib import Path
from typing import Any

from bench.core import BenchContext, Row, Size, Stat, Target, pick
from bench.recall_data import Conversation, generate
from openclaw_ctx.config import OpenClawConfig
from openclaw_ctx.host.runtime import Runtime
from openclaw_ctx.messages import AgentMessage
from openclaw_ctx.recall import Tuning, embed_pending, fts_terms, recall
from openclaw_ctx.recall.embedding import Embedder, WordLlamaEmbedder, default_embedder
from openclaw_ctx.store.store import Store
from openclaw_ctx.summarize import Summarizer
from openclaw_ctx.testing import assistant, user

NAME = "recall_quality"
TITLE = "Recall quality: recall@k and MRR per mode vs raw FTS5 bm25 (OR of the words)"
ENGINES = ("legacy", "lossless-claw")
MODES = ("lexical", "semantic", "hybrid")
WINDOW = 4096


def _ms(iso: str) -> int:
    return int(datetime.fromisoformat(iso.replace("Z", "+00:00")).timestamp() * 1000)


@asynccontextmanager
async def opened(
    path: Path, engine: str, *, vectors: bool, summarizer: Summarizer | None = None
) -> AsyncIterator[Runtime]:
    """A runtime of `engine` at the benchmark's window over the store at `path`, closed on exit."""
    store = await Store.open(path)
    runtime = await Runtime.create(
        store,
        config=OpenClawConfig().with_engine(engine),
        summarizer=summarizer,
        context_window=WINDOW,
        embed_vectors=vectors,
    )
    try:
        yield runtime
    finally:
        await runtime.dispose()
        await store.close()


async def load(
    path: Path,
    engine: str,
    conversations: list[Conversation],
    *,
    vectors: bool = True,
    summarizer: Summarizer | None = None,
) -> float:
    """Store every conversation turn by turn; returns the seconds it took (vector upkeep settled)."""
    async with opened(path, engine, vectors=vectors, summarizer=summarizer) as runtime:
        start = time.perf_counter()
        for conv in conversations:
            for s, session in enumerate(conv.sessions):
                turns = session.turns
                for t in range(0, len(turns), 2):
                    pair = turns[t : t + 2]
                    messages: list[AgentMessage] = [
                        user(x.text, timestamp=_ms(x.timestamp)) if x.role == "user" else assistant(x.text)
                        for x in pair
                    ]
                    ids = {id(m): f"{s}:{t + i}" for i, m in enumerate(messages)}
                    await runtime.record_turn(conv.key, messages, entry_ids=lambda m, ids=ids: ids.get(id(m)))
        await runtime.settle()
        return time.perf_counter() - start


def raw_bm25(db: sqlite3.Connection, key: str, question: str) -> list[int]:
    words = fts_terms(question)
    if not words:
        return []
    match = " OR ".join('"' + w.replace('"', '""') + '"' for w in words)
    sql = (
        "SELECT m.message_id FROM messages_fts JOIN messages AS m ON m.message_id = messages_fts.rowid "
        "WHERE messages_fts MATCH ? AND m.session_key = ? ORDER BY rank LIMIT 10"
    )
    try:
        return [r[0] for r in db.execute(sql, (match, key))]
    except sqlite3.Error:
        return []


async def score(
    path: Path, conversations: list[Conversation], tuning: Tuning, embedder: Embedder | None = None
) -> dict[str, dict[str, list[int]]]:
    """Per method, per question class: the rank (1..10, 0 = not found) of each question's first evidence."""
    ranks: dict[str, dict[str, list[int]]] = defaultdict(lambda: defaultdict(list))
    db = sqlite3.connect(path)
    store = await Store.open(path)
    try:
        for conv in conversations:
            ids = dict(db.execute("SELECT entry_id, message_id FROM messages WHERE session_key = ?", (conv.key,)))
            for q in conv.questions:
                evidence = {ids[f"{s}:{t}"] for s, t in q.evidence}
                got = {"bm25 (raw FTS5, OR)": raw_bm25(db, conv.key, q.text)}
                for mode in MODES:
                    hits = await recall(
                        store, q.text, session_key=conv.key, mode=mode, limit=20, tuning=tuning, embedder=embedder
                    )  # type: ignore[arg-type]
                    got[mode] = [h.message_id for h in hits if h.message_id is not None][:10]
                for method, found in got.items():
                    rank = next((i + 1 for i, m in enumerate(found) if m in evidence), 0)
                    ranks[method][q.qclass].append(rank)
                    ranks[method]["all"].append(rank)
    finally:
        await store.close()
        db.close()
    return ranks


def metrics(ranks: list[int]) -> dict[str, float]:
    """recall@1/5/10 and MRR@10 of the ranks (0 = not in the top 10)."""
    n = len(ranks) or 1
    return {
        "r@1": sum(1 for r in ranks if r == 1) / n,
        "r@5": sum(1 for r in ranks if 0 < r <= 5) / n,
        "r@10": sum(1 for r in ranks if 0 < r <= 10) / n,
        "mrr": sum(1 / r for r in ranks if r) / n,
    }


async def _timed(store: Store, key: str, questions: list[str], mode: str, repeat: int = 3) -> Stat:
    """Milliseconds per `recall` in `mode`, warm: one call first loads the process's vector index."""
    await recall(store, questions[0], session_key=key)
    samples: list[float] = []
    for _ in range(repeat):
        for q in questions:
            start = time.perf_counter()
            await recall(store, q, session_key=key, mode=mode)  # type: ignore[arg-type]
            samples.append((time.perf_counter() - start) * 1000)
    return Stat.of(samples)


async def latency(path: Path, conversations: list[Conversation]) -> Stat:
    """Hybrid recall latency over the first conversation's key."""
    store = await Store.open(path)
    try:
        return await _timed(store, conversations[0].key, [q.text for q in conversations[0].questions], "hybrid")
    finally:
        await store.close()


async def latency_at(path: Path, n: int, questions: list[str], log: Any = print) -> tuple[Stat, Stat, float]:
    """Hybrid and lexical recall over one key of `n` messages (corpus of ``bench.b_recall``), vectors stored.

    Returns the two latency stats (warm process) and the seconds `embed` took for the whole key.
    """
    from bench import b_recall

    if not await asyncio.to_thread(path.exists):
        await asyncio.to_thread(b_recall.build, path, n, 1, 1.0, log)  # it runs its own event loop
    store = await Store.open(path)
    embedder = default_embedder()
    assert embedder is not None
    start = time.perf_counter()
    await embed_pending(store, embedder)
    embed_s = time.perf_counter() - start
    key = b_recall._key(0)
    try:
        return await _timed(store, key, questions, "hybrid"), await _timed(store, key, questions, "lexical"), embed_s
    finally:
        await store.close()


def _table(ranks: dict[str, dict[str, list[int]]], label: str) -> None:
    classes = ["all", "paraphrase", "temporal", "multi_hop", "cjk", "identifier"]
    print(f"\n{label}")
    print(f"{'method':22} " + " ".join(f"{c:>22}" for c in classes))
    for method, per in ranks.items():
        cells = []
        for c in classes:
            m = metrics(per[c])
            cells.append(f"{m['r@1']:.2f}/{m['r@5']:.2f}/{m['r@10']:.2f} {m['mrr']:.2f}")
        print(f"{method:22} " + " ".join(f"{x:>22}" for x in cells))


async def evaluate(split: str, tuning: Tuning, workdir: Path, engines: tuple[str, ...] = ENGINES) -> dict[str, Any]:
    conversations = generate(split)  # type: ignore[arg-type]
    out: dict[str, Any] = {}
    for engine in engines:
        path = workdir / f"{split}-{engine}.db"
        if not path.exists():
            out[f"ingest {engine}"] = await load(path, engine, conversations)
        out[engine] = await score(path, conversations, tuning)
    return out


def run(size: Size, ctx: BenchContext) -> list[Row]:
    """The benchmark's rows (test split; weights as tuned on dev)."""
    return asyncio.run(_run(ctx.workdir, pick(size, (), (10_000,), (10_000, 100_000))))


async def _run(workdir: Path, sizes: tuple[int, ...] = (10_000, 100_000)) -> list[Row]:
    rows: list[Row] = []
    conversations = generate("test")
    result = await evaluate("test", Tuning(), workdir)
    for engine in ENGINES:
        _table(result[engine], f"test split, {engine} (r@1/r@5/r@10 MRR)")
        base = metrics(result[engine]["bm25 (raw FTS5, OR)"]["all"])
        for mode in MODES:
            ours = metrics(result[engine][mode]["all"])
            rows.append(
                Row(NAME, f"recall@10 {mode}, {engine}", "share", Stat.of([ours["r@10"]]), True,
                    baseline=Stat.of([base["r@10"]]), baseline_name="raw FTS5 bm25, OR of the words",
                    target=Target("ratio", ">=", 1.2) if mode == "hybrid" else None)
            )  # fmt: skip
    lat = await latency(workdir / "test-lossless-claw.db", conversations)
    rows.append(Row(NAME, "recall p50, one key of 240 turns (hybrid)", "ms", lat, False))
    questions = [q.text for q in conversations[0].questions]
    for n in sizes:
        hybrid, lexical, embed_s = await latency_at(workdir / f"scale-{n}.db", n, questions)
        rows.append(Row(NAME, f"recall p50, one key of {n:,} messages (hybrid)", "ms", hybrid, False,
                        target=Target("value", "<=", 30) if n >= 100_000 else None))  # fmt: skip
        rows.append(Row(NAME, f"recall p50, one key of {n:,} messages (lexical)", "ms", lexical, False))
        print(f"{n:,} messages: hybrid p50 {hybrid.median:.1f} ms p99 {hybrid.p99}, lexical p50 "
              f"{lexical.median:.1f} ms p99 {lexical.p99}; embed {embed_s:.1f} s")  # fmt: skip
    for name in ("ingest-off.db", "ingest-on.db"):  # a fresh store each run: a rerun would only dedupe
        for suffix in ("", "-wal", "-shm"):
            (workdir / f"{name}{suffix}").unlink(missing_ok=True)
    off = await load(workdir / "ingest-off.db", "lossless-claw", conversations, vectors=False)
    on = await load(workdir / "ingest-on.db", "lossless-claw", conversations, vectors=True)
    n = sum(len(s.turns) for c in conversations for s in c.sessions)
    rows.append(
        Row(NAME, f"ingest {n} turns, vectors on (vs off)", "turns/s", Stat.of([n / on]), True,
            baseline=Stat.of([n / off]), baseline_name="vector upkeep off", target=Target("ratio", ">=", 0.5))
    )  # fmt: skip
    print(f"\ningest: vectors off {off:.2f} s, on {on:.2f} s ({n} turns); recall p50 {lat.median:.1f} ms p99 {lat.p99}")
    return rows


def _tune(workdir: Path) -> None:
    """A small grid over the fusion weights on the dev split (lossless engine), best first."""
    grid = []
    for lexical_weight in (0.5, 1.0, 1.5):
        for recency_weight in (0.0, 0.05, 0.2):
            for coverage_weight in (0.0, 1.0):
                tuning = Tuning(
                    lexical_weight=lexical_weight, recency_weight=recency_weight, coverage_weight=coverage_weight
                )
                result = asyncio.run(evaluate("dev", tuning, workdir, engines=("lossless-claw",)))
                ranks = result["lossless-claw"]["hybrid"]
                worst = min(metrics(ranks[c])["r@10"] for c in ranks if c != "all")
                grid.append((metrics(ranks["all"])["mrr"], metrics(ranks["all"])["r@10"], worst, tuning))
    for mrr, r10, worst, tuning in sorted(grid, key=lambda g: (-g[0], -g[1])):
        print(f"mrr {mrr:.3f} r@10 {r10:.3f} worst-class r@10 {worst:.3f}  {tuning}")
    print("baseline dev:", {c: round(metrics(v)["r@10"], 3) for c, v in ranks.items()})


async def _dims(workdir: Path, dims: list[int]) -> None:
    """The test split at other (Matryoshka-truncated) dimensions of the same model; vectors embedded in memory."""
    conversations = generate("test")
    path = workdir / "test-lossless-claw.db"
    if not path.exists():
        await load(path, "lossless-claw", conversations)
    for dim in dims:
        ranks = await score(path, conversations, Tuning(), WordLlamaEmbedder(dim))
        _table({m: ranks[m] for m in ("semantic", "hybrid")}, f"test split, lossless-claw, {dim} dimensions")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tune", action="store_true", help="grid-search the fusion weights on the dev split")
    parser.add_argument("--workdir", type=Path, default=None)
    parser.add_argument(
        "--dims", type=int, nargs="*", help="only score the test split's stored histories at these dims"
    )
    args = parser.parse_args()
    workdir = args.workdir or Path(tempfile.mkdtemp(prefix="recall-quality-"))
    workdir.mkdir(parents=True, exist_ok=True)
    if args.tune:
        _tune(workdir)
        return
    if args.dims:
        asyncio.run(_dims(workdir, args.dims))
        return
    for row in asyncio.run(_run(workdir)):
        print(
            f"{row.metric}: {row.ours.median:.3f} {row.unit}",
            f"(baseline {row.baseline.median:.3f})" if row.baseline else "",
        )


if __name__ == "__main__":
    main()
