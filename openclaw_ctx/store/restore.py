"""Writing back rows that already existed somewhere: sessions, transcript lines, context items and turns of an import.

The transcript importer reads files and decides what to restore; these functions are the writes, so
the store stays the only writer of core tables. Summaries and audit rows go through
:func:`~openclaw_ctx.store.repo.insert_summary` and :func:`~openclaw_ctx.store.repo.record_compaction`.
Every function runs in the caller's transaction.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any, Literal

from sqlalchemy import delete, insert, select, update
from sqlalchemy.ext.asyncio import AsyncConnection

from openclaw_ctx._time import utc_now
from openclaw_ctx.store.models import ContextItem, Session, TranscriptEntry, Turn
from openclaw_ctx.store.repo import SessionRow, active_session, get_session

__all__ = [
    "RestoredItem",
    "RestoredSession",
    "RestoredTurn",
    "TranscriptLine",
    "append_transcript_lines",
    "replace_context_items",
    "restore_session",
    "restore_turns",
    "set_session_engine",
    "settle_imported_status",
]

_BATCH = 1000


@dataclass(frozen=True)
class RestoredSession:
    """A `sessions` row as a transcript header describes it."""

    session_id: str
    session_key: str
    session_file: str
    parent_session_id: str | None
    rotation_reason: str | None
    status: str
    engine_id: str
    cwd: str | None
    meta: dict[str, Any]
    created_at: str | None = None
    """None: now. Otherwise also the row's `updated_at`."""


@dataclass(frozen=True)
class TranscriptLine:
    """A `transcript_entries` row: one line of an imported file (`entry_id` None for a malformed line)."""

    session_id: str
    entry_id: str | None
    parent_entry_id: str | None
    entry_type: str
    raw_json: str
    source_file: str
    line_no: int
    error: str | None
    on_active_branch: bool
    source_line: str | None = None
    """A message line as read, when export would not write it back from its envelope byte for byte."""


@dataclass(frozen=True)
class RestoredItem:
    """A `context_items` row at its recorded ordinal: a message (by row id) or a summary (by id)."""

    ordinal: int
    item_type: Literal["message", "summary"]
    ref: int | str
    token_count: int


@dataclass(frozen=True)
class RestoredTurn:
    """A `turns` row (`at` None: now)."""

    turn: int
    assembled_tokens: int
    budget: int
    compacted: int
    at: str | None = None
    prompt_tokens: int | None = None


async def restore_session(conn: AsyncConnection, session: RestoredSession) -> SessionRow:
    """Insert a session row; returns it."""
    values: dict[str, Any] = {
        "session_id": session.session_id,
        "session_key": session.session_key,
        "session_file": session.session_file,
        "parent_session_id": session.parent_session_id,
        "rotation_reason": session.rotation_reason,
        "status": session.status,
        "engine_id": session.engine_id,
        "cwd": session.cwd,
        "meta_json": json.dumps(session.meta, ensure_ascii=False),
    }
    if session.created_at:
        values["created_at"] = values["updated_at"] = session.created_at
    await conn.execute(insert(Session).values(**values))
    return await get_session(conn, session.session_id)


async def settle_imported_status(conn: AsyncConnection, session: SessionRow) -> None:
    """Parents of imported successors are rotated; the newest leaf becomes active if the key has none."""
    await conn.execute(
        update(Session)
        .where(
            Session.session_key == session.session_key,
            Session.status != "rotated",
            Session.session_id.in_(
                select(Session.parent_session_id).where(
                    Session.session_key == session.session_key, Session.parent_session_id.is_not(None)
                )
            ),
        )
        .values(status="rotated", updated_at=utc_now())
    )
    has_child = await conn.scalar(select(Session.session_id).where(Session.parent_session_id == session.session_id))
    active = await active_session(conn, session.session_key)
    if has_child is None and active is None:
        await conn.execute(update(Session).where(Session.session_id == session.session_id).values(status="active"))


async def set_session_engine(conn: AsyncConnection, session: SessionRow, engine_id: str | None) -> None:
    """Record whose projection the session's context items are (None or the same id: nothing changes)."""
    if engine_id is not None and engine_id != session.engine_id:
        await conn.execute(update(Session).where(Session.session_id == session.session_id).values(engine_id=engine_id))


async def append_transcript_lines(conn: AsyncConnection, lines: Sequence[TranscriptLine]) -> None:
    """Index lines of an imported file in `transcript_entries`."""
    rows = [asdict(line) | {"on_active_branch": int(line.on_active_branch)} for line in lines]
    for start in range(0, len(rows), _BATCH):
        await conn.execute(insert(TranscriptEntry), rows[start : start + _BATCH])


async def replace_context_items(conn: AsyncConnection, session_id: str, items: Sequence[RestoredItem]) -> None:
    """Make `items` the session's whole context projection."""
    rows = [
        {
            "session_id": session_id,
            "ordinal": item.ordinal,
            "item_type": item.item_type,
            "message_id": item.ref if item.item_type == "message" else None,
            "summary_id": item.ref if item.item_type == "summary" else None,
            "token_count": item.token_count,
        }
        for item in items
    ]
    await conn.execute(delete(ContextItem).where(ContextItem.session_id == session_id))
    for start in range(0, len(rows), _BATCH):
        await conn.execute(insert(ContextItem), rows[start : start + _BATCH])


async def restore_turns(conn: AsyncConnection, session: SessionRow, turns: Sequence[RestoredTurn]) -> None:
    """Insert `turns` rows of the session under their recorded numbers."""
    rows = [
        {k: v for k, v in asdict(turn).items() if k != "at" or v is not None}
        | {"session_key": session.session_key, "session_id": session.session_id}
        for turn in turns
    ]
    if rows:
        await conn.execute(insert(Turn), rows)
