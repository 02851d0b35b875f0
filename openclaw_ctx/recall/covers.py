"""Which summaries cover a message, and whether the key's active context still holds it raw.

A message is covered by the leaf (or legacy) summary whose edges reach it, and through that by every
summary built on top; the node of the active context on that chain is what the model sees of it.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any

from sqlalchemy import bindparam, text
from sqlalchemy.ext.asyncio import AsyncConnection

from openclaw_ctx.store.repo import Driver

__all__ = [
    "COVER_SQL",
    "Covers",
    "cover_chain",
    "covering_summaries",
    "covers_and_raw",
    "raw_in_context",
    "summaries_in_context",
]

Covers = dict[int, tuple[str | None, str | None]]
"""Per message id: (covering leaf/legacy summary, the active-context node that reaches it)."""

COVER_SQL = text(
    """
    WITH RECURSIVE up(mid, sid, lvl) AS (
        SELECT sm.message_id, sm.summary_id, 0 FROM summary_messages AS sm WHERE sm.message_id IN :ids
        UNION
        SELECT up.mid, sp.summary_id, up.lvl + 1
        FROM up CROSS JOIN summary_parents AS sp ON sp.source_summary_id = up.sid
        WHERE up.lvl < 64
    )
    SELECT up.mid, up.sid, up.lvl,
           EXISTS (SELECT 1 FROM context_items AS ci CROSS JOIN sessions AS se ON se.session_id = ci.session_id
                   WHERE ci.summary_id = up.sid AND se.status = 'active') AS in_ctx
    FROM up ORDER BY up.mid, up.lvl
    """
).bindparams(bindparam("ids", expanding=True))

_RAW_IN_CONTEXT_SQL = text(
    """
    SELECT ci.message_id FROM context_items AS ci CROSS JOIN sessions AS se ON se.session_id = ci.session_id
    WHERE ci.message_id IN :ids AND se.status = 'active'
    """
).bindparams(bindparam("ids", expanding=True))

# Both of the above in one round trip (a grep page needs both): cover rows first (kind 0, in
# (mid, lvl) order), then the raw in-context message ids (kind 1).
# Sent through the driver (one hop), the ids as one JSON array.
_COVER_AND_RAW_SQL = (
    COVER_SQL.text.replace("SELECT up.mid, up.sid, up.lvl,", "SELECT 0 AS kind, up.mid, up.sid, up.lvl,").replace(
        "FROM up ORDER BY up.mid, up.lvl", "FROM up"
    )
    + " UNION ALL "
    + _RAW_IN_CONTEXT_SQL.text.replace("SELECT ci.message_id FROM", "SELECT 1, ci.message_id, NULL, NULL, NULL FROM")
    + " ORDER BY 1, 2, 4"
).replace("IN :ids", "IN (SELECT value FROM json_each(:ids))")


def _fold_covers(rows: Iterable[Any]) -> Covers:
    out: Covers = {}
    for mid, sid, lvl, in_ctx in rows:
        leaf, ctx = out.get(mid, (None, None))
        if lvl == 0 and leaf is None:
            leaf = sid
        if in_ctx and ctx is None:
            ctx = sid
        out[mid] = (leaf, ctx)
    return out


async def covering_summaries(conn: AsyncConnection, message_ids: list[int]) -> Covers:
    """For each message id: (covering leaf/legacy summary, the active-context node that reaches it)."""
    if not message_ids:
        return {}
    return _fold_covers(await conn.execute(COVER_SQL, {"ids": message_ids}))


async def covers_and_raw(conn: AsyncConnection, message_ids: list[int]) -> tuple[Covers, set[int]]:
    """:func:`covering_summaries` and the ids still raw in an active context, in one round trip."""
    if not message_ids:
        return {}, set()
    found = await (await Driver.of(conn)).fetchall(_COVER_AND_RAW_SQL, {"ids": json.dumps(message_ids)})
    covers = _fold_covers(tuple(r[1:]) for r in found if r[0] == 0)
    return covers, {r[1] for r in found if r[0] == 1}


async def cover_chain(conn: AsyncConnection, message_id: int) -> list[dict[str, Any]]:
    """Every summary over one message, leaf first: ``{"id", "level", "inContext"}``."""
    rows = await conn.execute(COVER_SQL, {"ids": [message_id]})
    return [{"id": sid, "level": lvl, "inContext": bool(in_ctx)} for _mid, sid, lvl, in_ctx in rows]


_SUMMARIES_IN_CONTEXT_SQL = text(
    """
    SELECT DISTINCT ci.summary_id FROM context_items AS ci CROSS JOIN sessions AS se ON se.session_id = ci.session_id
    WHERE ci.summary_id IN :ids AND se.status = 'active'
    """
).bindparams(bindparam("ids", expanding=True))


async def summaries_in_context(conn: AsyncConnection, summary_ids: list[str]) -> set[str]:
    """The ids among `summary_ids` that are items of an active session's context (as ``describe`` says)."""
    if not summary_ids:
        return set()
    return {str(r[0]) for r in await conn.execute(_SUMMARIES_IN_CONTEXT_SQL, {"ids": summary_ids})}


async def raw_in_context(conn: AsyncConnection, message_id: int) -> bool:
    """True when the message itself is an item of an active session's context."""
    return bool(list(await conn.execute(_RAW_IN_CONTEXT_SQL, {"ids": [message_id]})))
