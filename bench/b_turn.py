"""A turn (issue 7 item 2): ingest the new messages and assemble within a 128k budget, at growing history.

Start: a history of N messages (1k, 10k, 100k at the full size) on one session key, compacted once by
the engine under test so its context fits the budget (:mod:`bench.history`; lossless-claw: a full
DAG sweep; legacy: the built-in summarising compaction). Then T turns, each exactly the host's
store work of a turn without the model call (what ``Runtime.run_turn`` does around the model):

1. look up the key's active session;
2. load the session's context items (``repo.load_context`` + ``pipeline_messages``);
3. ``engine.assemble(messages=…, token_budget=128_000)``;
4. persist the turn's 4 new messages (user, assistant with a tool call, tool result, assistant) in
   one transaction (``repo.append_messages``: serialise, flatten, count tokens, FTS trigger);
5. lossless-claw: ``engine.after_turn`` (threshold check; it compacts inline when the context passes
   0.75 × budget, which shows in p99, not p50); legacy: the runtime's context-token check.

Baselines, same process, same file: the turn at the smallest history (ratio = O(history) growth,
target ≤ 1.5 at the largest), and plain sqlite3 reading the same context rows (``CONTEXT_SQL``,
``fetchall``), timed right after each assemble (target: context build ≤ 2 × raw read).
"""

from __future__ import annotations

import asyncio
import sqlite3
import time
from typing import Any

from bench import history, rawdb
from bench.core import BenchContext, Row, Size, Stat, Target, pick
from openclaw_ctx.context import pipeline_messages
from openclaw_ctx.contract import AfterTurnParams, AssembleParams
from openclaw_ctx.messages import parse_message
from openclaw_ctx.store import repo
from openclaw_ctx.store.store import Store

NAME = "turn"
TITLE = "Turn: ingest + assemble at 1k / 10k / 100k history"
ENGINES = ("lossless-claw", "legacy")


async def _turns(path: Any, engine_id: str, n: int, turns: int, warmup: int) -> dict[str, Any]:
    store = await Store.open(path)
    timer = history.CountingTimer(store.counter)
    store.counter = timer
    engine = history.engine_for(store, engine_id)
    key = history.SESSION_KEY
    raw = sqlite3.connect(path)
    batches = history.next_turns(n, turns + warmup)
    out: dict[str, list[float]] = {k: [] for k in ("turn", "build", "assemble", "raw", "count", "items", "tokens")}
    try:
        for t, batch in enumerate(batches):
            counted_before = timer.seconds
            start = time.perf_counter()
            async with store.read() as conn:
                session = await repo.active_session(conn, key)
                assert session is not None
                entries = await repo.load_context(conn, session.session_id)
            messages = pipeline_messages(entries)
            loaded = time.perf_counter()
            assembled = await engine.assemble(
                AssembleParams(
                    session_id=session.session_id,
                    session_key=key,
                    messages=messages,
                    token_budget=history.BUDGET,
                )
            )
            built = time.perf_counter()
            items = [repo.NewMessage(parse_message(m), entry_id=f"turn-{n}-{t}-{i}") for i, m in enumerate(batch)]
            async with store.transaction() as conn:
                await repo.append_messages(conn, session, items, store.counter)
            if engine_id == "legacy":
                async with store.read() as conn:
                    await repo.context_tokens(conn, session.session_id)
            else:
                await engine.after_turn(
                    AfterTurnParams(
                        session_id=session.session_id,
                        session_key=key,
                        messages=[*messages, *(i.message for i in items)],
                        pre_prompt_message_count=len(messages),
                        token_budget=history.BUDGET,
                    )
                )
            end = time.perf_counter()
            counted = timer.seconds - counted_before
            raw_start = time.perf_counter()
            raw_rows = raw.execute(rawdb.CONTEXT_SQL, (session.session_id,)).fetchall()
            raw_s = time.perf_counter() - raw_start
            if t < warmup:
                continue
            out["turn"].append(end - start)
            out["build"].append(built - start)
            out["assemble"].append(built - loaded)
            out["raw"].append(raw_s)
            out["count"].append(counted / (end - start))
            out["items"].append(float(len(raw_rows)))
            out["tokens"].append(float(assembled.estimated_tokens or sum(e.token_count for e in entries)))
    finally:
        raw.close()
        await store.close()
    return out


def run(size: Size, ctx: BenchContext) -> list[Row]:
    """Run the turn benchmark at `size`."""
    sizes: tuple[int, ...] = pick(size, (300, 1000), (1000, 10_000), (1000, 10_000, 100_000))
    turns = pick(size, 6, 30, 40)
    rows: list[Row] = []
    for engine_id in ENGINES:
        first: Stat | None = None
        for n in sizes:
            h = history.history(ctx, n, engine_id, copy_as=f"turn-{engine_id}-{n}.db")  # type: ignore[arg-type]
            ctx.log(f"turn: {engine_id} at {n:,} messages, {turns} turns")
            got = asyncio.run(_turns(h.path, engine_id, n, turns, warmup=2))
            turn = Stat.of(got["turn"]).scaled(1000)
            items = int(Stat.of(got["items"]).median)
            tokens = int(Stat.of(got["tokens"]).median)
            extra = {"history": n, "context_items": items, "context_tokens": tokens, "turns": turns}
            last = n == sizes[-1]
            rows.append(
                Row(
                    NAME,
                    f"{engine_id}: turn at {n:,} msgs history ({items} items, {tokens:,} tok seen)",
                    "ms",
                    turn,
                    False,
                    first if first is not None else None,
                    f"same turn at {sizes[0]:,} msgs" if first is not None else "",
                    Target("ratio", "<=", 1.5) if last and first is not None else None,
                    layer="load_context + engine.assemble + append_messages + after_turn",
                    note="p99 includes inline threshold compactions" if engine_id != "legacy" else "",
                    extra=extra,
                )
            )
            if first is None:
                first = turn
            rows.append(
                Row(
                    NAME,
                    f"{engine_id}: context build (load + assemble) at {n:,} msgs",
                    "ms",
                    Stat.of(got["build"]).scaled(1000),
                    False,
                    Stat.of(got["raw"]).scaled(1000),
                    "sqlite3 fetchall of the same context rows",
                    Target("ratio", "<=", 2.0),
                    layer="repo.load_context (pydantic parse) + engine.assemble",
                    note=f"engine.assemble alone {Stat.of(got['assemble']).median * 1000:.2f} ms",
                    extra=extra,
                )
            )
            if last:
                rows.append(
                    Row(
                        NAME,
                        f"{engine_id}: share of turn time counting tokens at {n:,} msgs",
                        "%",
                        Stat.of(got["count"]).scaled(100),
                        False,
                        layer="TokenCounter.count during the turn (new messages only; history counts are stored)",
                        extra=extra,
                    )
                )
    return rows
