"""``recall``: ask the history a question in plain words; ranked messages and summaries come back.

Two rankings are fused. Lexical (:mod:`openclaw_ctx.recall.lexical`): the question's content words
ORed through FTS5, bm25 over every match, re-scored by coverage and adjacency. Semantic
(:mod:`openclaw_ctx.recall.vectors`): cosine similarity of offline embeddings. Reciprocal-rank
fusion adds ``weight / (k + rank)`` from each list; a matching summary also lifts the messages it
covers that are closest to the question, so the raw evidence comes back and not only its summary.
Equal scores go to the newer item; a recency boost (``Tuning.recency_weight``, 0 as tuned) can add more.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Literal

from sqlalchemy.exc import DBAPIError
from sqlalchemy.ext.asyncio import AsyncConnection

from openclaw_ctx.errors import RecallQueryError
from openclaw_ctx.recall import candidates
from openclaw_ctx.recall.embedding import Embedder, default_embedder, unavailable_reason
from openclaw_ctx.recall.grep import _iso
from openclaw_ctx.recall.hits import RecallHit, RecallHits, build_hits
from openclaw_ctx.recall.lexical import LexicalQuery, explicit_window, lexical_query
from openclaw_ctx.recall.rows import TimeWindow
from openclaw_ctx.recall.source import Source, reading
from openclaw_ctx.recall.vectors import search_vectors

__all__ = ["MAX_QUERY_CHARS", "MAX_TERMS", "RecallHit", "RecallHits", "RecallMode", "Tuning", "recall"]

RecallMode = Literal["lexical", "semantic", "hybrid"]
MAX_QUERY_CHARS = 10_000
MAX_TERMS = 64
"""Distinct content words one search ORs together (a pasted log would otherwise OR thousands)."""
_MODES = ("lexical", "semantic", "hybrid")
_DEPTH = 100
"""Candidates each ranking contributes to the fusion."""


@dataclass(frozen=True)
class Tuning:
    """The fusion's knobs (defaults tuned on the benchmark's dev split, never on its test split)."""

    rrf_k: float = 60.0
    lexical_weight: float = 1.0
    semantic_weight: float = 1.0
    coverage_weight: float = 1.0
    phrase_weight: float = 0.5
    summary_lift: float = 0.9
    recency_weight: float = 0.0


async def recall(
    source: Source,
    question: str,
    *,
    session_key: str | None = None,
    mode: RecallMode = "hybrid",
    limit: int = 10,
    since: str | datetime | None = None,
    before: str | datetime | None = None,
    embedder: Embedder | None = None,
    tuning: Tuning = Tuning(),
) -> RecallHits:
    """Find what answers `question` in one key's history (every session of it), or every key's.

    Args:
        source: the store or an open connection.
        question: natural language; stop words are dropped, no syntax is needed or interpreted.
        session_key: the key whose history to search; None searches every key.
        mode: ``hybrid`` (default), ``lexical`` or ``semantic``. Without an embedder, ``hybrid`` is
            lexical (the hits' `notes` say so) and ``semantic`` is an error.
        limit: 1..200 hits.
        since, before: ISO-8601 bounds; when not given, an ISO date the question states after
            "since"/"after" or "before"/"until" is used.
        embedder: the embedding model (default: the offline WordLlama model, loaded once).
        tuning: fusion weights.

    Returns:
        Hits best first; each message hit names its covering summary and whether it is still raw in
        the context, each summary hit whether it is in the context.

    Raises:
        RecallQueryError: an empty or over-long question, a bad argument, or nothing searchable.
    """
    if mode not in _MODES:
        raise RecallQueryError(f"mode must be one of {', '.join(_MODES)}; got {mode!r}")
    if not isinstance(limit, int) or isinstance(limit, bool) or not 1 <= limit <= 200:
        raise RecallQueryError(f"limit must be an integer from 1 to 200, got {limit!r}")
    if not isinstance(question, str) or not question.strip():
        raise RecallQueryError("the question is empty")
    if len(question) > MAX_QUERY_CHARS:
        raise RecallQueryError(f"the question is {len(question)} characters; recall takes at most {MAX_QUERY_CHARS}")
    stated_since, stated_before = explicit_window(question)
    window = TimeWindow(_iso(since or stated_since, "since"), _iso(before or stated_before, "before"))
    notes: list[str] = []
    model = None
    if mode != "lexical":
        model = embedder or default_embedder()
        if model is None:
            reason = unavailable_reason() or "no embedding model is loaded"
            if mode == "semantic":
                raise RecallQueryError(f"semantic recall needs the embedding model: {reason}")
            notes.append(f"{reason}; ranked by words only")
    words = lexical_query(question)
    if words.empty:
        raise RecallQueryError("the question has no searchable words (only stop words, punctuation or emoji)")
    if len(words.terms) > MAX_TERMS:
        notes.append(f"the question has {len(words.terms)} distinct words; the first {MAX_TERMS} were searched")
        words = lexical_query(" ".join(words.terms[:MAX_TERMS]))
    lexical = words if mode != "semantic" else None
    async with reading(source) as conn:
        fused, lists = await _fuse(conn, question, lexical, model, session_key, window, tuning, notes)
        hits = await build_hits(conn, fused, limit, question)
    return RecallHits(hits, mode="hybrid" if len(lists) == 2 else (lists[0] if lists else mode), notes=notes)


async def _fuse(
    conn: AsyncConnection,
    question: str,
    lexical: LexicalQuery | None,
    model: Embedder | None,
    key: str | None,
    window: TimeWindow,
    tuning: Tuning,
    notes: list[str],
) -> tuple[dict[int | str, candidates.Fused], list[str]]:
    """Item (message id or summary id) → fused score and time, and which rankings took part."""
    fused: dict[int | str, candidates.Fused] = {}
    lists: list[str] = []

    def add(ranked: list[tuple[int | str, int]], weight: float) -> None:
        for rank, (item, ms) in enumerate(ranked):
            entry = fused.setdefault(item, candidates.Fused(ms=ms))
            entry.score += weight / (tuning.rrf_k + rank + 1)

    if lexical is not None:  # never empty: recall() refused a question without searchable words
        for table in ("messages", "summaries"):
            add(await candidates.lexical(conn, table, lexical, key, window, _DEPTH, tuning), tuning.lexical_weight)
        lists.append("lexical")
    query_vector = None
    if model is not None:
        query_vector = model.embed([question])[0]
        try:
            for table in ("messages", "summaries"):
                found = await search_vectors(
                    conn, table, query_vector, model, session_key=key,
                    since_ms=window.since_ms, before_ms=window.before_ms, limit=_DEPTH,
                )  # fmt: skip
                add([(h.item, h.ms) for h in found], tuning.semantic_weight)
            lists.append("semantic")
        except DBAPIError as exc:  # no vector tables (an old schema read in place) or a damaged one
            notes.append(
                f"semantic recall skipped: the vector tables cannot be read ({exc.orig}); run `openclaw-ctx doctor`"
            )
            query_vector = None
            if not lists:
                raise RecallQueryError(
                    f"semantic recall is unavailable on this store: the vector tables cannot be read ({exc.orig})"
                ) from exc
    await candidates.lift_covered(conn, key, fused, query_vector, model, window, tuning)
    candidates.boost_recent(fused, tuning.recency_weight)
    return fused, lists
