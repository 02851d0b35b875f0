"""Sessions: the rows of a key's rotation chain, their lookup, creation and rotation."""

from __future__ import annotations

import difflib
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sqlalchemy import insert, select, update
from sqlalchemy.ext.asyncio import AsyncConnection

from openclaw_ctx._ids import check_session_key, new_session_id
from openclaw_ctx._time import utc_now
from openclaw_ctx.errors import NotFoundError
from openclaw_ctx.store.models import (
    ContextItem,
    Session,
)
from openclaw_ctx.store.repo.context import ItemRef

__all__ = [
    "HOST_ROTATION_REASON",
    "SessionRow",
    "active_session",
    "ensure_session",
    "get_session",
    "require_active_session",
    "rotate_session",
    "session_chain",
    "start_fresh_session",
    "successor_session_file",
]

HOST_ROTATION_REASON = "openclaw-transcript-rotation"
"""`rotation_reason` of a successor imported from an OpenClaw transcript whose header names its `parentSession`."""


def successor_session_file(previous: str | None, session_id: str, directory: str | None = None) -> str:
    """OpenClaw's successor name: `<ISO time with : and . as ->_<sessionId>.jsonl`, beside the predecessor."""
    stamp = utc_now().replace(":", "-").replace(".", "-")
    folder = Path(previous).parent if previous else Path(directory or ".")
    return str(folder / f"{stamp}_{session_id}.jsonl")


# --- sessions ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class SessionRow:
    """A `sessions` row."""

    session_id: str
    session_key: str
    session_file: str | None
    parent_session_id: str | None
    rotation_reason: str | None
    status: str
    engine_id: str | None
    created_at: str

    @classmethod
    def from_row(cls, row: Any) -> SessionRow:
        """Build from a selected row of the `_SESSION_COLUMNS`."""
        return cls(**row._mapping)


_SESSION_COLUMNS = (
    Session.session_id,
    Session.session_key,
    Session.session_file,
    Session.parent_session_id,
    Session.rotation_reason,
    Session.status,
    Session.engine_id,
    Session.created_at,
)


async def get_session(conn: AsyncConnection, session_id: str) -> SessionRow:
    """The session with this id.

    Raises:
        NotFoundError: no such session.
    """
    row = (await conn.execute(select(*_SESSION_COLUMNS).where(Session.session_id == session_id))).first()
    if row is None:
        raise NotFoundError(f"no session with id {session_id!r}")
    return SessionRow.from_row(row)


async def active_session(conn: AsyncConnection, session_key: str) -> SessionRow | None:
    """The active session of a key, if any."""
    row = (
        await conn.execute(
            select(*_SESSION_COLUMNS).where(Session.session_key == session_key, Session.status == "active")
        )
    ).first()
    return SessionRow.from_row(row) if row else None


async def require_active_session(conn: AsyncConnection, session_key: str) -> SessionRow:
    """The active session of a key a user named (`compact --key`, `assemble --key`).

    Raises:
        NotFoundError: the key was never stored; names the closest stored keys when there are any.
    """
    session = await active_session(conn, session_key)
    if session is not None:
        return session
    raise NotFoundError(f"no session key {session_key!r} in this store{await _close_keys(conn, session_key)}")


async def _close_keys(conn: AsyncConnection, session_key: str) -> str:
    # Only on the error path: one pass over the distinct keys, however many there are.
    keys = (await conn.scalars(select(Session.session_key).distinct())).all()
    close = difflib.get_close_matches(session_key, keys, n=3, cutoff=0.6)
    if close:
        return f"; did you mean {', '.join(repr(k) for k in close)}?"
    return "; `openclaw-ctx sessions` lists the stored keys" if keys else " (it holds no sessions yet)"


async def ensure_session(
    conn: AsyncConnection,
    session_key: str,
    *,
    session_id: str | None = None,
    session_file: str | None = None,
    engine_id: str | None = None,
    cwd: str | None = None,
    sessions_dir: str | None = None,
) -> SessionRow:
    """The active session of `session_key`, created if the key has none.

    Raises:
        InvalidSessionKeyError: a new key that is empty, too long or holds control characters.
    """
    existing = await active_session(conn, session_key)
    if existing is not None:
        return existing
    check_session_key(session_key)
    sid = session_id or new_session_id()
    file = session_file or successor_session_file(None, sid, sessions_dir)
    await conn.execute(
        insert(Session).values(session_id=sid, session_key=session_key, session_file=file, engine_id=engine_id, cwd=cwd)
    )
    return await get_session(conn, sid)


async def start_fresh_session(
    conn: AsyncConnection, session_key: str, *, reason: str, engine_id: str | None = None
) -> SessionRow:
    """OpenClaw's ``/new`` and ``/reset``: archive the key's active session and start an empty one.

    The new session has a new id and no parent (it continues nothing); `reason` goes in its
    ``rotation_reason``. Nothing is deleted: the archived session's messages and summaries stay in
    the store, in the key's chain and in recall.
    """
    old = await active_session(conn, session_key)
    if old is not None:
        await conn.execute(
            update(Session).where(Session.session_id == old.session_id).values(status="archived", updated_at=utc_now())
        )
    sid = new_session_id()
    await conn.execute(
        insert(Session).values(
            session_id=sid,
            session_key=session_key,
            session_file=successor_session_file(old.session_file if old else None, sid),
            rotation_reason=reason,
            engine_id=engine_id or (old.engine_id if old else None),
        )
    )
    return await get_session(conn, sid)


async def session_chain(conn: AsyncConnection, session_key: str) -> list[SessionRow]:
    """Every session of a key, oldest first (the rotation chain plus any archived rows)."""
    rows = await conn.execute(
        select(*_SESSION_COLUMNS)
        .where(Session.session_key == session_key)
        .order_by(Session.created_at, Session.session_id)
    )
    return [SessionRow.from_row(r) for r in rows]


async def rotate_session(
    conn: AsyncConnection,
    old: SessionRow,
    items: Sequence[ItemRef],
    *,
    reason: str,
    engine_id: str | None,
) -> SessionRow:
    """Write the successor of `old` with the given context items; mark `old` rotated.

    `items` are the successor's context, in order. Run inside the same
    transaction as the summary writes so the rotation is all-or-nothing.
    """
    await conn.execute(
        update(Session).where(Session.session_id == old.session_id).values(status="rotated", updated_at=utc_now())
    )
    sid = new_session_id()
    await conn.execute(
        insert(Session).values(
            session_id=sid,
            session_key=old.session_key,
            session_file=successor_session_file(old.session_file, sid),
            parent_session_id=old.session_id,
            rotation_reason=reason,
            engine_id=engine_id or old.engine_id,
        )
    )
    if items:
        await conn.execute(
            insert(ContextItem),
            [
                {
                    "session_id": sid,
                    "ordinal": i,
                    "item_type": kind,
                    "message_id": ref if kind == "message" else None,
                    "summary_id": ref if kind == "summary" else None,
                    "token_count": tokens,
                }
                for i, (kind, ref, tokens) in enumerate(items)
            ],
        )
    return await get_session(conn, sid)
