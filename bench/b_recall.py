"""Recall (issue 7 item 3): full-text grep over many messages and session keys, versus raw FTS5.

Corpus: `n` messages spread over `keys` session keys, keys interleaved in runs of 50 (agents run
concurrently), written into the real schema. The full tier is 1M messages over 1k keys with ~250-char
median texts (the shape of the FTS anchors in spec/benchmarks.md §4.4; 1M × 1 KB would take most of
an hour to index on this box). The database is built once per tier into ``bench/results/cache`` and
reused; the FTS index is built with FTS5 ``rebuild`` and the schema's trigger is restored after.

Queries, each timed many times, ours and raw interleaved per query:
- full-text over all keys: a unique needle, a rare term, a mid-frequency term, a very common term;
- per key: a mid-frequency term within one session key.

Ours is ``openclaw_ctx.recall.grep(store, term, scope="messages", limit=20, sort=...)`` (if that
module is missing, the same FTS5 query through ``Store.read()``, the layer grep sits on). The
baseline is the plain sqlite3 FTS5 query with a snippet: ``ORDER BY rowid DESC`` for recency (the same
hits as grep), ``ORDER BY rank`` for bm25 (grep ranks only the newest 1,000 matches, so for common
terms it does less work than the baseline and its hits may differ).
"""

from __future__ import annotations

import asyncio
import importlib
import json
import random
import sqlite3
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from sqlalchemy import text

from bench import data, rawdb
from bench.core import BenchContext, Row, Size, Stat, Target, pick
from openclaw_ctx.store.store import Store

NAME = "recall"
TITLE = "Recall: grep vs raw FTS5"
BUILD_VERSION = 1
RUN = 50  # consecutive messages of one key before the next key's turn

_SELECT = (
    "SELECT m.message_id, m.session_key, m.seq, m.role, "
    "snippet(messages_fts, 0, '[', ']', '…', 12) AS snippet "
    "FROM messages_fts JOIN messages AS m ON m.message_id = messages_fts.rowid "
)
SQL = {
    "rank": _SELECT + "WHERE messages_fts MATCH :q ORDER BY rank LIMIT 20",
    "recent": _SELECT + "WHERE messages_fts MATCH :q ORDER BY messages_fts.rowid DESC LIMIT 20",
    "key": _SELECT + "WHERE messages_fts MATCH :q AND m.session_key = :k ORDER BY messages_fts.rowid DESC LIMIT 20",
}


def _key(k: int) -> str:
    return f"agent:main:bench-{k:04d}"


def build(path: Path, n: int, keys: int, scale: float, log: Callable[[str], None]) -> None:
    """Write the recall corpus into a fresh database with our schema (atomic: built aside, renamed)."""
    building = path.with_name(path.name + ".building")
    for suffix in ("", "-wal", "-shm"):
        Path(f"{building}{suffix}").unlink(missing_ok=True)

    async def schema() -> None:
        store = await Store.open(building)
        await store.close()

    asyncio.run(schema())
    conn = rawdb.connect(building)
    conn.execute("PRAGMA synchronous=OFF")  # a cache being built; a crash just means a rebuild
    conn.execute("BEGIN")
    sessions = [(f"bench-session-{k:04d}", _key(k)) for k in range(keys)]
    conn.executemany("INSERT INTO sessions(session_id, session_key) VALUES (?, ?)", sessions)
    trigger = conn.execute("SELECT sql FROM sqlite_master WHERE name = 'messages_fts_ai'").fetchone()[0]
    conn.execute("DROP TRIGGER messages_fts_ai")
    sql = (
        "INSERT INTO messages(session_id, session_key, seq, role, message_json, text, token_count, "
        "tool_call_id, tool_name, timestamp_ms) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
    )
    seqs = [0] * keys
    rows: list[tuple[Any, ...]] = []
    start = time.perf_counter()
    for i, msg in enumerate(data.stream(n, seed=21, scale=scale)):
        k = (i // RUN) % keys
        seqs[k] += 1
        body = data.wire_text(msg)
        rows.append(
            (
                sessions[k][0],
                sessions[k][1],
                seqs[k],
                msg["role"],
                json.dumps(msg, ensure_ascii=False, separators=(",", ":")),
                body,
                len(body) // 4 + 4,  # not read by recall; exact counting would only slow the build
                msg.get("toolCallId"),
                msg.get("toolName"),
                msg["timestamp"],
            )
        )
        if len(rows) == 20_000:
            conn.executemany(sql, rows)
            rows.clear()
            log(f"recall: built {i + 1:,}/{n:,} rows ({time.perf_counter() - start:.0f} s)")
    conn.executemany(sql, rows)
    log("recall: FTS5 rebuild")
    conn.execute("INSERT INTO messages_fts(messages_fts) VALUES ('rebuild')")
    conn.execute(trigger)
    conn.execute("COMMIT")
    conn.execute("INSERT INTO messages_fts(messages_fts) VALUES ('optimize')")
    conn.close()
    building.replace(path)


def _queries(conn: sqlite3.Connection, n: int, keys: int, rng: random.Random, per_class: int) -> dict[str, Any]:
    c = data.corpus()
    needles = max(1, n // data.NEEDLE_EVERY)
    out: dict[str, Any] = {
        "needle": [f'"{data.needle(rng.randrange(needles))}"' for _ in range(per_class)],
        "rare": [f'"{c.term(rng.randrange(12_000, 15_000))}"' for _ in range(per_class)],
        "mid": [f'"{c.term(rng.randrange(300, 600))}"' for _ in range(per_class)],
        "common": [f'"{c.term(rng.randrange(0, 5))}"' for _ in range(max(3, per_class // 5))],
    }
    out["df"] = {
        cls: conn.execute("SELECT count(*) FROM messages_fts WHERE messages_fts MATCH ?", (terms[0],)).fetchone()[0]
        for cls, terms in out.items()
    }
    out["key_terms"] = [(f'"{c.term(rng.randrange(300, 600))}"', _key(rng.randrange(keys))) for _ in range(per_class)]
    return out


def _grep() -> Callable[..., Awaitable[Any]] | None:
    try:
        module = importlib.import_module("openclaw_ctx.recall")
    except ImportError:
        return None
    found: Callable[..., Awaitable[Any]] | None = getattr(module, "grep", None)
    return found


def _ours(store: Store, sql: str) -> Callable[[dict[str, Any]], Awaitable[int]]:
    """Our side of one query: lossless grep when it exists, else the same SQL through Store.read()."""
    grep = _grep()
    if grep is None:

        async def fallback(p: dict[str, Any]) -> int:
            async with store.read() as conn:
                return len((await conn.execute(text(sql), p)).all())

        return fallback
    sort = "relevance" if "rank" in sql else "recency"

    async def via_grep(p: dict[str, Any]) -> int:
        hits = await grep(store, p["q"].strip('"'), scope="messages", session_key=p.get("k"), limit=20, sort=sort)
        return len(hits)

    return via_grep


async def _measure(path: Path, qs: dict[str, Any], ctx: BenchContext) -> list[Row]:
    raw = sqlite3.connect(path)
    store = await Store.open(path)
    layer = (
        "openclaw_ctx.recall.grep (scope=messages, limit 20)"
        if _grep()
        else "Store.read() + the same FTS5 SQL (grep not written yet)"
    )
    rows: list[Row] = []
    cases: list[tuple[str, str, list[dict[str, Any]]]] = []
    for cls in ("needle", "rare", "mid", "common"):
        for order in ("recent", "rank"):
            label = f"all keys, {cls} term (df {qs['df'][cls]:,}), {'recency' if order == 'recent' else 'bm25'}"
            cases.append((label, order, [{"q": q} for q in qs[cls]]))
    cases.append(("one key, mid term, recency", "key", [{"q": q, "k": k} for q, k in qs["key_terms"]]))
    try:
        for label, order, params in cases:
            sql = SQL[order]
            ours = _ours(store, sql)
            for p in params[:2]:  # warm caches and statement compilation on both sides
                raw.execute(sql, p).fetchall()
                await ours(p)
            ours_s: list[float] = []
            raw_s: list[float] = []
            for _ in range(ctx.repeat):
                for p in params:
                    start = time.perf_counter()
                    raw_hits = len(raw.execute(sql, p).fetchall())
                    raw_s.append(time.perf_counter() - start)
                    start = time.perf_counter()
                    our_hits = await ours(p)
                    ours_s.append(time.perf_counter() - start)
                    if order != "rank":  # bm25 over grep's newest-1000 candidates may differ from full bm25
                        assert our_hits == raw_hits, (label, p, our_hits, raw_hits)
            rows.append(
                Row(
                    NAME,
                    label,
                    "ms",
                    Stat.of(ours_s).scaled(1000),
                    False,
                    Stat.of(raw_s).scaled(1000),
                    "sqlite3 FTS5 " + ("ORDER BY rank" if order == "rank" else "ORDER BY rowid DESC"),
                    Target("ratio", "<=", 1.5),
                    layer=layer,
                    note=f"{len(params)} distinct queries × {ctx.repeat}",
                )
            )
    finally:
        raw.close()
        await store.close()
    return rows


def run(size: Size, ctx: BenchContext) -> list[Row]:
    """Run the recall benchmark at `size` (building or reusing the cached corpus)."""
    n, keys, scale = pick(size, (3000, 10, 1.0), (100_000, 100, 1.0), (1_000_000, 1000, 0.25))
    cache = ctx.cache_dir or ctx.workdir
    path = cache / f"recall-{size}-v{BUILD_VERSION}.db"
    if not path.exists():
        ctx.log(f"recall: building {n:,} messages over {keys} keys into {path}")
        build(path, n, keys, scale, ctx.log)
    raw = sqlite3.connect(path)
    try:
        qs = _queries(raw, n, keys, random.Random(5), pick(size, 5, 30, 40))
    finally:
        raw.close()
    rows = asyncio.run(_measure(path, qs, ctx))
    for row in rows:
        row.extra = {"messages": n, "keys": keys, "text_scale": scale}
    return rows
