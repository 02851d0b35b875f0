"""Ingest (issue 7 item 1): the store's batch path versus raw sqlite3 executemany of the same rows.

Ours: ``repo.append_messages`` inside ``store.transaction()``, one transaction per batch, which
serialises each message, flattens its text, counts its tokens, inserts it (the FTS5 trigger indexes
it) and appends its context item. Raw: the very rows our run wrote (read back from our file, so they
are identical, token counts included) replayed with ``executemany`` into a file with the same schema,
one transaction per batch. The share of our time spent counting tokens is timed separately.

Also single-message ingest, one commit per message, p50/p99, against raw sqlite3 doing the same two
inserts in one ``BEGIN IMMEDIATE`` transaction per message.
"""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Any

from bench import data, rawdb
from bench.core import BenchContext, Row, Size, Stat, Target, pick
from openclaw_ctx.store import repo
from openclaw_ctx.tokens import get_counter

NAME = "ingest"
TITLE = "Ingest: batch throughput and per-message commit latency"
SESSION_KEY = "agent:main:bench-ingest"


async def _ours_batch(path: Path, items: list[repo.NewMessage], batch: int) -> float:
    store, session = await rawdb.fresh_store(path, SESSION_KEY)
    try:
        start = time.perf_counter()
        for i in range(0, len(items), batch):
            async with store.transaction() as conn:
                await repo.append_messages(conn, session, items[i : i + batch], store.counter)
        return time.perf_counter() - start
    finally:
        await store.close()


async def _raw_target(path: Path) -> str:
    store, session = await rawdb.fresh_store(path, SESSION_KEY)
    await store.close()
    return session.session_id


def _raw_batch(path: Path, session_id: str, rows: list[tuple[Any, ...]], batch: int, *, fts: bool = True) -> float:
    rows = [(r[0], session_id, *r[2:]) for r in rows]
    contexts = [(session_id, i, r[0], r[10]) for i, r in enumerate(rows)]
    msg_sql, ctx_sql = rawdb.insert_message_sql(), rawdb.insert_context_sql()
    conn = rawdb.connect(path)
    if not fts:
        conn.execute("DROP TRIGGER messages_fts_ai")
    try:
        start = time.perf_counter()
        for i in range(0, len(rows), batch):
            conn.execute("BEGIN IMMEDIATE")
            conn.executemany(msg_sql, rows[i : i + batch])
            conn.executemany(ctx_sql, contexts[i : i + batch])
            conn.execute("COMMIT")
        return time.perf_counter() - start
    finally:
        conn.close()


async def _ours_single(path: Path, items: list[repo.NewMessage]) -> list[float]:
    store, session = await rawdb.fresh_store(path, SESSION_KEY)
    out = []
    try:
        for item in items:
            start = time.perf_counter()
            async with store.transaction() as conn:
                await repo.append_messages(conn, session, [item], store.counter)
            out.append(time.perf_counter() - start)
    finally:
        await store.close()
    return out


def _raw_single(path: Path, session_id: str, rows: list[tuple[Any, ...]]) -> list[float]:
    msg_sql, ctx_sql = rawdb.insert_message_sql(), rawdb.insert_context_sql()
    conn = rawdb.connect(path)
    out = []
    try:
        for i, r in enumerate(rows):
            row = (r[0], session_id, *r[2:])
            start = time.perf_counter()
            conn.execute("BEGIN IMMEDIATE")
            conn.execute(msg_sql, row)
            conn.execute(ctx_sql, (session_id, i, r[0], r[10]))
            conn.execute("COMMIT")
            out.append(time.perf_counter() - start)
    finally:
        conn.close()
    return out


def _counting_time(items: list[repo.NewMessage]) -> float:
    counter = get_counter()
    start = time.perf_counter()
    for item in items:
        repo.message_token_count(item.message, counter)
    return time.perf_counter() - start


async def _run(size: Size, ctx: BenchContext) -> list[Row]:
    n = pick(size, 400, 10_000, 100_000)
    batch = pick(size, 100, 1000, 1000)
    n_single = pick(size, 40, 500, 2000)
    ctx.log(f"ingest: generating {n} messages")
    items = rawdb.new_messages(data.conversation(n, seed=11))
    get_counter()  # vocabulary load is a one-off, not ingest cost
    ours_s, raw_s, count_s, nofts_s = [], [], [], []
    for r in range(ctx.repeat):
        ctx.log(f"ingest: batch run {r + 1}/{ctx.repeat}")
        ours_path = ctx.path(f"ingest-ours-{r}.db")
        ours_s.append(await _ours_batch(ours_path, items, batch))
        rows = rawdb.read_message_rows(ours_path)
        raw_path = ctx.path(f"ingest-raw-{r}.db")
        sid = await _raw_target(raw_path)
        raw_s.append(await asyncio.to_thread(_raw_batch, raw_path, sid, rows, batch))
        nofts_path = ctx.path(f"ingest-raw-nofts-{r}.db")
        sid = await _raw_target(nofts_path)
        nofts_s.append(await asyncio.to_thread(_raw_batch, nofts_path, sid, rows, batch, fts=False))
        count_s.append(_counting_time(items))
    ours, raw = Stat.of(ours_s), Stat.of(raw_s)
    share = Stat.of([c / o for c, o in zip(count_s, ours_s, strict=True)]).scaled(100)
    ctx.log("ingest: single-message commits")
    single_items = items[:n_single]
    ours_lat = await _ours_single(ctx.path("ingest-single-ours.db"), single_items)
    single_rows = rows[:n_single]
    raw_single_path = ctx.path("ingest-single-raw.db")
    sid = await _raw_target(raw_single_path)
    raw_lat = _raw_single(raw_single_path, sid, single_rows)
    per_row_raw_fts = raw.median / n * 1e6
    return [
        Row(
            NAME,
            f"batch ingest, {n:,} msgs, {batch}/txn",
            "msg/s",
            ours.rate(n),
            True,
            raw.rate(n),
            "sqlite3 executemany, same rows + FTS trigger",
            Target("ratio", ">=", 0.5),
            layer="repo.append_messages (SA Core over aiosqlite)",
            note=f"raw costs {per_row_raw_fts:.0f} µs/msg incl. FTS5; token counts precomputed for raw",
        ),
        Row(
            NAME,
            f"raw sqlite3 batch ingest without the FTS5 trigger, {n:,} msgs",
            "msg/s",
            Stat.of(nofts_s).rate(n),
            True,
            raw.rate(n),
            "sqlite3 executemany with FTS trigger",
            layer="reference: what FTS5 (porter unicode61) indexing costs",
            note=f"FTS5 costs {(raw.median - Stat.of(nofts_s).median) / n * 1e6:.0f} µs/msg",
        ),
        Row(
            NAME,
            "share of batch-ingest time counting tokens",
            "%",
            share,
            False,
            layer="tokens.get_counter().count via message_token_count",
            note=f"{Stat.of(count_s).median / n * 1e6:.0f} µs/msg counting",
        ),
        Row(
            NAME,
            f"single-message ingest, commit each ({n_single})",
            "ms",
            Stat.of(ours_lat).scaled(1000),
            False,
            Stat.of(raw_lat).scaled(1000),
            "sqlite3 BEGIN IMMEDIATE + 2 inserts + COMMIT",
            Target("value", "<=", 1.0),
            layer="store.transaction + repo.append_messages",
            note="SLO p50 ≤ 1 ms, p99 ≤ 5 ms",
        ),
    ]


def run(size: Size, ctx: BenchContext) -> list[Row]:
    """Run the ingest benchmark at `size`."""
    return asyncio.run(_run(size, ctx))
