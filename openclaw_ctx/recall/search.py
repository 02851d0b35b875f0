"""Searching one table (``messages`` or ``summaries``): FTS5 first, LIKE for what FTS cannot serve, or a regex scan.

Search strategy (see ``benchmarks.md`` §4.4): FTS5 drives the query (``CROSS JOIN`` pins it as the
outer loop) and recency is ``ORDER BY rowid DESC``, which exits early; a key scope is a rowid range
plus a per-row key check, never an ``IN``-subquery; bm25 ranks only a LIMIT-ed set of the newest
matches, so a very common term cannot score the whole index.
"""

from __future__ import annotations

import json
from dataclasses import replace
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import text
from sqlalchemy.exc import DBAPIError
from sqlalchemy.ext.asyncio import AsyncConnection

from openclaw_ctx._time import iso_from_ms
from openclaw_ctx.recall import regex_scan
from openclaw_ctx.recall.fts import checked_like_terms, has_cjk, like_pattern, sanitize_fts_query
from openclaw_ctx.recall.rows import COLUMNS, Found, SearchQuery, SearchRow, row_from, table_parts, time_sql
from openclaw_ctx.store.repo import Driver

__all__ = ["CANDIDATES", "rank", "run"]

# bm25 scores every row it returns, so relevance ranks only the newest CANDIDATES matches.
CANDIDATES = 1000

# Ranked candidates (up to CANDIDATES of them) leave their text behind: only the page that survives
# ranking needs it (for snippets), so it is fetched for those rows alone.
_CANDIDATE_COLS = {
    "messages": COLUMNS["messages"].replace("m.text,", "'' AS text,"),
    "summaries": COLUMNS["summaries"].replace("s.content,", "'' AS content,"),
}
_TEXT_SQL = {
    "messages": "SELECT message_id, text FROM messages WHERE message_id IN (SELECT value FROM json_each(?))",
    "summaries": "SELECT summary_id, content FROM summaries WHERE summary_id IN (SELECT value FROM json_each(?))",
}


async def run(conn: AsyncConnection, table: str, query: SearchQuery) -> Found:
    """Search one table (`messages` or `summaries`) with the query's mode and scope.

    Raises:
        RecallQueryError: an invalid or too slow regex, or a LIKE search over SQLite's bounds.
    """
    if query.mode == "regex":
        return await regex_scan.scan(conn, table, query)
    match = sanitize_fts_query(query.pattern)
    if match is None or has_cjk(query.pattern):
        return await _like(conn, table, query)
    try:
        return await _fts(conn, table, query, match)
    except DBAPIError:
        # Any FTS failure (a tokenizer edge, a damaged index) still answers, by LIKE.
        return await _like(conn, table, query)


async def _rowid_range(conn: AsyncConnection, table: str, key: str) -> tuple[int, int] | None:
    """The key's smallest and largest rowid, from index lookups (message ids grow with seq)."""
    if table == "messages":
        sql = (
            "SELECT (SELECT message_id FROM messages WHERE session_key = :k ORDER BY seq LIMIT 1), "
            "(SELECT message_id FROM messages WHERE session_key = :k ORDER BY seq DESC LIMIT 1)"
        )
    else:
        sql = "SELECT min(rowid), max(rowid) FROM summaries WHERE session_key = :k"
    lo, hi = (await conn.execute(text(sql), {"k": key})).one()
    return None if lo is None else (min(lo, hi), max(lo, hi))


async def _fts(conn: AsyncConnection, table: str, query: SearchQuery, match: str) -> Found:
    fts = f"{table}_fts"
    alias, cols, _column = table_parts(table)
    id_col = "m.message_id" if table == "messages" else "s.rowid"
    params: dict[str, Any] = {"match": match}
    scope = ""
    if query.session_key is not None:
        bounds = await _rowid_range(conn, table, query.session_key)
        if bounds is None:
            return Found([], "fts")
        scope = f" AND {fts}.rowid BETWEEN :lo AND :hi AND {alias}.session_key = :key"
        params.update(lo=bounds[0], hi=bounds[1], key=query.session_key)
    ranked = query.sort != "recency"
    score = f"bm25({fts})" if ranked else "NULL"
    params["n"] = max(CANDIDATES, query.limit) if ranked else query.limit
    if ranked:
        cols = _CANDIDATE_COLS[table]
    sql = (
        f"SELECT {cols}, {score} AS score FROM {fts} CROSS JOIN {table} AS {alias} ON {id_col} = {fts}.rowid "
        f"WHERE {fts} MATCH :match{scope}{time_sql(table, query.window, params)} "
        f"ORDER BY {fts}.rowid DESC LIMIT :n"
    )
    # Through SQLAlchemy (not the one-hop driver path): the query-plan tests watch this statement
    # with SQLAlchemy's cursor events.
    rows = await conn.execute(text(sql), params)
    if not ranked:
        return Found([row_from(table, r) for r in rows], "fts")
    # Only the best `limit` of this table can make the final page (ranking is per row), so cut
    # here, then fetch text and format times for those rows only.
    top = rank([row_from(table, r, timed=False) for r in rows], query.sort, now_ms=query.now_ms)[: query.limit]
    return Found(await _with_text(conn, table, top), "fts")


async def _with_text(conn: AsyncConnection, table: str, rows: list[SearchRow]) -> list[SearchRow]:
    """`rows` with their text (and, for messages, their time) filled in, in one query."""
    if not rows:
        return rows
    key = "message_id" if table == "messages" else "summary_id"
    ids = [getattr(r, key) for r in rows]
    found = await (await Driver.of(conn)).fetchall(_TEXT_SQL[table], (json.dumps(ids),))
    texts: dict[Any, str] = {row[0]: row[1] for row in found}
    if table == "messages":
        return [replace(r, text=texts.get(r.message_id, ""), time=iso_from_ms(r.sort_ms)) for r in rows]
    return [replace(r, text=texts.get(r.summary_id, "")) for r in rows]


async def _like(conn: AsyncConnection, table: str, query: SearchQuery) -> Found:
    terms = checked_like_terms(query.pattern)
    if not terms:
        return Found([], "like")
    alias, cols, column = table_parts(table)
    params: dict[str, Any] = {f"t{i}": like_pattern(t) for i, t in enumerate(terms)}
    where = " AND ".join(f"{alias}.{column} LIKE :t{i} ESCAPE '\\'" for i in range(len(terms)))
    order = _scan_order(table, query.session_key is not None)
    if query.session_key is not None:
        where += f" AND {alias}.session_key = :key"
        params["key"] = query.session_key
    params["n"] = query.limit if query.sort == "recency" else max(CANDIDATES, query.limit)
    sql = (
        f"SELECT {cols}, NULL AS score FROM {table} AS {alias} WHERE {where}"
        f"{time_sql(table, query.window, params)} ORDER BY {order} DESC LIMIT :n"
    )
    rows = await conn.execute(text(sql), params)
    return Found([row_from(table, r) for r in rows], "like")


def _scan_order(table: str, scoped: bool) -> str:
    # Within one key, (session_key, seq) walks newest-first by index; across keys, rowid does.
    if table == "messages":
        return "m.seq" if scoped else "m.message_id"
    return "s.created_at" if scoped else "s.rowid"


def rank(rows: list[SearchRow], sort: str, *, now_ms: int | None = None) -> list[SearchRow]:
    """Order rows from one or both tables: newest first, by bm25, or by bm25 damped by age.

    Rows without a score (LIKE and regex hits) rank after scored ones, newest first. A tie in time
    puts a message (the raw evidence) before a summary.
    """

    def newest(r: SearchRow) -> tuple[int, int, int]:
        return (-r.sort_ms, 0 if r.message_id is not None else 1, -(r.message_id or 0))

    if sort == "recency":
        return sorted(rows, key=newest)
    now = now_ms if now_ms is not None else int(datetime.now(UTC).timestamp() * 1000)

    def scored(r: SearchRow) -> tuple[int, float, tuple[int, int, int]]:
        if r.score is None:
            return (1, 0.0, newest(r))
        value = r.score
        if sort == "hybrid":
            # bm25 is negative (lower is better); dividing by a growing age factor pulls old rows toward 0.
            value = value / (1 + max(0, now - r.sort_ms) / 3_600_000 * 0.001)
        return (0, value, newest(r))

    return sorted(rows, key=scored)
