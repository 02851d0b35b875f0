"""Turning user text into FTS5 queries that cannot fail, and the LIKE fallback for what FTS cannot serve.

FTS5 query syntax treats commas, quotes, parentheses, ``AND``/``OR``/``NOT``/``NEAR``, ``*``, ``:``
and ``^`` as operators, so raw user text is a syntax error waiting to happen (hermes-lcm #460: a
comma). :func:`sanitize_fts_query` quotes every whitespace-separated chunk as a phrase, so the query
is always a plain AND of phrases; a trailing ``*`` on a chunk is kept as a quoted prefix query.

``unicode61`` keeps a run of CJK characters as one token, so a CJK word inside a longer run never
matches; :func:`needs_like_fallback` says when to search with ``LIKE`` instead, and
:func:`like_terms` / :func:`like_pattern` build AND-of-substring terms for it.
"""

from __future__ import annotations

import contextlib
import importlib
import json
import re
import unicodedata
from collections.abc import Callable
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import text
from sqlalchemy.exc import DBAPIError
from sqlalchemy.ext.asyncio import AsyncConnection

from openclaw_ctx.errors import OpenClawCtxError
from openclaw_ctx.store.repo import Driver

__all__ = [
    "Found",
    "RecallQueryError",
    "SearchQuery",
    "SearchRow",
    "TimeWindow",
    "compile_regex",
    "fts_terms",
    "has_cjk",
    "like_pattern",
    "like_terms",
    "needs_like_fallback",
    "rank",
    "required_literal",
    "run",
    "sanitize_fts_query",
    "snippet",
]

# Characters unicode61 treats as part of a token: letters, numbers and private-use code points.
_TOKEN_CATEGORIES = ("L", "N")
_CJK = re.compile(
    "[\u1100-\u11ff\u2e80-\u2fdf\u3040-\u30ff\u3100-\u31ff\u3400-\u4dbf\u4e00-\u9fff"
    "\ua960-\ua97f\uac00-\ud7ff\uf900-\ufaff\uff66-\uff9f\U00020000-\U0002fa1f]"
)
_CONTROL = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]")


def _is_token_char(ch: str) -> bool:
    category = unicodedata.category(ch)
    return category[0] in _TOKEN_CATEGORIES or category == "Co"


def _chunks(user_text: str) -> list[tuple[str, bool]]:
    """Whitespace-separated chunks of `user_text` as ``(text, wants_prefix)``, dropping token-less ones."""
    cleaned = _CONTROL.sub(" ", user_text)
    out: list[tuple[str, bool]] = []
    for raw in cleaned.split():
        prefix = raw.endswith("*")
        chunk = raw.rstrip("*")
        if any(_is_token_char(ch) for ch in chunk):
            out.append((chunk, prefix))
    return out


def sanitize_fts_query(user_text: str) -> str | None:
    """An FTS5 MATCH expression for `user_text` that is always valid: an AND of quoted phrases.

    Each whitespace-separated chunk becomes one phrase (``"vault-17"`` matches the adjacent tokens
    ``vault 17``); embedded double quotes are doubled; a trailing ``*`` keeps its prefix meaning as
    ``"abc"*``. Chunks with no letter or digit (punctuation, emoji) are dropped, as are control
    characters (an embedded NUL would end the query string early).

    Args:
        user_text: anything a user or a model typed.

    Returns:
        The MATCH expression, or None when nothing searchable is left.
    """
    parts = []
    for chunk, prefix in _chunks(user_text):
        quoted = '"' + chunk.replace('"', '""') + '"'
        parts.append(quoted + "*" if prefix else quoted)
    return " ".join(parts) if parts else None


def fts_terms(user_text: str) -> list[str]:
    """The lower-cased word tokens of `user_text` (what a snippet should highlight)."""
    terms: list[str] = []
    for chunk, _prefix in _chunks(user_text):
        word = []
        for ch in chunk:
            if _is_token_char(ch):
                word.append(ch)
            elif word:
                terms.append("".join(word).lower())
                word = []
        if word:
            terms.append("".join(word).lower())
    return terms


def has_cjk(user_text: str) -> bool:
    """True when the text contains CJK (or Hangul / kana) characters."""
    return _CJK.search(user_text) is not None


def needs_like_fallback(user_text: str) -> bool:
    """True when FTS5 cannot serve this query (CJK text, or nothing tokenisable but something typed)."""
    if has_cjk(user_text):
        return True
    return sanitize_fts_query(user_text) is None and bool(like_terms(user_text))


def like_terms(user_text: str) -> list[str]:
    """The whitespace-separated terms of `user_text` for an AND-of-substrings LIKE search."""
    # A trailing `*` (prefix intent) is implied by substring matching.
    return [t.rstrip("*") for t in _CONTROL.sub(" ", user_text).split() if t.rstrip("*")]


def like_pattern(term: str) -> str:
    """A ``LIKE … ESCAPE '\\'`` pattern that matches `term` as a literal substring."""
    escaped = term.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
    return f"%{escaped}%"


# --- executing searches --------------------------------------------------------------------------


class RecallQueryError(OpenClawCtxError, ValueError):
    """A recall request that cannot run as written (empty pattern, invalid regex, bad argument)."""


@dataclass(frozen=True)
class TimeWindow:
    """Optional time bounds, as store ISO text (summaries) and epoch ms (messages)."""

    since: str | None = None
    before: str | None = None

    @property
    def since_ms(self) -> int | None:
        """`since` in epoch milliseconds."""
        return _to_ms(self.since)

    @property
    def before_ms(self) -> int | None:
        """`before` in epoch milliseconds."""
        return _to_ms(self.before)


def _to_ms(iso: str | None) -> int | None:
    if iso is None:
        return None
    return int(datetime.fromisoformat(iso.replace("Z", "+00:00")).timestamp() * 1000)


@dataclass(frozen=True)
class SearchQuery:
    """One table search: what, where, how many, in which order."""

    pattern: str
    mode: str
    session_key: str | None
    window: TimeWindow
    limit: int
    sort: str
    now_ms: int | None = None
    """The clock `hybrid` damps by age against (one value for every table of a search)."""


@dataclass(frozen=True)
class SearchRow:
    """A matching message (`message_id` set) or summary (`summary_id` set)."""

    session_key: str
    session_id: str
    text: str
    time: str | None
    sort_ms: int
    message_id: int | None = None
    summary_id: str | None = None
    seq: int | None = None
    role: str | None = None
    depth: int | None = None
    summary_kind: str | None = None
    score: float | None = None


@dataclass(frozen=True)
class Found:
    """Rows from one table, the strategy that found them, and whether a bounded scan finished."""

    rows: list[SearchRow]
    strategy: str
    complete: bool = True


# bm25 scores every row it returns, so relevance ranks only the newest CANDIDATES matches.
CANDIDATES = 1000
REGEX_PAGE = 1000
REGEX_MAX_SCAN = 50_000
REGEX_ROW_TIMEOUT_S = 0.25

# A message's time: its own timestamp when it has one, else when the store wrote it.
_MSG_MS = "COALESCE(m.timestamp_ms, CAST(ROUND((julianday(m.created_at) - 2440587.5) * 86400000) AS INTEGER))"
_SUM_MS = "CAST(ROUND((julianday(COALESCE(s.latest_at, s.created_at)) - 2440587.5) * 86400000) AS INTEGER)"
_MSG_COLS = f"m.message_id, m.session_key, m.session_id, m.seq, m.role, m.text, m.created_at, {_MSG_MS} AS ms"
_SUM_COLS = (
    f"s.summary_id, s.session_key, s.session_id, s.kind, s.depth, s.content, "
    f"COALESCE(s.latest_at, s.created_at) AS at, {_SUM_MS} AS ms"
)
# Ranked candidates (up to CANDIDATES of them) leave their text behind: only the page that survives
# ranking needs it (for snippets), so it is fetched for those rows alone.
_CANDIDATE_COLS = {
    "messages": _MSG_COLS.replace("m.text,", "'' AS text,"),
    "summaries": _SUM_COLS.replace("s.content,", "'' AS content,"),
}
_TEXT_SQL = {
    "messages": "SELECT message_id, text FROM messages WHERE message_id IN (SELECT value FROM json_each(?))",
    "summaries": "SELECT summary_id, content FROM summaries WHERE summary_id IN (SELECT value FROM json_each(?))",
}


async def run(conn: AsyncConnection, table: str, query: SearchQuery) -> Found:
    """Search one table (`messages` or `summaries`) with the query's mode and scope."""
    if query.mode == "regex":
        return await _regex(conn, table, query)
    match = sanitize_fts_query(query.pattern)
    if match is None or has_cjk(query.pattern):
        return await _like(conn, table, query)
    try:
        return await _fts(conn, table, query, match)
    except DBAPIError:
        # Any FTS failure (a tokenizer edge, a damaged index) still answers, by LIKE.
        return await _like(conn, table, query)


def _time_sql(table: str, window: TimeWindow, params: dict[str, Any]) -> str:
    clauses = []
    if table == "messages":
        if window.since is not None:
            clauses.append(f"{_MSG_MS} >= :since_ms")
            params["since_ms"] = window.since_ms
        if window.before is not None:
            clauses.append(f"{_MSG_MS} < :before_ms")
            params["before_ms"] = window.before_ms
    else:
        if window.since is not None:
            clauses.append("COALESCE(s.latest_at, s.created_at) >= :since")
            params["since"] = window.since
        if window.before is not None:
            clauses.append("COALESCE(s.earliest_at, s.created_at) < :before")
            params["before"] = window.before
    return "".join(f" AND {c}" for c in clauses)


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
    alias, cols = ("m", _MSG_COLS) if table == "messages" else ("s", _SUM_COLS)
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
        f"WHERE {fts} MATCH :match{scope}{_time_sql(table, query.window, params)} "
        f"ORDER BY {fts}.rowid DESC LIMIT :n"
    )
    # Through SQLAlchemy (not the one-hop driver path): the query-plan tests watch this statement
    # with SQLAlchemy's cursor events.
    rows = await conn.execute(text(sql), params)
    if not ranked:
        return Found([_row(table, r) for r in rows], "fts")
    # Only the best `limit` of this table can make the final page (ranking is per row), so cut
    # here, then fetch text and format times for those rows only.
    top = rank([_row(table, r, timed=False) for r in rows], query.sort, now_ms=query.now_ms)[: query.limit]
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
        return [replace(r, text=texts.get(r.message_id, ""), time=_ms_iso(r.sort_ms)) for r in rows]
    return [replace(r, text=texts.get(r.summary_id, "")) for r in rows]


async def _like(conn: AsyncConnection, table: str, query: SearchQuery) -> Found:
    terms = like_terms(query.pattern)
    if not terms:
        return Found([], "like")
    alias, cols, column = ("m", _MSG_COLS, "text") if table == "messages" else ("s", _SUM_COLS, "content")
    params: dict[str, Any] = {f"t{i}": like_pattern(t) for i, t in enumerate(terms)}
    where = " AND ".join(f"{alias}.{column} LIKE :t{i} ESCAPE '\\'" for i in range(len(terms)))
    order = _scan_order(table, query.session_key is not None)
    if query.session_key is not None:
        where += f" AND {alias}.session_key = :key"
        params["key"] = query.session_key
    params["n"] = query.limit if query.sort == "recency" else max(CANDIDATES, query.limit)
    sql = (
        f"SELECT {cols}, NULL AS score FROM {table} AS {alias} WHERE {where}"
        f"{_time_sql(table, query.window, params)} ORDER BY {order} DESC LIMIT :n"
    )
    rows = await conn.execute(text(sql), params)
    return Found([_row(table, r) for r in rows], "like")


def _scan_order(table: str, scoped: bool) -> str:
    # Within one key, (session_key, seq) walks newest-first by index; across keys, rowid does.
    if table == "messages":
        return "m.seq" if scoped else "m.message_id"
    return "s.created_at" if scoped else "s.rowid"


def compile_regex(pattern: str) -> Callable[[str], bool]:
    """A matcher for `pattern` (Python ``re`` syntax) that cannot hang on catastrophic backtracking.

    Matching runs on the ``regex`` engine (installed with tiktoken) with a per-row timeout; without
    it, on ``re``.

    Raises:
        RecallQueryError: the pattern is invalid.
    """
    try:
        compiled = re.compile(pattern)
    except re.error as exc:
        raise RecallQueryError(f"invalid regular expression {pattern!r}: {exc}") from exc
    try:
        engine: Any = importlib.import_module("regex")
        guarded = engine.compile(pattern)
    except Exception:  # no `regex` module, or a pattern only `re` accepts
        return lambda body: compiled.search(body) is not None

    def search(body: str) -> bool:
        try:
            return guarded.search(body, timeout=REGEX_ROW_TIMEOUT_S) is not None
        except TimeoutError as exc:
            raise RecallQueryError(
                f"regular expression {pattern!r} is too slow to evaluate (catastrophic backtracking?); simplify it"
            ) from exc

    return search


async def _regex(conn: AsyncConnection, table: str, query: SearchQuery) -> Found:
    matches = compile_regex(query.pattern)
    alias, cols, column = ("m", _MSG_COLS, "text") if table == "messages" else ("s", _SUM_COLS, "content")
    cursor_col = "m.message_id" if table == "messages" else "s.rowid"
    params: dict[str, Any] = {"page": REGEX_PAGE}
    where = "1"
    literal = required_literal(query.pattern)
    if literal is not None:
        where += f" AND {alias}.{column} LIKE :lit ESCAPE '\\'"
        params["lit"] = like_pattern(literal)
    if query.session_key is not None:
        where += f" AND {alias}.session_key = :key"
        params["key"] = query.session_key
    where += _time_sql(table, query.window, params)
    sql = (
        f"SELECT {cols}, NULL AS score, {cursor_col} AS cursor FROM {table} AS {alias} "
        f"WHERE {where} AND {cursor_col} < :cursor ORDER BY {cursor_col} DESC LIMIT :page"
    )
    found: list[SearchRow] = []
    scanned, cursor = 0, 2**62
    while scanned < REGEX_MAX_SCAN:
        page = list(await conn.execute(text(sql), {**params, "cursor": cursor}))
        for r in page:
            if matches(r[5]):
                found.append(_row(table, r))
        scanned += len(page)
        if len(page) < REGEX_PAGE or len(found) >= query.limit:
            return Found(found, "regex")
        cursor = page[-1].cursor
    return Found(found, "regex", complete=False)


def _row(table: str, r: Any, *, timed: bool = True) -> SearchRow:
    score = float(r.score) if r.score is not None else None
    if table == "messages":
        return SearchRow(
            session_key=r.session_key,
            session_id=r.session_id,
            text=r.text,
            time=_ms_iso(r.ms) if timed else None,
            sort_ms=int(r.ms or 0),
            message_id=r.message_id,
            seq=r.seq,
            role=r.role,
            score=score,
        )
    return SearchRow(
        session_key=r.session_key,
        session_id=r.session_id,
        text=r.content,
        time=r.at,
        sort_ms=int(r.ms or 0),
        summary_id=r.summary_id,
        depth=r.depth,
        summary_kind=r.kind,
        score=score,
    )


def _ms_iso(ms: int | None) -> str | None:
    if ms is None:
        return None
    return datetime.fromtimestamp(ms / 1000, UTC).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"


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


def snippet(body: str, pattern: str, mode: str, width: int = 200) -> str:
    """About `width` characters of `body` around the first match, whitespace collapsed."""
    flat = " ".join(body.split())
    start = -1
    if mode == "regex":
        start = _regex_start(pattern, flat)
    else:
        lowered = flat.lower()
        # Centre on a whole typed chunk (`billing.ledger_v2.dual_write`) where it occurs verbatim;
        # otherwise on the earliest of its word tokens.
        for needles in ([chunk for chunk, _ in _chunks(pattern)], fts_terms(pattern) or like_terms(pattern)):
            positions = [p for p in (lowered.find(t.lower()) for t in needles) if p >= 0]
            if positions:
                start = min(positions)
                break
    if len(flat) <= width:
        return flat
    begin = max(0, start - width // 4) if start >= 0 else 0
    piece = flat[begin : begin + width]
    return ("…" if begin > 0 else "") + piece + ("…" if begin + width < len(flat) else "")


def _regex_start(pattern: str, body: str) -> int:
    """Where `pattern` first matches `body` (-1 if not, or if finding out takes too long)."""
    found: Any = None
    try:
        engine: Any = importlib.import_module("regex")
        found = engine.search(pattern, body, timeout=REGEX_ROW_TIMEOUT_S)
    except ImportError:
        with contextlib.suppress(re.error):
            found = re.search(pattern, body)
    except Exception:  # timeout or a pattern the regex engine rejects: no highlight, still a hit
        return -1
    return found.start() if found else -1


_REGEX_SPECIAL = set(".^$*+?{}[]()|\\")


def required_literal(pattern: str) -> str | None:
    """The longest literal substring every match of `pattern` must contain (for a LIKE prefilter).

    Conservative: alternation, inline flags and anything inside groups or classes yield nothing,
    and a character followed by ``?``, ``*`` or ``{`` is optional. None when no run of 2+ is found.
    """
    if "(?" in pattern or re.search(r"(?<!\\)\|", pattern):
        return None
    runs: list[str] = []
    current: list[str] = []
    i, depth = 0, 0

    def flush() -> None:
        if current:
            runs.append("".join(current))
            current.clear()

    while i < len(pattern):
        ch = pattern[i]
        atom: str | None = None
        if ch == "\\":
            nxt = pattern[i + 1 : i + 2]
            atom = nxt if nxt and not nxt.isalnum() else None
            i += 2
        elif ch == "[":
            end = _class_end(pattern, i)
            i = end + 1
        elif ch in "({":
            if ch == "(":
                depth += 1
            else:
                i = pattern.find("}", i) if "}" in pattern[i:] else len(pattern)
            i += 1
        elif ch == ")":
            depth = max(0, depth - 1)
            i += 1
        elif ch in _REGEX_SPECIAL:
            i += 1
        else:
            atom = ch
            i += 1
        if atom is None or depth > 0:
            flush()
            continue
        following = pattern[i : i + 1]
        if following in ("?", "*", "{"):
            flush()
        elif following == "+":
            current.append(atom)
            flush()
        else:
            current.append(atom)
    flush()
    best = max(runs, key=len, default="")
    return best if len(best) >= 2 else None


def _class_end(pattern: str, start: int) -> int:
    i = start + 1
    if pattern[i : i + 1] == "^":
        i += 1
    if pattern[i : i + 1] == "]":
        i += 1
    while i < len(pattern):
        if pattern[i] == "\\":
            i += 2
            continue
        if pattern[i] == "]":
            return i
        i += 1
    return len(pattern)
