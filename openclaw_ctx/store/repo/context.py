"""Context items: a session's ordered prompt, resolved in one indexed read, and its totals.

A resolved item is a :data:`ResolvedItem`: a :class:`MessageItem` (the parsed message) or a
:class:`SummaryItem` (its :class:`SummaryRef`), told apart by ``kind`` or ``isinstance``. The union
is not called ``ContextItem`` because that is the ORM row class of ``context_items``
(:class:`openclaw_ctx.store.models.ContextItem`); a resolved item is that row joined to what it
points at. :class:`ItemRef` is the unresolved ``(kind, ref, tokens)`` triple a successor's context
is written from.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal, NamedTuple

from sqlalchemy import func, select, update
from sqlalchemy.ext.asyncio import AsyncConnection

from openclaw_ctx.messages import AgentMessage, message_from_json
from openclaw_ctx.store.models import ContextItem
from openclaw_ctx.store.repo.driver import Driver

__all__ = [
    "set_message_item_tokens",
    "ItemRef",
    "ItemType",
    "MessageItem",
    "ResolvedItem",
    "SummaryItem",
    "SummaryRef",
    "context_item_count",
    "context_tokens",
    "load_context",
]

ItemType = Literal["message", "summary"]


class ItemRef(NamedTuple):
    """One context item to write: what it points at and what it costs (a tuple, so it unpacks)."""

    kind: ItemType
    ref: int | str
    """The message id (int) or the summary id (str)."""
    tokens: int


@dataclass(frozen=True)
class SummaryRef:
    """The fields of a `summaries` row that rendering and planning read."""

    summary_id: str
    kind: str
    """``legacy``, ``leaf`` or ``condensed``."""
    depth: int
    content: str
    descendant_count: int
    earliest_at: str | None
    latest_at: str | None
    summarizer: str
    fallback_level: str


@dataclass(frozen=True)
class MessageItem:
    """A context item that is a stored message, parsed."""

    ordinal: int
    token_count: int
    message_id: int
    message: AgentMessage
    entry_id: str | None
    seq: int | None
    """The message's place in its key (None where a caller builds items without reading it)."""
    kind: Literal["message"] = "message"

    @property
    def ref(self) -> ItemRef:
        """This item as an unresolved reference, to carry into a successor."""
        return ItemRef("message", self.message_id, self.token_count)


@dataclass(frozen=True)
class SummaryItem:
    """A context item that is a summary node."""

    ordinal: int
    token_count: int
    summary: SummaryRef
    kind: Literal["summary"] = "summary"

    @property
    def summary_id(self) -> str:
        """The node's id."""
        return self.summary.summary_id

    @property
    def ref(self) -> ItemRef:
        """This item as an unresolved reference, to carry into a successor."""
        return ItemRef("summary", self.summary.summary_id, self.token_count)


ResolvedItem = MessageItem | SummaryItem
"""One resolved context item (see the module docstring for the name)."""


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
) -> list[ResolvedItem]:
    """The session's context items in order, resolved, with one indexed query (one driver hop).

    `after` and `limit` read one page (items with an ordinal above `after`, at most `limit` of them),
    for work over a context too long to hold at once.
    """
    page = (-1 if after is None else after, -1 if limit is None else limit)
    rows = await (await Driver.of(conn)).fetchall(_CONTEXT_SQL, (session_id, *page))
    return [_resolved(row) for row in rows]


def _resolved(row: tuple[Any, ...]) -> ResolvedItem:
    # Columns in _CONTEXT_SQL order: the item, then the message's, then the summary's.
    ordinal, item_type, token_count, message_id, message_json, entry_id, seq, summary_id, *summary = row
    if item_type == "message":
        return MessageItem(ordinal, token_count, message_id, message_from_json(message_json), entry_id, seq)
    return SummaryItem(ordinal, token_count, SummaryRef(summary_id, *summary))


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


async def set_message_item_tokens(conn: AsyncConnection, session_id: str, tokens: Mapping[int, int]) -> None:
    """Set what the session's context items of these messages cost (message id → tokens), e.g. a stub's."""
    for message_id, count in tokens.items():
        await conn.execute(
            update(ContextItem)
            .where(ContextItem.session_id == session_id, ContextItem.message_id == message_id)
            .values(token_count=count)
        )
