"""What one table search asks for and gives back, and the SQL pieces every search strategy shares.

A message's time is its own timestamp when it has one, else when the store wrote it; a summary's is
the latest time it covers. Both are compared in epoch milliseconds, computed in SQL.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from openclaw_ctx._time import iso_from_ms, ms_from_iso

__all__ = [
    "COLUMNS",
    "MSG_MS",
    "SUM_MS",
    "Found",
    "SearchQuery",
    "SearchRow",
    "TimeWindow",
    "row_from",
    "table_parts",
    "time_sql",
]


@dataclass(frozen=True)
class TimeWindow:
    """Optional time bounds, as store ISO text (summaries) and epoch ms (messages)."""

    since: str | None = None
    before: str | None = None

    @property
    def since_ms(self) -> int | None:
        """`since` in epoch milliseconds."""
        return ms_from_iso(self.since)

    @property
    def before_ms(self) -> int | None:
        """`before` in epoch milliseconds."""
        return ms_from_iso(self.before)


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


MSG_MS = "COALESCE(m.timestamp_ms, CAST(ROUND((julianday(m.created_at) - 2440587.5) * 86400000) AS INTEGER))"
SUM_MS = "CAST(ROUND((julianday(COALESCE(s.latest_at, s.created_at)) - 2440587.5) * 86400000) AS INTEGER)"
COLUMNS = {
    "messages": f"m.message_id, m.session_key, m.session_id, m.seq, m.role, m.text, m.created_at, {MSG_MS} AS ms",
    "summaries": (
        f"s.summary_id, s.session_key, s.session_id, s.kind, s.depth, s.content, "
        f"COALESCE(s.latest_at, s.created_at) AS at, {SUM_MS} AS ms"
    ),
}
"""The select list per table; its sixth column is the searched text."""


def table_parts(table: str) -> tuple[str, str, str]:
    """``(alias, select list, text column)`` of `table` (``messages`` or ``summaries``)."""
    if table == "messages":
        return "m", COLUMNS["messages"], "text"
    return "s", COLUMNS["summaries"], "content"


def time_sql(table: str, window: TimeWindow, params: dict[str, Any]) -> str:
    """``AND …`` clauses for the window (binding their values into `params`)."""
    clauses = []
    if table == "messages":
        if window.since is not None:
            clauses.append(f"{MSG_MS} >= :since_ms")
            params["since_ms"] = window.since_ms
        if window.before is not None:
            clauses.append(f"{MSG_MS} < :before_ms")
            params["before_ms"] = window.before_ms
    else:
        if window.since is not None:
            clauses.append("COALESCE(s.latest_at, s.created_at) >= :since")
            params["since"] = window.since
        if window.before is not None:
            clauses.append("COALESCE(s.earliest_at, s.created_at) < :before")
            params["before"] = window.before
    return "".join(f" AND {c}" for c in clauses)


def row_from(table: str, r: Any, *, timed: bool = True) -> SearchRow:
    """A :class:`SearchRow` from a result row of :data:`COLUMNS` plus a ``score`` column."""
    score = float(r.score) if r.score is not None else None
    if table == "messages":
        return SearchRow(
            session_key=r.session_key,
            session_id=r.session_id,
            text=r.text,
            time=iso_from_ms(r.ms) if timed else None,
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
