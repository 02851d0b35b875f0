"""Engine state: small JSON values an engine keeps per session key."""

from __future__ import annotations

import json
from typing import Any

from sqlalchemy import select, text
from sqlalchemy.ext.asyncio import AsyncConnection

from openclaw_ctx._time import utc_now
from openclaw_ctx.store.models import (
    EngineState,
)

__all__ = ["get_engine_state", "set_engine_state"]

# --- engine state --------------------------------------------------------------------------------


async def get_engine_state(conn: AsyncConnection, engine_id: str, session_key: str, name: str) -> Any:
    """A stored engine-state value, or None."""
    raw = await conn.scalar(
        select(EngineState.value_json).where(
            EngineState.engine_id == engine_id,
            EngineState.session_key == session_key,
            EngineState.name == name,
        )
    )
    return json.loads(raw) if raw is not None else None


async def set_engine_state(conn: AsyncConnection, engine_id: str, session_key: str, name: str, value: Any) -> None:
    """Insert or replace an engine-state value (None deletes it)."""
    if value is None:
        await conn.execute(
            text("DELETE FROM engine_state WHERE engine_id=:e AND session_key=:k AND name=:n"),
            {"e": engine_id, "k": session_key, "n": name},
        )
        return
    await conn.execute(
        text(
            "INSERT INTO engine_state(engine_id, session_key, name, value_json, updated_at) "
            "VALUES (:e, :k, :n, :v, :t) ON CONFLICT(engine_id, session_key, name) "
            "DO UPDATE SET value_json = excluded.value_json, updated_at = excluded.updated_at"
        ),
        {"e": engine_id, "k": session_key, "n": name, "v": json.dumps(value), "t": utc_now()},
    )
