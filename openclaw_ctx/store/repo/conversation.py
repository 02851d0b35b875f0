"""A key's current conversation as stored, for session stores that hand back raw history (agent SDK adapters).

The conversation is the key's active session and every session it continues (compaction's successors
point at their parents; ``/new`` and a cleared SDK session start a chain of their own), in ``seq``
order, without messages taken back by :func:`retract_newest`. Both reads are O(what they return):
the newest rows come off the ``(session_key, seq)`` index.
"""

from __future__ import annotations

from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncConnection

__all__ = ["conversation_messages", "retract_newest"]

_CHAIN = (
    "WITH RECURSIVE chain(session_id, parent) AS ("
    " SELECT session_id, parent_session_id FROM sessions WHERE session_key = :k AND status = 'active'"
    " UNION ALL SELECT s.session_id, s.parent_session_id FROM sessions AS s JOIN chain AS c ON s.session_id = c.parent"
    ") "
)
_NEWEST = text(
    _CHAIN + "SELECT message_id, message_json FROM messages WHERE session_key = :k AND on_active_branch = 1 "
    "AND session_id IN (SELECT session_id FROM chain) ORDER BY seq DESC LIMIT :n"
)


async def conversation_messages(
    conn: AsyncConnection, session_key: str, *, limit: int | None = None
) -> list[tuple[int, str]]:
    """``(message_id, message_json)`` of the key's conversation, oldest first; the newest `limit` when given."""
    rows = await conn.execute(_NEWEST, {"k": session_key, "n": -1 if limit is None else limit})
    return [(int(r[0]), str(r[1])) for r in reversed(rows.all())]


async def retract_newest(conn: AsyncConnection, session_key: str) -> tuple[int, str] | None:
    """Take back the conversation's newest message (an SDK's ``pop_item``); None when it is empty.

    Nothing is deleted: the row is marked off the active branch, as an abandoned branch of an
    OpenClaw transcript is, so recall, ``sql`` and export still find it; it leaves the active
    session's context (a summary that already covers it keeps covering it).
    """
    newest = await conversation_messages(conn, session_key, limit=1)
    if not newest:
        return None
    message_id, message_json = newest[0]
    await conn.execute(text("UPDATE messages SET on_active_branch = 0 WHERE message_id = :m"), {"m": message_id})
    await conn.execute(
        text(
            "DELETE FROM context_items WHERE message_id = :m AND item_type = 'message' AND session_id = "
            "(SELECT session_id FROM sessions WHERE session_key = :k AND status = 'active')"
        ),
        {"m": message_id, "k": session_key},
    )
    return message_id, message_json
