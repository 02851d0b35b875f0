"""Summary nodes and their edges to source messages and source summaries."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from sqlalchemy import delete, func, insert, select
from sqlalchemy.ext.asyncio import AsyncConnection

from openclaw_ctx._ids import new_summary_id
from openclaw_ctx.store.models import (
    Compaction,
    ContextItem,
    Summary,
    SummaryMessage,
    SummaryParent,
)
from openclaw_ctx.store.repo.sessions import SessionRow

__all__ = ["NewSummary", "SummaryProvenance", "discard_unpublished_summaries", "insert_summary", "latest_summary"]

# --- summaries, rotation, audit ------------------------------------------------------------------


@dataclass
class NewSummary:
    """A summary node and its sources."""

    kind: Literal["legacy", "leaf", "condensed"]
    content: str
    token_count: int
    summarizer: str
    source_message_ids: list[int] = field(default_factory=list)
    source_summary_ids: list[str] = field(default_factory=list)
    depth: int = 0
    model: str | None = None
    fallback_level: str = "none"
    earliest_at: str | None = None
    latest_at: str | None = None
    descendant_count: int = 0
    descendant_token_count: int = 0
    source_message_token_count: int = 0
    details: Any = None
    summary_id: str = field(default_factory=new_summary_id)
    created_at: str | None = None  # None: now (set when restoring a row, e.g. on import)


async def insert_summary(conn: AsyncConnection, session: SessionRow, summary: NewSummary) -> str:
    """Insert a summary row and its edges; returns its id.

    A legacy summary that updates earlier ones sits one above the deepest of them, so depths stay
    consistent across engines (lossless nodes arrive with their depth computed by the sweep).
    """
    depth = summary.depth
    if summary.kind == "legacy" and summary.source_summary_ids:
        deepest = await conn.scalar(
            select(func.max(Summary.depth)).where(Summary.summary_id.in_(summary.source_summary_ids))
        )
        depth = int(deepest or 0) + 1
    await conn.execute(
        insert(Summary).values(
            summary_id=summary.summary_id,
            session_key=session.session_key,
            session_id=session.session_id,
            kind=summary.kind,
            depth=depth,
            content=summary.content,
            token_count=summary.token_count,
            earliest_at=summary.earliest_at,
            latest_at=summary.latest_at,
            descendant_count=summary.descendant_count,
            descendant_token_count=summary.descendant_token_count,
            source_message_token_count=summary.source_message_token_count,
            summarizer=summary.summarizer,
            model=summary.model,
            fallback_level=summary.fallback_level,
            details_json=json.dumps(summary.details, ensure_ascii=False) if summary.details is not None else None,
            **({"created_at": summary.created_at} if summary.created_at is not None else {}),
        )
    )
    if summary.source_message_ids:
        await conn.execute(
            insert(SummaryMessage),
            [
                {"summary_id": summary.summary_id, "message_id": mid, "ordinal": i}
                for i, mid in enumerate(summary.source_message_ids)
            ],
        )
    if summary.source_summary_ids:
        await conn.execute(
            insert(SummaryParent),
            [
                {"summary_id": summary.summary_id, "source_summary_id": sid, "ordinal": i}
                for i, sid in enumerate(summary.source_summary_ids)
            ],
        )
    return summary.summary_id


@dataclass(frozen=True)
class SummaryProvenance:
    """Who wrote a summary: its id, the summarizer and model, and how far it fell back."""

    summary_id: str
    summarizer: str
    model: str | None
    fallback_level: str


async def latest_summary(conn: AsyncConnection, session_key: str) -> SummaryProvenance | None:
    """The key's newest summary (any session), or None when it has none."""
    row = (
        await conn.execute(
            select(Summary.summary_id, Summary.summarizer, Summary.model, Summary.fallback_level)
            .where(Summary.session_key == session_key)
            .order_by(Summary.created_at.desc(), Summary.summary_id.desc())
            .limit(1)
        )
    ).first()
    if row is None:
        return None
    return SummaryProvenance(str(row.summary_id), str(row.summarizer), row.model, str(row.fallback_level or "none"))


async def discard_unpublished_summaries(conn: AsyncConnection, created: Sequence[str]) -> int:
    """Delete summaries an abandoned batched build wrote that no context, audit row or other summary uses.

    They were never part of any context, and leaving them would cover their messages twice once the
    backfill runs again. Anything referenced from outside the set is kept.
    """
    ids = set(created)
    used: set[str] = set()
    for start in range(0, len(created), 500):
        chunk = list(created[start : start + 500])
        for query in (
            select(ContextItem.summary_id).where(ContextItem.summary_id.in_(chunk)),
            select(Compaction.summary_id).where(Compaction.summary_id.in_(chunk)),
            select(SummaryParent.source_summary_id).where(
                SummaryParent.source_summary_id.in_(chunk), SummaryParent.summary_id.not_in(ids)
            ),
        ):
            used.update(str(r[0]) for r in await conn.execute(query))
    doomed = [sid for sid in created if sid not in used]
    for start in range(0, len(doomed), 500):
        chunk = doomed[start : start + 500]
        await conn.execute(delete(SummaryParent).where(SummaryParent.summary_id.in_(chunk)))
        await conn.execute(delete(SummaryMessage).where(SummaryMessage.summary_id.in_(chunk)))
    for start in range(0, len(doomed), 500):
        await conn.execute(delete(Summary).where(Summary.summary_id.in_(doomed[start : start + 500])))
    return len(doomed)
