"""Context items: a session's ordered prompt, resolved in one indexed read, and its totals."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

from sqlalchemy import func, select
from sqlalchemy.ext.asyncio import AsyncConnection

from openclaw_ctx.messages import (
    AgentMessage,
    message_from_json,
)
from openclaw_ctx.store.models import (
    ContextItem,
)
from openclaw_ctx.store.repo.driver import Driver

ItemType = Literal["message", "summary"]


# --- context items -------------------------------------------------------------------------------


@dataclass(frozen=True)
class ContextEntry:
    """One resolved context item: a message (parsed) or a summary (its row fields)."""

    ordinal: int
    item_type: ItemType
    token_count: int
    message_id: int | None = None
    message: AgentMessage | None = None
    entry_id: str | None = None
    seq: int | None = None
    summary_id: str | None = None
    summary: dict[str, Any] | None = field(default=None)


_CONTEXT_SQL = """
    SELECT ci.ordinal, ci.item_type, ci.token_count, ci.message_id, m.message_json, m.entry_id, m.seq,
           ci.summary_id, s.kind, s.depth, s.content, s.descendant_count, s.earliest_at, s.latest_at,
           s.summarizer, s.fallback_level
    FROM context_items AS ci
    LEFT JOIN messages AS m ON m.message_id = ci.message_id
    LEFT JOIN summaries AS s ON s.summary_id = ci.summary_id
    WHERE ci.session_id = ? AND ci.ordinal > ?
    ORDER BY ci.ordinal
    LIMIT ?
"""


async def load_context(
    conn: AsyncConnection, session_id: str, *, after: int | None = None, limit: int | None = None
) -> list[ContextEntry]:
    """The session's context items in order, resolved, with one indexed query (one driver hop).

    `after` and `limit` read one page (items with an ordinal above `after`, at most `limit` of them),
    for work over a context too long to hold at once.
    """
    page = (-1 if after is None else after, -1 if limit is None else limit)
    rows = await (await Driver.of(conn)).fetchall(_CONTEXT_SQL, (session_id, *page))
    out: list[ContextEntry] = []
    for (
        ordinal,
        item_type,
        token_count,
        message_id,
        message_json,
        entry_id,
        seq,
        summary_id,
        kind,
        depth,
        content,
        descendant_count,
        earliest_at,
        latest_at,
        summarizer,
        fallback_level,
    ) in rows:
        if item_type == "message":
            out.append(
                ContextEntry(
                    ordinal,
                    "message",
                    token_count,
                    message_id=message_id,
                    message=message_from_json(message_json),
                    entry_id=entry_id,
                    seq=seq,
                )
            )
        else:
            out.append(
                ContextEntry(
                    ordinal,
                    "summary",
                    token_count,
                    summary_id=summary_id,
                    summary={
                        "kind": kind,
                        "depth": depth,
                        "content": content,
                        "descendant_count": descendant_count,
                        "earliest_at": earliest_at,
                        "latest_at": latest_at,
                        "summarizer": summarizer,
                        "fallback_level": fallback_level,
                    },
                )
            )
    return out


async def context_tokens(conn: AsyncConnection, session_id: str) -> int:
    """Sum of stored token counts over the session's context items."""
    total = await conn.scalar(
        select(func.coalesce(func.sum(ContextItem.token_count), 0)).where(ContextItem.session_id == session_id)
    )
    return int(total or 0)


async def context_item_count(conn: AsyncConnection, session_id: str) -> int:
    """How many context items the session has (one indexed count; nothing is parsed)."""
    count = await conn.scalar(select(func.count()).select_from(ContextItem).where(ContextItem.session_id == session_id))
    return int(count or 0)
