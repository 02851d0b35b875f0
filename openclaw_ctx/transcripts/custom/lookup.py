"""Reads the custom entries' restores share: which messages and summaries a key already has."""

from __future__ import annotations

from collections.abc import Iterable

from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncConnection

from openclaw_ctx.store.models import Message, Summary

__all__ = ["CHUNK", "message_ids", "summary_keys"]

CHUNK = 500
"""Ids per ``IN (...)`` list (SQLite caps bound parameters)."""


async def message_ids(conn: AsyncConnection, session_key: str, entry_ids: Iterable[str]) -> dict[str, tuple[int, int]]:
    """Transcript entry id → ``(message_id, token_count)`` of the key's messages among `entry_ids`."""
    wanted = list(set(entry_ids))
    found: dict[str, tuple[int, int]] = {}
    for start in range(0, len(wanted), CHUNK):
        rows = await conn.execute(
            select(Message.entry_id, Message.message_id, Message.token_count).where(
                Message.session_key == session_key, Message.entry_id.in_(wanted[start : start + CHUNK])
            )
        )
        found.update({e: (m, n) for e, m, n in rows if e is not None})
    return found


async def summary_keys(conn: AsyncConnection, summary_ids: Iterable[str]) -> dict[str, str]:
    """Summary id → the session key it is stored under, for the stored ones among `summary_ids`."""
    wanted = list(set(summary_ids))
    found: dict[str, str] = {}
    for start in range(0, len(wanted), CHUNK):
        rows = await conn.execute(
            select(Summary.summary_id, Summary.session_key).where(Summary.summary_id.in_(wanted[start : start + CHUNK]))
        )
        found.update((row.summary_id, row.session_key) for row in rows)
    return found
