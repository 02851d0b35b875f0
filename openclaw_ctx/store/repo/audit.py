"""The audit tables: the `compactions` log and the per-turn `turns` rows."""

from __future__ import annotations

import json
from typing import Any

from sqlalchemy import func, insert, select, update
from sqlalchemy.ext.asyncio import AsyncConnection

from openclaw_ctx.store.models import (
    Compaction,
    Turn,
)
from openclaw_ctx.store.repo.sessions import SessionRow


async def record_compaction(conn: AsyncConnection, **values: Any) -> int:
    """Append a row to the `compactions` audit log; returns its id."""
    if "details" in values:
        details = values.pop("details")
        values["details_json"] = json.dumps(details, ensure_ascii=False, default=str) if details is not None else None
    result = await conn.execute(insert(Compaction).returning(Compaction.compaction_id), [values])
    return int(result.scalar_one())


async def record_turn(
    conn: AsyncConnection, session: SessionRow, *, assembled_tokens: int, budget: int, compacted: bool
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
            budget=budget,
            compacted=int(compacted),
        )
    )
    return number


async def mark_turn_compacted(conn: AsyncConnection, session_key: str, turn: int) -> None:
    """Flag a recorded turn as one during which the context was compacted."""
    await conn.execute(update(Turn).where(Turn.session_key == session_key, Turn.turn == turn).values(compacted=1))
