"""The read-only SQL surface behind ``openclaw-ctx sql``.

Three layers keep it read-only: the statement is vetted before it runs (exactly one statement,
beginning with SELECT, WITH, VALUES or a reading PRAGMA); the connection is opened with
``mode=ro`` and ``PRAGMA query_only=ON``; and an SQLite authorizer denies every action that is not
a read while the statement is prepared (which catches ``WITH … DELETE`` and the like), and every
function not on an explicit list (``fts3_tokenizer()`` hands out a native address, ``load_extension()``
loads code). The first layer gives the clear message; the other two make sure nothing slips through.

A running statement is bounded too: a progress handler stops it at its deadline or when the caller
is cancelled (Ctrl-C), and an optional row cap refuses a result larger than asked for.
"""

from __future__ import annotations

import asyncio
import contextlib
import re
import sqlite3
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from openclaw_ctx.errors import AbortError, DatabaseCorruptError, ReadOnlyViolationError, StoreError
from openclaw_ctx.store.files import read_only_url

__all__ = [
    "ALLOWED_FUNCTIONS",
    "QueryLimitError",
    "QueryResult",
    "check_read_only",
    "query",
    "run_query",
    "split_statements",
]

_READ_KEYWORDS = {"SELECT", "WITH", "VALUES", "PRAGMA", "EXPLAIN"}

# PRAGMAs that only report. The first set also accepts an argument naming a table or index.
_PRAGMAS_WITH_ARG = {
    "foreign_key_check",
    "foreign_key_list",
    "index_info",
    "index_list",
    "index_xinfo",
    "integrity_check",
    "quick_check",
    "table_info",
    "table_list",
    "table_xinfo",
}
_READ_PRAGMAS = _PRAGMAS_WITH_ARG | {
    "application_id",
    "auto_vacuum",
    "busy_timeout",
    "cache_size",
    "collation_list",
    "compile_options",
    "data_version",
    "database_list",
    "encoding",
    "foreign_keys",
    "freelist_count",
    "function_list",
    "journal_mode",
    "module_list",
    "page_count",
    "page_size",
    "pragma_list",
    "query_only",
    "schema_version",
    "synchronous",
    "user_version",
}

# Functions a read may call: SQLite's core, date, math, JSON, aggregate and window functions and
# the FTS auxiliaries. Left out on purpose: fts3_tokenizer (a native address), fts5 (an API
# pointer), load_extension, optimize (an FTS write), sqlite_log and the rtree debugging functions.
ALLOWED_FUNCTIONS = frozenset(
    """
    -> ->> abs acos acosh asin asinh atan atan2 atanh avg bm25 ceil ceiling changes char coalesce concat
    concat_ws cos cosh count cume_dist current_date current_time current_timestamp date datetime degrees
    dense_rank exp first_value floor format fts5_source_id glob group_concat hex highlight ifnull iif
    instr json json_array json_array_length json_error_position json_extract json_group_array
    json_group_object json_insert json_object json_patch json_pretty json_quote json_remove json_replace
    json_set json_type json_valid jsonb jsonb_array jsonb_extract jsonb_group_array jsonb_group_object
    jsonb_insert jsonb_object jsonb_patch jsonb_remove jsonb_replace jsonb_set julianday lag
    last_insert_rowid last_value lead length like likelihood likely ln log log10 log2 lower ltrim match
    matchinfo max min mod nth_value ntile nullif octet_length offsets percent_rank pi pow power printf
    quote radians random randomblob rank replace round row_number rtrim sign sin sinh snippet soundex
    sqlite_compileoption_get sqlite_compileoption_used sqlite_source_id sqlite_version sqrt strftime
    string_agg substr substring subtype sum tan tanh time timediff total total_changes trim trunc typeof
    unhex unicode unixepoch unlikely upper zeroblob
    """.split()
)
_ALLOWED_ACTIONS = {sqlite3.SQLITE_SELECT, sqlite3.SQLITE_READ, sqlite3.SQLITE_RECURSIVE}
# The progress handler runs every this many SQLite VM steps: often enough for a prompt stop.
_PROGRESS_STEPS = 10_000
_AUTHORIZER_CODES = (
    "ALTER_TABLE ANALYZE ATTACH CREATE_INDEX CREATE_TABLE CREATE_TEMP_INDEX CREATE_TEMP_TABLE "
    "CREATE_TEMP_TRIGGER CREATE_TEMP_VIEW CREATE_TRIGGER CREATE_VIEW CREATE_VTABLE DELETE DETACH DROP_INDEX "
    "DROP_TABLE DROP_TEMP_INDEX DROP_TEMP_TABLE DROP_TEMP_TRIGGER DROP_TEMP_VIEW DROP_TRIGGER DROP_VIEW "
    "DROP_VTABLE INSERT PRAGMA REINDEX SAVEPOINT TRANSACTION UPDATE"
).split()
_ACTION_NAMES = {getattr(sqlite3, f"SQLITE_{code}"): code.lower().replace("_", " ") for code in _AUTHORIZER_CODES}
_PRAGMA_RE = re.compile(r"^PRAGMA\s+(?:[\w\"`\[\]]+\s*\.\s*)?[\"`\[]?(\w+)[\"`\]]?\s*(.*)$", re.IGNORECASE | re.DOTALL)


@dataclass(frozen=True)
class QueryResult:
    """Rows of one read-only statement.

    Attributes:
        columns: result column names, in order.
        rows: the rows (at most `max_rows` when a limit was given).
        truncated: True when more rows existed than were returned.
    """

    columns: list[str]
    rows: list[tuple[Any, ...]]
    truncated: bool = False


class QueryLimitError(StoreError):
    """A statement stopped at a bound: more rows than its row cap, or longer than its time limit."""

    def __init__(self, detail: str, bound: Literal["rows", "time"], value: float) -> None:
        super().__init__(detail)
        self.bound = bound
        self.value = value


def split_statements(sql: str) -> list[str]:
    """Split SQL on top-level semicolons, ignoring those inside strings, identifiers and comments.

    Returns the non-empty statements with comments removed and whitespace trimmed.
    """
    statements: list[str] = []
    current: list[str] = []
    i, n = 0, len(sql)
    closers = {"'": "'", '"': '"', "`": "`", "[": "]"}
    while i < n:
        ch = sql[i]
        if ch in closers:
            end = sql.find(closers[ch], i + 1)
            # A doubled quote inside a string is an escaped quote: keep scanning.
            while end != -1 and ch != "[" and sql[end + 1 : end + 2] == ch:
                end = sql.find(ch, end + 2)
            end = n - 1 if end == -1 else end
            current.append(sql[i : end + 1])
            i = end + 1
        elif sql.startswith("--", i):
            end = sql.find("\n", i)
            i = n if end == -1 else end
            current.append(" ")
        elif sql.startswith("/*", i):
            end = sql.find("*/", i + 2)
            i = n if end == -1 else end + 2
            current.append(" ")
        elif ch == ";":
            statements.append("".join(current).strip())
            current = []
            i += 1
        else:
            current.append(ch)
            i += 1
    statements.append("".join(current).strip())
    return [s for s in statements if s]


def check_read_only(sql: str) -> str:
    """Vet `sql` for the read-only surface and return the single statement it contains.

    Raises:
        StoreError: no statement, or more than one.
        ReadOnlyViolationError: the statement is not a read (its first keyword, a PRAGMA assignment, …).
    """
    statements = split_statements(sql)
    if not statements:
        raise StoreError("no SQL statement given")
    if len(statements) > 1:
        raise StoreError(f"exactly one statement is allowed, got {len(statements)}; run them one at a time")
    statement = statements[0]
    _vet(statement)
    return statement


def _vet(statement: str) -> None:
    keyword = re.match(r"\w+", statement)
    word = keyword.group(0).upper() if keyword else statement[:20]
    if word not in _READ_KEYWORDS:
        raise ReadOnlyViolationError(f"refused: {word} statements write or change state; `sql` is read-only")
    if word == "EXPLAIN":
        rest = re.sub(r"^EXPLAIN\s+(QUERY\s+PLAN\s+)?", "", statement, flags=re.IGNORECASE)
        if rest == statement or not rest:
            raise StoreError("EXPLAIN must be followed by a statement")
        _vet(rest)
    elif word == "PRAGMA":
        _vet_pragma(statement)


def _vet_pragma(statement: str) -> None:
    match = _PRAGMA_RE.match(statement)
    if match is None:
        raise StoreError(f"cannot parse the PRAGMA statement {statement!r}")
    name, rest = match.group(1).lower(), match.group(2).strip()
    if rest.startswith("="):
        raise ReadOnlyViolationError(f"refused: PRAGMA {name} = … changes a setting; `sql` is read-only")
    if name not in _READ_PRAGMAS:
        raise ReadOnlyViolationError(f"refused: PRAGMA {name} is not on the list of read-only pragmas")
    if rest and name not in _PRAGMAS_WITH_ARG:
        raise ReadOnlyViolationError(f"refused: PRAGMA {name}({rest.strip('()')}) changes a setting")


def _connect(path: Path) -> sqlite3.Connection:
    if not path.exists():
        raise StoreError(f"{path}: no database file")
    if path.is_dir():
        raise StoreError(f"{path}: is a directory, not a database file")
    conn = sqlite3.connect(read_only_url(path), uri=True, isolation_level=None)
    try:
        conn.execute("PRAGMA query_only=ON")
    except sqlite3.DatabaseError as exc:
        conn.close()
        raise _translate(path, exc, None) from exc
    return conn


def _translate(path: Path, exc: sqlite3.Error, denied: str | None) -> StoreError:
    message = str(exc)
    if denied and denied.startswith("function "):
        return ReadOnlyViolationError(f"refused: {denied[9:]}() is not on the list of functions `sql` allows")
    if denied:
        return ReadOnlyViolationError(f"refused: the statement would {denied or 'write'}; `sql` is read-only")
    if "readonly database" in message:
        return ReadOnlyViolationError(f"refused: the statement tried to write ({message}); `sql` is read-only")
    if "file is not a database" in message or "malformed" in message:
        return DatabaseCorruptError(f"{path}: the database is corrupt or not SQLite ({message})")
    if "unable to open database file" in message:
        return StoreError(f"{path}: cannot open the database file ({message})")
    return StoreError(f"SQL error: {message}")


def _authorizer(denied: list[str]) -> Callable[[int, str | None, str | None, str | None, str | None], int]:
    """An SQLite authorizer allowing reads and listed functions; what it denies is appended to `denied`."""

    def authorize(action: int, arg1: str | None, arg2: str | None, _db: str | None, _trigger: str | None) -> int:
        if action in _ALLOWED_ACTIONS or (action == sqlite3.SQLITE_PRAGMA and (arg1 or "").lower() in _READ_PRAGMAS):
            return sqlite3.SQLITE_OK
        if action == sqlite3.SQLITE_FUNCTION:
            if (arg2 or "").lower() in ALLOWED_FUNCTIONS:
                return sqlite3.SQLITE_OK
            denied.append(f"function {arg2}")
            return sqlite3.SQLITE_DENY
        # SQLite itself asks this while connecting a virtual table (FTS5, pragma_* functions); the
        # connection is mode=ro and query_only, and no UPDATE statement gets past check_read_only.
        if action == sqlite3.SQLITE_UPDATE and arg1 == "sqlite_master":
            return sqlite3.SQLITE_OK
        target = " ".join(a for a in (arg1, arg2) if a)
        denied.append(f"{_ACTION_NAMES.get(action, f'action {action}')} {target}".strip())
        return sqlite3.SQLITE_DENY

    return authorize


@dataclass(frozen=True)
class _Bounds:
    """When a running statement must stop: a deadline (monotonic seconds) and a cancel flag."""

    timeout_s: float | None
    cancel: threading.Event

    def install(self, conn: sqlite3.Connection) -> Callable[[], str | None]:
        """Set the progress handler on `conn`; returns what says, after an interrupt, which bound hit."""
        deadline = None if self.timeout_s is None else time.monotonic() + self.timeout_s

        def over() -> str | None:
            if self.cancel.is_set():
                return "cancel"
            return "time" if deadline is not None and time.monotonic() > deadline else None

        conn.set_progress_handler(lambda: 1 if over() else 0, _PROGRESS_STEPS)
        return over


def _fetch(cursor: sqlite3.Cursor, max_rows: int | None, row_cap: int | None) -> list[tuple[Any, ...]]:
    if max_rows is not None:
        return cursor.fetchmany(max_rows + 1)
    if row_cap is None:
        return cursor.fetchall()
    rows = cursor.fetchmany(row_cap + 1)
    if len(rows) > row_cap:
        raise QueryLimitError(f"the result has more than {row_cap} rows (the row cap)", "rows", row_cap)
    return rows


def run_query(
    path: str | Path,
    sql: str,
    *,
    explain: bool = False,
    max_rows: int | None = None,
    row_cap: int | None = None,
    timeout_s: float | None = None,
    cancel: threading.Event | None = None,
) -> QueryResult:
    """Run one read-only statement against the database file at `path`.

    Args:
        path: the SQLite file (opened read-only; it is never created or changed).
        sql: one SELECT / WITH / VALUES / EXPLAIN / reading PRAGMA statement.
        explain: return ``EXPLAIN QUERY PLAN`` of the statement instead of its rows.
        max_rows: stop after this many rows (``truncated`` tells whether more existed).
        row_cap: without `max_rows`, refuse a result of more rows than this.
        timeout_s: stop the statement after this many seconds.
        cancel: stop the statement as soon as this is set (another thread sets it, e.g. on Ctrl-C).

    Raises:
        ReadOnlyViolationError: the statement would write or call a function not allowed; nothing was run.
        QueryLimitError: more rows than `row_cap`, or longer than `timeout_s`.
        AbortError: `cancel` was set.
        StoreError: several statements, an SQL error (message from SQLite), or no such file.
        DatabaseCorruptError: the file is not SQLite or is damaged.
    """
    file = Path(path).expanduser()
    statement = check_read_only(sql)
    if explain:
        if statement.upper().startswith("EXPLAIN"):
            raise StoreError("the statement is already an EXPLAIN; drop --explain")
        statement = f"EXPLAIN QUERY PLAN {statement}"
    denied: list[str] = []
    with contextlib.closing(_connect(file)) as conn:
        conn.set_authorizer(_authorizer(denied))
        stopped = _Bounds(timeout_s, cancel or threading.Event()).install(conn)
        try:
            cursor = conn.execute(statement)
            rows = _fetch(cursor, max_rows, row_cap)
        except sqlite3.Error as exc:
            raise _stopped_error(stopped(), timeout_s) or _translate(file, exc, denied[0] if denied else None) from exc
        columns = [d[0] for d in cursor.description or ()]
    truncated = max_rows is not None and len(rows) > max_rows
    return QueryResult(columns, rows[:max_rows] if truncated else rows, truncated)


def _stopped_error(bound: str | None, timeout_s: float | None) -> Exception | None:
    if bound == "cancel":
        return AbortError("the query was interrupted")
    if bound == "time" and timeout_s is not None:
        return QueryLimitError(f"the query ran longer than {timeout_s:g} s (the time limit)", "time", timeout_s)
    return None


async def query(
    path: str | Path,
    sql: str,
    *,
    explain: bool = False,
    max_rows: int | None = None,
    row_cap: int | None = None,
    timeout_s: float | None = None,
) -> QueryResult:
    """:func:`run_query` in a worker thread (stdlib sqlite3 blocks); cancelling the caller stops the statement."""
    cancel = threading.Event()
    try:
        return await asyncio.to_thread(
            run_query,
            path,
            sql,
            explain=explain,
            max_rows=max_rows,
            row_cap=row_cap,
            timeout_s=timeout_s,
            cancel=cancel,
        )
    except asyncio.CancelledError:
        cancel.set()  # the worker stops at its next progress check, so the loop can shut down
        raise
