"""Deferred compaction debt: one `engine_state` row per key, written after a turn that crossed the
threshold and cleared once a sweep has nothing left to do (docs/lossless.md, "Deferred mode")."""

from __future__ import annotations

from typing import Any

from sqlalchemy.ext.asyncio import AsyncConnection

from openclaw_ctx._ids import LOSSLESS_ENGINE_ID as ENGINE_ID
from openclaw_ctx.store import Store, repo

__all__ = ["DEBT_STATE", "read_debt", "record_debt", "write_debt"]

DEBT_STATE = "compaction_debt"


async def read_debt(store: Store, session_key: str) -> dict[str, Any] | None:
    """The recorded compaction debt of a key, if any."""
    async with store.read() as conn:
        debt = await repo.get_engine_state(conn, ENGINE_ID, session_key, DEBT_STATE)
    return debt if isinstance(debt, dict) else None


async def write_debt(store: Store, session_key: str, value: dict[str, Any] | None) -> None:
    """Replace (or with ``None`` clear) a key's debt."""
    async with store.transaction() as conn:
        await repo.set_engine_state(conn, ENGINE_ID, session_key, DEBT_STATE, value)


async def record_debt(conn: AsyncConnection, session_key: str, session_id: str, budget: int, pressure: int) -> None:
    """Note, inside the turn's transaction, that the key is over its threshold (attempts carried over)."""
    debt = await repo.get_engine_state(conn, ENGINE_ID, session_key, DEBT_STATE) or {"attempts": 0}
    debt.update(
        pending=True,
        reason="threshold",
        token_budget=budget,
        projected_tokens=pressure,
        session_id=session_id,
        recorded_at=repo.utc_now(),
    )
    await repo.set_engine_state(conn, ENGINE_ID, session_key, DEBT_STATE, debt)
