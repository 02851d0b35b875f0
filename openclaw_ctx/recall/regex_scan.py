"""Regex search: a bounded, paged scan newest-first, each row matched under a timeout.

Matching runs on the ``regex`` engine (installed with tiktoken) with a per-row timeout, so a
catastrophic pattern fails with a clear message instead of hanging; without it, on ``re``. A LIKE
prefilter on the longest literal every match must contain lets SQLite skip most rows.
"""

from __future__ import annotations

import contextlib
import importlib
import re
import warnings
from collections.abc import Callable
from typing import Any

from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncConnection

from openclaw_ctx.errors import RecallQueryError
from openclaw_ctx.recall.fts import MAX_LIKE_PATTERN_BYTES, like_pattern
from openclaw_ctx.recall.rows import Found, SearchQuery, SearchRow, row_from, table_parts, time_sql

__all__ = [
    "REGEX_MAX_SCAN",
    "REGEX_PAGE",
    "REGEX_ROW_TIMEOUT_S",
    "compile_regex",
    "regex_start",
    "required_literal",
    "scan",
]

REGEX_PAGE = 1000
REGEX_MAX_SCAN = 50_000
REGEX_ROW_TIMEOUT_S = 0.25
# Any substring of a required literal is required too; this many characters keep its LIKE pattern
# under SQLite's bound even at 4 UTF-8 bytes each.
_PREFILTER_CHARS = MAX_LIKE_PATTERN_BYTES // 4 - 2


def compile_regex(pattern: str) -> Callable[[str], bool]:
    """A matcher for `pattern` (Python ``re`` syntax) that cannot hang on catastrophic backtracking.

    Raises:
        RecallQueryError: the pattern is invalid.
    """
    try:
        with warnings.catch_warnings():
            # "Possible nested set" and its kind: advice about a pattern's future meaning, not an error.
            warnings.simplefilter("ignore", FutureWarning)
            compiled = re.compile(pattern)
    except re.error as exc:
        raise RecallQueryError(f"invalid regular expression {pattern!r}: {exc}") from exc
    try:
        engine: Any = importlib.import_module("regex")
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", FutureWarning)
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


async def scan(conn: AsyncConnection, table: str, query: SearchQuery) -> Found:
    """Rows of `table` matching the query's regex, newest first, scanning at most REGEX_MAX_SCAN rows."""
    matches = compile_regex(query.pattern)
    alias, cols, column = table_parts(table)
    cursor_col = "m.message_id" if table == "messages" else "s.rowid"
    params: dict[str, Any] = {"page": REGEX_PAGE}
    where = "1"
    literal = required_literal(query.pattern)
    if literal is not None:
        where += f" AND {alias}.{column} LIKE :lit ESCAPE '\\'"
        params["lit"] = like_pattern(literal[:_PREFILTER_CHARS])
    if query.session_key is not None:
        where += f" AND {alias}.session_key = :key"
        params["key"] = query.session_key
    where += time_sql(table, query.window, params)
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
                found.append(row_from(table, r))
        scanned += len(page)
        if len(page) < REGEX_PAGE or len(found) >= query.limit:
            return Found(found, "regex")
        cursor = page[-1].cursor
    return Found(found, "regex", complete=False)


def regex_start(pattern: str, body: str) -> int:
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
