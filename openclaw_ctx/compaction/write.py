"""Writing a planned, summarised legacy compaction through the store's one compaction transaction.

The write re-checks, inside the transaction, that the session is still active and its context still
the one planned (items appended meanwhile are carried to the successor's end), then hands the
summary, the successor's items and the audit fields to :func:`~openclaw_ctx.store.repo.commit_compaction`.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from typing import Any

from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncConnection

from openclaw_ctx._time import iso_from_ms
from openclaw_ctx.compaction.plan import (
    CompactionPlan,
)
from openclaw_ctx.compaction.summarize import Summaries
from openclaw_ctx.contract import CompactResult, CompactResultDetail
from openclaw_ctx.store import repo
from openclaw_ctx.store.models import ContextItem, Summary
from openclaw_ctx.store.repo import ItemRef, MessageItem, ResolvedItem
from openclaw_ctx.store.store import Store
from openclaw_ctx.tokens import TokenCounter

__all__ = [
    "ContextChanged",
    "SUMMARY_PREFIX",
    "SUMMARY_SUFFIX",
    "WriteMeta",
    "load_previous_rows",
    "summary_item_tokens",
    "write_compaction",
]

SUMMARY_PREFIX = "The conversation history before this point was compacted into the following summary:\n\n<summary>\n"
SUMMARY_SUFFIX = "\n</summary>"


def summary_item_tokens(content: str, counter: TokenCounter) -> int:
    """Tokens of a legacy summary as the model sees it (the compactionSummary user message)."""
    return counter.count(SUMMARY_PREFIX + content + SUMMARY_SUFFIX) + 4


async def load_previous_rows(conn: AsyncConnection, ids: list[str]) -> dict[str, tuple[Any, int]]:
    """The details and descendant token count of the summaries a compaction updates, by id."""
    if not ids:
        return {}
    rows = await conn.execute(
        select(Summary.summary_id, Summary.details_json, Summary.descendant_token_count).where(
            Summary.summary_id.in_(ids)
        )
    )
    return {sid: (json.loads(raw) if raw else None, int(dtc or 0)) for sid, raw, dtc in rows}


def _time_range(plan: CompactionPlan) -> tuple[str | None, str | None]:
    stamps = [iso_from_ms(getattr(e.message, "timestamp", None)) for e in plan.covered]
    stamps += [e.summary.earliest_at for e in plan.previous]
    stamps += [e.summary.latest_at for e in plan.previous]
    known = sorted(s for s in stamps if s)
    return (known[0], known[-1]) if known else (None, None)


class ContextChanged(Exception):
    """The session changed between planning and writing; nothing is written."""


async def _check_unchanged(conn: AsyncConnection, session_id: str, entries: list[ResolvedItem]) -> list[ItemRef]:
    """Verify the planned context is still the session's; return items appended since (carried over)."""
    session = await repo.get_session(conn, session_id)
    if session.status != "active":
        raise ContextChanged(f"session {session_id} was {session.status} during compaction")
    rows = (
        await conn.execute(
            select(
                ContextItem.ordinal,
                ContextItem.message_id,
                ContextItem.summary_id,
                ContextItem.item_type,
                ContextItem.token_count,
            )
            .where(ContextItem.session_id == session_id)
            .order_by(ContextItem.ordinal)
        )
    ).all()
    stored = [(r[0], _row_ref(r[1], r[2], r[3], r[4])) for r in rows]
    if stored[: len(entries)] != [(e.ordinal, e.ref) for e in entries]:
        raise ContextChanged(f"the context of session {session_id} changed during compaction")
    return [ref for _, ref in stored[len(entries) :]]


def _row_ref(message_id: int | None, summary_id: str | None, item_type: str, tokens: int) -> ItemRef:
    if item_type == "message":
        return ItemRef("message", int(message_id or 0), int(tokens))
    return ItemRef("summary", str(summary_id), int(tokens))


@dataclass(frozen=True)
class WriteMeta:
    """What the write needs from the run beyond the plan: the audit fields and the rotation reason."""

    tokens_before: int
    trigger: str
    engine_id: str
    started_at: str
    t0: float
    previous_rows: dict[str, tuple[Any, int]]
    rotation_reason: str = "compaction"


async def write_compaction(
    store: Store,
    session: repo.SessionRow,
    entries: list[ResolvedItem],
    plan: CompactionPlan,
    made: Summaries,
    content: str,
    ops: Any,
    meta: WriteMeta,
) -> CompactResult:
    """The one transaction: summary + edges, successor session + its context, audit row."""
    covered = plan.covered
    summary_tokens = summary_item_tokens(content, store.counter)
    source_tokens = sum(e.token_count for e in covered)
    earliest, latest = _time_range(plan)
    first_kept = next((e for e in plan.kept if isinstance(e, MessageItem)), None)
    details = {
        **ops.details(),
        "splitTurn": plan.cut.is_split_turn,
        "firstKeptEntryId": first_kept.entry_id if first_kept else None,
    }
    if plan.cut.error:
        details["cutNote"] = plan.cut.error
    if made.fallback_reason:
        details["fallbackReason"] = made.fallback_reason
    summary = repo.NewSummary(
        kind="legacy",
        content=content,
        token_count=summary_tokens,
        summarizer=made.summarizer,
        model=made.model,
        fallback_level=made.fallback_level,
        source_message_ids=[e.message_id for e in covered],
        source_summary_ids=[e.summary_id for e in plan.previous],
        earliest_at=earliest,
        latest_at=latest,
        descendant_count=len(covered) + sum(e.summary.descendant_count for e in plan.previous),
        descendant_token_count=source_tokens
        + sum(meta.previous_rows.get(e.summary_id, (None, 0))[1] for e in plan.previous),
        source_message_token_count=source_tokens,
        details=details,
    )
    async with store.transaction() as conn:
        appended = await _check_unchanged(conn, session.session_id, entries)
        kept = [e.ref for e in plan.kept]
        items = [ItemRef("summary", summary.summary_id, summary_tokens), *kept, *appended]
        record = repo.CompactionRecord(
            engine_id=meta.engine_id,
            trigger=meta.trigger,
            tokens_before=meta.tokens_before,
            duration_ms=int((time.perf_counter() - meta.t0) * 1000),
            rotation_reason=meta.rotation_reason,
            first_kept_message_id=first_kept.message_id if first_kept else None,
            first_kept_entry_id=first_kept.entry_id if first_kept else None,
            started_at=meta.started_at,
            details={**details, "summarizer": made.summarizer, "fallbackLevel": made.fallback_level},
        )
        successor = await repo.commit_compaction(conn, session, [summary], items, record)
    tokens_after = sum(item.tokens for item in items)
    return CompactResult(
        ok=True,
        compacted=True,
        result=CompactResultDetail(
            summary=content,
            first_kept_entry_id=first_kept.entry_id if first_kept else None,
            tokens_before=meta.tokens_before,
            tokens_after=tokens_after,
            details=ops.details(),
            session_id=successor.session_id,
            session_file=successor.session_file,
        ),
    )
