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

__all__ = ["engine_states", "get_engine_state", "set_engine_state"]

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


async def engine_states(conn: AsyncConnection, engine_id: str, name: str, key_prefix: str) -> list[tuple[str, Any]]:
    """``(session_key, value)`` of every `name` value the engine keeps under keys starting with `key_prefix`."""
    rows = await conn.execute(
        text(
            "SELECT session_key, value_json FROM engine_state WHERE engine_id = :e AND name = :n "
            "AND substr(session_key, 1, length(:p)) = :p ORDER BY session_key"
        ),
        {"e": engine_id, "n": name, "p": key_prefix},
    )
    return [(str(key), json.loads(value)) for key, value in rows]
