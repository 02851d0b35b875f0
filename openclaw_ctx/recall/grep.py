"""``grep``: search a session key's messages and summaries (every session of it), or every key's.

Each hit says where it lives: a message hit names the summary that covers it and the node of the
key's active context that reaches it, or that it is still raw in the context.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from typing import Any, Literal

from openclaw_ctx._time import format_utc
from openclaw_ctx.errors import RecallQueryError
from openclaw_ctx.recall import search
from openclaw_ctx.recall.covers import covers_and_raw, summaries_in_context
from openclaw_ctx.recall.fts import chunks, fts_terms, like_terms
from openclaw_ctx.recall.regex_scan import regex_start
from openclaw_ctx.recall.rows import SearchQuery, SearchRow, TimeWindow
from openclaw_ctx.recall.source import Source, camel_keys, reading

__all__ = ["MAX_LIMIT", "GrepHit", "GrepHits", "Mode", "Scope", "Sort", "grep", "snippet"]

Mode = Literal["full_text", "regex"]
Scope = Literal["messages", "summaries", "both"]
Sort = Literal["recency", "relevance", "hybrid"]

MAX_LIMIT = 200


@dataclass(frozen=True)
class GrepHit:
    """One search hit: a message or a summary, where it lives, and a snippet.

    For a message hit, `covering_summary_id` is the leaf/legacy summary over it and
    `context_summary_id` the node of the key's active context that reaches it (None while the
    message is still raw in the context, `in_context` then says so).
    """

    id: str
    kind: Literal["message", "summary"]
    session_key: str
    session_id: str
    time: str | None
    snippet: str
    seq: int | None = None
    role: str | None = None
    depth: int | None = None
    summary_kind: str | None = None
    score: float | None = None
    covering_summary_id: str | None = None
    context_summary_id: str | None = None
    in_context: bool = False

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form (camelCase keys, as the tools and `--json` print)."""
        return camel_keys(asdict(self))


class GrepHits(list[GrepHit]):
    """The hits, plus how they were found: `strategy` (fts | like | regex) and `complete`.

    `complete` is False when a regex scan stopped at its row bound before reaching the oldest rows.
    """

    def __init__(
        self, hits: list[GrepHit], *, strategy: str, complete: bool = True, left_out: dict[str, int] | None = None
    ) -> None:
        super().__init__(hits)
        self.strategy = strategy
        self.complete = complete
        self.left_out = left_out or {}
        """Matches found but not returned, per kind (``messages``, ``summaries``): at least this many."""

    def left_out_note(self) -> str | None:
        """One line on what the limit left out (None when nothing was)."""
        parts = [f"{n} {kind}" for kind, n in self.left_out.items() if n]
        if not parts:
            return None
        return f"at least {' and '.join(parts)} more matched; raise --limit, or narrow with --scope, --since or --key"


async def grep(
    source: Source,
    pattern: str,
    *,
    mode: Mode = "full_text",
    scope: Scope = "both",
    session_key: str | None = None,
    since: str | datetime | None = None,
    before: str | datetime | None = None,
    limit: int = 50,
    sort: Sort = "recency",
) -> GrepHits:
    """Search messages and/or summaries of one session key (every session of it), or of all keys.

    Args:
        source: the store or an open connection.
        pattern: words (full_text: AND of quoted phrases, a trailing ``*`` is a prefix) or a Python regex.
        mode: ``full_text`` (FTS5; CJK text or an FTS failure falls back to LIKE, AND semantics) or ``regex``.
        scope: ``messages``, ``summaries`` or ``both``.
        session_key: limit to this key's history; None searches every key.
        since: only items at or after this ISO-8601 time.
        before: only items strictly before this ISO-8601 time.
        limit: 1..200 hits.
        sort: ``recency`` (newest first), ``relevance`` (bm25) or ``hybrid`` (bm25 damped by age).

    Returns:
        The hits, best first.

    Raises:
        RecallQueryError: an empty pattern, an invalid regex, an argument out of range, or a LIKE
            search over SQLite's bounds (too many terms, a term too long).
    """
    _check_choice("mode", mode, ("full_text", "regex"))
    _check_choice("scope", scope, ("messages", "summaries", "both"))
    _check_choice("sort", sort, ("recency", "relevance", "hybrid"))
    if not isinstance(limit, int) or isinstance(limit, bool) or not 1 <= limit <= MAX_LIMIT:
        raise RecallQueryError(f"limit must be an integer from 1 to {MAX_LIMIT}, got {limit!r}")
    if not pattern or not pattern.strip():
        raise RecallQueryError("the search pattern is empty")
    window = TimeWindow(_iso(since, "since"), _iso(before, "before"))
    now_ms = int(datetime.now(UTC).timestamp() * 1000)
    query = SearchQuery(pattern, mode, session_key, window, limit, sort, now_ms)
    async with reading(source) as conn:
        rows: list[SearchRow] = []
        strategies: list[str] = []
        complete = True
        for table in ("messages", "summaries"):
            if scope in (table, "both"):
                found = await search.run(conn, table, query)
                rows.extend(found.rows)
                strategies.append(found.strategy)
                complete = complete and found.complete
        ranked, left_out = _balanced(search.rank(rows, sort, now_ms=now_ms), limit)
        message_ids = [r.message_id for r in ranked if r.message_id is not None]
        covers, raw = await covers_and_raw(conn, message_ids)
        summary_ids = [r.summary_id for r in ranked if r.message_id is None and r.summary_id]
        shown_summaries = await summaries_in_context(conn, summary_ids)
    hits = [_to_hit(r, snippet(r.text, pattern, mode), covers, raw, shown_summaries) for r in ranked]
    return GrepHits(hits, strategy="+".join(dict.fromkeys(strategies)), complete=complete, left_out=left_out)


def _balanced(ranked: list[SearchRow], limit: int) -> tuple[list[SearchRow], dict[str, int]]:
    """The best `limit` rows, at least half of them messages and half summaries when both kinds have
    that many (a long history's summaries repeat an identifier hundreds of times and would otherwise
    crowd out every message), in rank order; and how many of each kind were left out."""
    messages = [r for r in ranked if r.message_id is not None]
    summaries = [r for r in ranked if r.message_id is None]
    for_summaries = min(len(summaries), max(limit // 2, limit - len(messages)))
    for_messages = min(len(messages), limit - for_summaries)
    keep = {id(r) for r in (*messages[:for_messages], *summaries[:for_summaries])}
    left_out = {"messages": len(messages) - for_messages, "summaries": len(summaries) - for_summaries}
    return [r for r in ranked if id(r) in keep], left_out


def _check_choice(name: str, value: str, allowed: tuple[str, ...]) -> None:
    if value not in allowed:
        raise RecallQueryError(f"{name} must be one of {', '.join(allowed)}; got {value!r}")


def _iso(value: str | datetime | None, name: str) -> str | None:
    """Normalise a time bound to the store's ISO-8601 UTC text."""
    if value is None:
        return None
    if isinstance(value, str):
        try:
            value = datetime.fromisoformat(value.strip().replace("Z", "+00:00"))
        except ValueError as exc:
            raise RecallQueryError(
                f"{name} must be an ISO-8601 time such as 2026-01-31T12:00:00Z, got {value!r}"
            ) from exc
    return format_utc(value)


def _to_hit(
    r: SearchRow, shown: str, covers: dict[int, tuple[str | None, str | None]], raw: set[int], summaries: set[str]
) -> GrepHit:
    """`raw`: message ids still raw in an active context; `summaries`: summary ids that are items of one."""
    if r.message_id is None:
        return GrepHit(
            id=r.summary_id or "",
            kind="summary",
            session_key=r.session_key,
            session_id=r.session_id,
            time=r.time,
            snippet=shown,
            depth=r.depth,
            summary_kind=r.summary_kind,
            score=r.score,
            in_context=r.summary_id in summaries,
        )
    leaf, ctx = covers.get(r.message_id, (None, None))
    return GrepHit(
        id=f"msg_{r.message_id}",
        kind="message",
        session_key=r.session_key,
        session_id=r.session_id,
        time=r.time,
        snippet=shown,
        seq=r.seq,
        role=r.role,
        score=r.score,
        covering_summary_id=leaf,
        context_summary_id=ctx,
        in_context=r.message_id in raw,
    )


def snippet(body: str, pattern: str, mode: str, width: int = 200) -> str:
    """About `width` characters of `body` around the first match, whitespace collapsed."""
    flat = " ".join(body.split())
    start = -1
    if mode == "regex":
        start = regex_start(pattern, flat)
    else:
        lowered = flat.lower()
        # Centre on a whole typed chunk (`billing.ledger_v2.dual_write`) where it occurs verbatim;
        # otherwise on the earliest of its word tokens.
        for needles in ([chunk for chunk, _ in chunks(pattern)], fts_terms(pattern) or like_terms(pattern)):
            positions = [p for p in (lowered.find(t.lower()) for t in needles) if p >= 0]
            if positions:
                start = min(positions)
                break
    if len(flat) <= width:
        return flat
    begin = max(0, start - width // 4) if start >= 0 else 0
    piece = flat[begin : begin + width]
    return ("…" if begin > 0 else "") + piece + ("…" if begin + width < len(flat) else "")
