"""The audit tables (the `compactions` log, the per-turn `turns` rows) and the one compaction write.

:func:`commit_compaction` is DESIGN.md's single compaction transaction, written once for every
engine: the new summary nodes with their edges, the successor session with its context items, and
the audit row that ties them together. Callers keep only their planning.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import func, insert, select, update
from sqlalchemy.ext.asyncio import AsyncConnection

from openclaw_ctx.store.models import Compaction, Turn
from openclaw_ctx.store.repo.context import ItemRef
from openclaw_ctx.store.repo.sessions import SessionRow, rotate_session
from openclaw_ctx.store.repo.summaries import NewSummary, insert_summary

__all__ = [
    "CompactionRecord",
    "commit_compaction",
    "last_turn",
    "mark_turn_compacted",
    "prompt_tokens_after",
    "record_compaction",
    "record_turn",
]


@dataclass(frozen=True)
class CompactionRecord:
    """What a compaction's audit row says beyond what :func:`commit_compaction` derives itself.

    The store fills in the session key, the before/after session ids, ``ok``/``compacted`` (a commit
    is a compaction that happened), ``tokens_after`` (the successor's items), the top summary and the
    count of summaries created.
    """

    engine_id: str
    """Engine that compacted; also the successor session's engine."""
    trigger: str
    """Why it ran: ``budget``, ``manual``, ``overflow``, a backfill's reason, …"""
    tokens_before: int
    duration_ms: int
    reason: str | None = None
    """The engine's own note (e.g. the sweep's stop reason)."""
    rotation_reason: str = "compaction"
    """The successor session's ``rotation_reason``."""
    first_kept_message_id: int | None = None
    first_kept_entry_id: str | None = None
    started_at: str | None = None
    """None: the row's default, now."""
    details: Mapping[str, Any] | None = None
    prior_summary_ids: tuple[str, ...] = field(default=())
    """Summaries this compaction wrote in earlier transactions (a batched backfill): they count in
    ``summaries_created``, and the last of them is the top summary when none is written here."""


async def commit_compaction(
    conn: AsyncConnection,
    session: SessionRow,
    summaries: Sequence[NewSummary],
    items: Sequence[ItemRef],
    record: CompactionRecord,
) -> SessionRow:
    """Write one compaction inside the caller's transaction; returns the successor session.

    Args:
        conn: The connection of the caller's ``store.transaction()`` (all or nothing with its checks).
        session: The active session being compacted; it becomes ``rotated``.
        summaries: New summary nodes, children before parents; the last is the top summary.
        items: The successor's context, in order (a new summary is referenced by its pre-assigned
            ``summary_id``).
        record: The audit fields only the caller knows.
    """
    for summary in summaries:
        await insert_summary(conn, session, summary)
    successor = await rotate_session(conn, session, items, reason=record.rotation_reason, engine_id=record.engine_id)
    created = [*record.prior_summary_ids, *(s.summary_id for s in summaries)]
    await record_compaction(
        conn,
        session_key=session.session_key,
        before_session_id=session.session_id,
        after_session_id=successor.session_id,
        engine_id=record.engine_id,
        trigger=record.trigger,
        ok=1,
        compacted=1,
        reason=record.reason,
        tokens_before=record.tokens_before,
        tokens_after=sum(item.tokens for item in items),
        summary_id=created[-1] if created else None,
        first_kept_message_id=record.first_kept_message_id,
        first_kept_entry_id=record.first_kept_entry_id,
        summaries_created=len(created),
        duration_ms=record.duration_ms,
        details=dict(record.details) if record.details is not None else None,
        **({"started_at": record.started_at} if record.started_at is not None else {}),
    )
    return successor


async def record_compaction(conn: AsyncConnection, **values: Any) -> int:
    """Append a row to the `compactions` audit log; returns its id.

    For restoring rows as they were (the transcript importers); a live compaction goes through
    :func:`commit_compaction`.
    """
    if "details" in values:
        details = values.pop("details")
        values["details_json"] = json.dumps(details, ensure_ascii=False, default=str) if details is not None else None
    result = await conn.execute(insert(Compaction).returning(Compaction.compaction_id), [values])
    return int(result.scalar_one())


async def record_turn(
    conn: AsyncConnection,
    session: SessionRow,
    *,
    assembled_tokens: int,
    budget: int,
    compacted: bool,
    prompt_tokens: int | None = None,
) -> int:
    """Append a `turns` row for the key; returns its number (1, 2, … across the key's whole chain)."""
    last = await conn.scalar(
        select(func.coalesce(func.max(Turn.turn), 0)).where(Turn.session_key == session.session_key)
    )
    number = int(last or 0) + 1
    await conn.execute(
        insert(Turn).values(
            session_key=session.session_key,
            session_id=session.session_id,
            turn=number,
            assembled_tokens=assembled_tokens,
            prompt_tokens=prompt_tokens,
            budget=budget,
            compacted=int(compacted),
        )
    )
    return number


async def last_turn(conn: AsyncConnection, session_key: str) -> int:
    """The key's highest turn number (0: none yet)."""
    return int(
        await conn.scalar(select(func.coalesce(func.max(Turn.turn), 0)).where(Turn.session_key == session_key)) or 0
    )


async def prompt_tokens_after(conn: AsyncConnection, session_key: str, turn: int) -> list[int]:
    """`prompt_tokens` of the key's turns numbered above `turn`, in order (turns without the figure left out)."""
    query = (
        select(Turn.prompt_tokens)
        .where(Turn.session_key == session_key, Turn.turn > turn, Turn.prompt_tokens.is_not(None))
        .order_by(Turn.turn)
    )
    return [int(v) for v in (await conn.scalars(query)) if v is not None]


async def mark_turn_compacted(conn: AsyncConnection, session_key: str, turn: int) -> None:
    """Flag a recorded turn as one during which the context was compacted."""
    await conn.execute(update(Turn).where(Turn.session_key == session_key, Turn.turn == turn).values(compacted=1))
