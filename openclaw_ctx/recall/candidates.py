"""The candidate lists recall fuses: lexical per table, summaries lifting what they cover, a recency nudge."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
from sqlalchemy.exc import DBAPIError
from sqlalchemy.ext.asyncio import AsyncConnection

from openclaw_ctx.recall.fts import like_pattern
from openclaw_ctx.recall.lexical import LexicalQuery, rescore
from openclaw_ctx.recall.rows import MSG_MS, SUM_MS, TimeWindow, time_sql
from openclaw_ctx.recall.search import _rowid_range
from openclaw_ctx.recall.vectors import similarities
from openclaw_ctx.store.repo import Driver

if TYPE_CHECKING:
    from openclaw_ctx.recall.ask import Tuning
    from openclaw_ctx.recall.embedding import Embedder, Matrix

__all__ = ["Fused", "boost_recent", "lexical", "lift_covered"]

_BM25_POOL = 300
"""Best bm25 matches re-scored by coverage and adjacency (the rest are past any page recall returns)."""
_CJK_SCAN = 5000
"""Newest CJK substring matches scored (LIKE cannot rank, so it reads at most this many rows)."""
_LIFTED = 20
"""Summaries, best first, whose covered messages are lifted."""
_PER_SUMMARY = 2


@dataclass
class Fused:
    """One item's fused score and time (epoch ms)."""

    ms: int
    score: float = 0.0
    via: str | None = None
    """For a message lifted by a summary: that summary's id."""


async def lexical(
    conn: AsyncConnection,
    table: str,
    query: LexicalQuery,
    key: str | None,
    window: TimeWindow,
    depth: int,
    tuning: Tuning,
) -> list[tuple[int | str, int]]:
    """The table's best `depth` items for the query, as (item id, ms), best first."""
    scored: dict[int | str, tuple[float, int]] = {}
    if query.match is not None:
        try:
            for item, ms, bm25, body in await _bm25(conn, table, query.match, key, window):
                value = rescore(
                    body, query, bm25, coverage_weight=tuning.coverage_weight, phrase_weight=tuning.phrase_weight
                )
                scored[item] = (value, ms)
        except DBAPIError:
            pass  # an FTS failure (a damaged index) leaves the other rankings to answer
    if query.bigrams:
        for item, ms, body in await _cjk(conn, table, query.bigrams, key, window):
            share = sum(1 for b in query.bigrams if b in body) / len(query.bigrams)
            best = max(scored.get(item, (0.0, ms))[0], 0.0)
            scored[item] = (best + share * 10.0, ms)
    ranked = sorted(scored.items(), key=lambda kv: (-kv[1][0], -kv[1][1]))
    return [(item, ms) for item, (_score, ms) in ranked[:depth]]


async def _bm25(
    conn: AsyncConnection, table: str, match: str, key: str | None, window: TimeWindow
) -> list[tuple[Any, int, float, str]]:
    fts = f"{table}_fts"
    if table == "messages":
        alias, id_col, item, ms, body = "m", "m.message_id", "m.message_id", MSG_MS, "substr(m.text, 1, 20000)"
    else:
        alias, id_col, item, ms, body = "s", "s.rowid", "s.summary_id", SUM_MS, "substr(s.content, 1, 20000)"
    params: dict[str, Any] = {"match": match, "n": _BM25_POOL}
    scope = ""
    if key is not None:
        bounds = await _rowid_range(conn, table, key)
        if bounds is None:
            return []
        scope = f" AND {fts}.rowid BETWEEN :lo AND :hi AND {alias}.session_key = :key"
        params.update(lo=bounds[0], hi=bounds[1], key=key)
    sql = (
        f"SELECT {item}, {ms}, bm25({fts}) AS score, {body} FROM {fts} CROSS JOIN {table} AS {alias} "
        f"ON {id_col} = {fts}.rowid WHERE {fts} MATCH :match{scope}{time_sql(table, window, params)} "
        f"ORDER BY score LIMIT :n"
    )
    rows = await (await Driver.of(conn)).fetchall(sql, params)
    return [(r[0], int(r[1] or 0), float(r[2]), r[3] or "") for r in rows]


async def _cjk(
    conn: AsyncConnection, table: str, bigrams: tuple[str, ...], key: str | None, window: TimeWindow
) -> list[tuple[Any, int, str]]:
    alias, item, ms, column, order = (
        ("m", "m.message_id", MSG_MS, "m.text", "m.message_id")
        if table == "messages"
        else ("s", "s.summary_id", SUM_MS, "s.content", "s.rowid")
    )
    params: dict[str, Any] = {f"b{i}": like_pattern(b) for i, b in enumerate(bigrams[:64])}
    where = " OR ".join(f"{column} LIKE :b{i} ESCAPE '\\'" for i in range(len(params)))
    scope = ""
    if key is not None:
        scope = f" AND {alias}.session_key = :key"
        params["key"] = key
    params["n"] = _CJK_SCAN
    sql = (
        f"SELECT {item}, {ms}, substr({column}, 1, 20000) FROM {table} AS {alias} WHERE ({where}){scope}"
        f"{time_sql(table, window, params)} ORDER BY {order} DESC LIMIT :n"
    )
    rows = await (await Driver.of(conn)).fetchall(sql, params)
    return [(r[0], int(r[1] or 0), r[2] or "") for r in rows]


# A summary's messages: its own edges (leaf, legacy), or its sources' down the DAG (condensed).
_COVERED_SQL = """
WITH RECURSIVE down(sid, root, lvl) AS (
    SELECT value, value, 0 FROM json_each(:ids)
    UNION
    SELECT sp.source_summary_id, down.root, down.lvl + 1
    FROM down CROSS JOIN summary_parents AS sp ON sp.summary_id = down.sid WHERE down.lvl < 64
)
SELECT down.root, m.message_id, {ms}
FROM down CROSS JOIN summary_messages AS sm ON sm.summary_id = down.sid
CROSS JOIN messages AS m ON m.message_id = sm.message_id
"""


async def lift_covered(
    conn: AsyncConnection,
    key: str | None,
    fused: dict[int | str, Fused],
    query_vector: Matrix | None,
    model: Embedder | None,
    window: TimeWindow,
    tuning: Tuning,
) -> None:
    """Give the messages closest to the question under each of the best summaries a share of its score."""
    summaries = sorted((i for i in fused if isinstance(i, str)), key=lambda i: -fused[i].score)[:_LIFTED]
    if not summaries:
        return
    sql = _COVERED_SQL.format(ms=MSG_MS)
    rows = await (await Driver.of(conn)).fetchall(sql, {"ids": json.dumps(summaries)})
    by_summary: dict[str, list[tuple[int, int]]] = {}
    for root, mid, ms in rows:
        if window.since_ms is not None and (ms or 0) < window.since_ms:
            continue
        if window.before_ms is not None and (ms or 0) >= window.before_ms:
            continue
        by_summary.setdefault(root, []).append((mid, int(ms or 0)))
    for sid, covered in by_summary.items():
        for mid, ms in await _closest(conn, key, covered, query_vector, model, fused):
            share = fused[sid].score * tuning.summary_lift
            entry = fused.setdefault(mid, Fused(ms=ms))
            if share > entry.score:
                entry.score, entry.via = share, sid


async def _closest(
    conn: AsyncConnection,
    key: str | None,
    covered: list[tuple[int, int]],
    query_vector: Matrix | None,
    model: Embedder | None,
    fused: dict[int | str, Fused],
) -> list[tuple[int, int]]:
    """The covered messages to lift: those already ranked, best first, else the most similar."""
    ranked = sorted((c for c in covered if c[0] in fused), key=lambda c: -fused[c[0]].score)
    if ranked or query_vector is None or model is None:
        return ranked[:_PER_SUMMARY]
    scores = await similarities(conn, key, query_vector, model, [mid for mid, _ in covered])
    order = np.argsort(-np.asarray(scores))[:_PER_SUMMARY]
    return [covered[i] for i in order]


def boost_recent(fused: dict[int | str, Fused], weight: float) -> None:
    """Scale scores by up to ``1 + weight`` for the newest candidate (linear in time between oldest and newest)."""
    if not fused or weight <= 0:
        return
    times = [f.ms for f in fused.values()]
    lo, hi = min(times), max(times)
    if hi <= lo:
        return
    for entry in fused.values():
        entry.score *= 1.0 + weight * (entry.ms - lo) / (hi - lo)
