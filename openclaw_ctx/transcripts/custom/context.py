"""``openclaw-ctx/lcm-context``: a session's context projection, when it is not buildSessionContext's.

``data`` is ``{engineId, items}``, the session's `context_items` in order, each ``{ordinal, entryId |
summaryId, tokenCount}``; written last, for a session of lossless-claw, one whose context holds a
DAG node, or one whose file would otherwise rebuild another context (a rotated session). The last
one on the active branch is the session's projection; without one, import falls back to
buildSessionContext.
"""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import Field, model_validator
from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncConnection

from openclaw_ctx._ids import LOSSLESS_ENGINE_ID
from openclaw_ctx.store.models import ContextItem, Message, Summary
from openclaw_ctx.store.repo import SessionRow
from openclaw_ctx.store.restore import RestoredItem
from openclaw_ctx.transcripts.custom.lookup import message_ids, summary_keys
from openclaw_ctx.transcripts.custom.registry import EntryData, EntryIdOf, EntryKind, RestoreScope, dump
from openclaw_ctx.transcripts.entries import CustomEntry

__all__ = [
    "CONTEXT_KIND",
    "CONTEXT_TYPE",
    "ContextData",
    "ContextItemData",
    "Projection",
    "context_data",
    "resolve_context",
]

CONTEXT_TYPE = "openclaw-ctx/lcm-context"
_DAG_KINDS = ("leaf", "condensed")
NonNegative = Annotated[int, Field(ge=0)]
Projection = tuple[str | None, list[RestoredItem]]
"""The engine whose projection a session's context items are, and the items."""


class ContextItemData(EntryData):
    """One context item: a message (by transcript entry id) or a summary (by id)."""

    ordinal: NonNegative
    entry_id: str | None = None
    summary_id: str | None = None
    token_count: NonNegative

    @model_validator(mode="after")
    def _one_ref(self) -> ContextItemData:
        if (self.entry_id is None) == (self.summary_id is None):
            raise ValueError("an item needs exactly one of entryId and summaryId")
        return self


class ContextData(EntryData):
    """The ``data`` of an ``openclaw-ctx/lcm-context`` entry: a session's `context_items`."""

    engine_id: str | None = None
    items: list[ContextItemData]

    @model_validator(mode="after")
    def _ordinals_unique(self) -> ContextData:
        ordinals = [i.ordinal for i in self.items]
        if len(set(ordinals)) != len(ordinals):
            raise ValueError("two items share an ordinal")
        return self


async def context_data(
    conn: AsyncConnection, session: SessionRow, entry_id_of: EntryIdOf
) -> tuple[dict[str, Any], bool]:
    """The session's context items as lcm-context ``data``, and whether they are lossless-claw's projection
    (a session of the lossless engine, or one whose context holds a leaf or condensed node). One query."""
    rows = (
        await conn.execute(
            select(
                ContextItem.ordinal,
                ContextItem.item_type,
                ContextItem.summary_id,
                ContextItem.token_count,
                Message.entry_id,
                Message.message_id,
                Summary.kind,
            )
            .outerjoin(Message, Message.message_id == ContextItem.message_id)
            .outerjoin(Summary, Summary.summary_id == ContextItem.summary_id)
            .where(ContextItem.session_id == session.session_id)
            .order_by(ContextItem.ordinal)
        )
    ).all()
    lossless = session.engine_id == LOSSLESS_ENGINE_ID or any(r.kind in _DAG_KINDS for r in rows)
    items = [
        ContextItemData.model_construct(
            ordinal=r.ordinal,
            entry_id=entry_id_of(r.entry_id, r.message_id) if r.item_type == "message" else None,
            summary_id=r.summary_id if r.item_type == "summary" else None,
            token_count=r.token_count,
        )
        for r in rows
    ]
    data = dump(ContextData.model_construct(engine_id=session.engine_id, items=items))
    data["items"] = [{k: v for k, v in item.items() if v is not None and k != "version"} for item in data["items"]]
    return data, lossless


async def _unresolved(scope: RestoreScope, data: ContextData) -> tuple[str | None, dict[str, tuple[int, int]]]:
    """The first item that names a row the key lacks (None: all resolve), and the items' messages."""
    key = scope.session.session_key
    messages = await message_ids(scope.conn, key, (i.entry_id for i in data.items if i.entry_id))
    summaries = await summary_keys(scope.conn, (i.summary_id for i in data.items if i.summary_id))
    problem = next(
        (
            f"entry {i.entry_id!r}" if i.entry_id is not None else f"summary {i.summary_id!r}"
            for i in data.items
            if (i.entry_id is not None and i.entry_id not in messages)
            or (i.summary_id is not None and summaries.get(i.summary_id) != key)
        ),
        None,
    )
    return problem, messages


async def resolve_context(scope: RestoreScope, contexts: list[tuple[CustomEntry, ContextData]]) -> Projection | None:
    """The engine id and context items of the last lcm-context entry on the active branch, or None.

    An entry that names a message or summary the store does not have becomes a malformed line (and the
    one before it on the branch is tried).
    """
    branch = {e.id for e in scope.transcript.active_branch()}
    for entry, data in reversed([(e, d) for e, d in contexts if e.id in branch]):
        problem, messages = await _unresolved(scope, data)
        if problem is not None:
            scope.transcript.reject(entry, f"{CONTEXT_TYPE}: item {problem} is not stored under this key")
            continue
        items = [
            RestoredItem(i.ordinal, "message", messages[i.entry_id][0], i.token_count)
            if i.entry_id is not None
            else RestoredItem(i.ordinal, "summary", str(i.summary_id), i.token_count)
            for i in data.items
        ]
        return data.engine_id, items
    return None


CONTEXT_KIND = EntryKind(CONTEXT_TYPE, ContextData)
"""Exported last and resolved by the importer itself: the projection replaces buildSessionContext's view."""
