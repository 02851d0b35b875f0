"""``openclaw-ctx/lcm-large-content``: lossless-claw's `large_content` rows inside OpenClaw transcripts.

``data`` is a `large_content` row (``fileId``, ``entryId`` of the stubbed message, ``kind``, ``name``,
``mimeType``, ``byteSize``, ``tokenCount``, ``stub``, ``stubTokenCount``, ``createdAt``), written in
the file of the message's session. Registered on core's custom-entry kinds through the entry-point
group ``openclaw_ctx.transcript_entries``; without this engine, core imports such an entry as a line
that needs it.
"""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import Field
from sqlalchemy import insert, literal_column, select
from sqlalchemy.ext.asyncio import AsyncConnection

from engines.lossless.models import LargeContent
from openclaw_ctx.store.models import Message
from openclaw_ctx.store.repo import SessionRow
from openclaw_ctx.transcripts import CustomEntry
from openclaw_ctx.transcripts.custom import (
    EntryData,
    EntryKind,
    EntryKinds,
    ExportNames,
    RestoreScope,
    dump,
    from_row,
    message_ids,
)

__all__ = ["LARGE_CONTENT_KIND", "LARGE_CONTENT_TYPE", "LargeContentData", "register"]

LARGE_CONTENT_TYPE = "openclaw-ctx/lcm-large-content"
NonNegative = Annotated[int, Field(ge=0)]


class LargeContentData(EntryData):
    """The ``data`` of an ``openclaw-ctx/lcm-large-content`` entry: one `large_content` row (a stubbed message)."""

    file_id: Annotated[str, Field(min_length=1)]
    entry_id: Annotated[str, Field(min_length=1)]
    kind: str
    name: str | None = None
    mime_type: str | None = None
    byte_size: NonNegative
    token_count: NonNegative
    stub: str
    stub_token_count: NonNegative
    created_at: str | None = None


async def _large_content_rows(conn: AsyncConnection, session: SessionRow, names: ExportNames) -> list[dict[str, Any]]:
    """The data of every externalised message written in the session."""
    rows = (
        await conn.execute(
            select(LargeContent, Message.entry_id.label("entry_id"))
            .join(Message, Message.message_id == LargeContent.message_id)
            .where(Message.session_id == session.session_id)
            .order_by(literal_column("large_content.rowid"))
        )
    ).all()
    return [dump(from_row(LargeContentData, r, entry_id=names.entry_id_of(r.entry_id, r.message_id))) for r in rows]


async def _stored(conn: AsyncConnection, file_ids: list[str], rows_of: list[int]) -> dict[str, tuple[str, int]]:
    """File id → (session key, message id) of the stored rows among these files or messages."""
    rows = await conn.execute(
        select(LargeContent.file_id, LargeContent.session_key, LargeContent.message_id).where(
            LargeContent.file_id.in_(file_ids) | LargeContent.message_id.in_(rows_of)
        )
    )
    return {row.file_id: (row.session_key, row.message_id) for row in rows}


async def _restore(scope: RestoreScope, found: list[tuple[CustomEntry, LargeContentData]]) -> int:
    """Insert the file's `large_content` rows the store lacks; returns how many.

    A row already stored (same file id, same key) is skipped; one whose message is not stored, is
    already externalised under another file id, or whose file id belongs to another key, becomes a
    malformed line.
    """
    conn, key, t = scope.conn, scope.session.session_key, scope.transcript
    messages = await message_ids(conn, key, (d.entry_id for _, d in found))
    stored = await _stored(conn, [d.file_id for _, d in found], [m for m, _ in messages.values()])
    taken = {message_id: file_id for file_id, (_, message_id) in stored.items()}
    created = 0
    for entry, data in found:
        message = messages.get(data.entry_id)
        if data.file_id in stored:
            if stored[data.file_id][0] != key:
                where = stored[data.file_id][0]
                t.reject(entry, f"{LARGE_CONTENT_TYPE}: {data.file_id!r} is already stored under key {where!r}")
            continue
        if message is None:
            t.reject(entry, f"{LARGE_CONTENT_TYPE}: message entry {data.entry_id!r} is not stored under this key")
            continue
        if message[0] in taken:
            t.reject(entry, f"{LARGE_CONTENT_TYPE}: message entry {data.entry_id!r} is stored as {taken[message[0]]}")
            continue
        values = data.model_dump(exclude={"version", "entry_id", "created_at"})
        if data.created_at is not None:
            values["created_at"] = data.created_at
        await conn.execute(insert(LargeContent).values(session_key=key, message_id=message[0], **values))
        stored[data.file_id] = (key, message[0])
        taken[message[0]] = data.file_id
        created += 1
    return created


LARGE_CONTENT_KIND = EntryKind(
    LARGE_CONTENT_TYPE,
    LargeContentData,
    row_key=lambda d: str(d.get("fileId")),
    stamp="createdAt",
    export_rows=_large_content_rows,
    restore=_restore,
    restore_after="messages",
    position=10,
)


def register(kinds: EntryKinds) -> None:
    """Entry point (``openclaw_ctx.transcript_entries``): add the large-content kind."""
    kinds.register(LARGE_CONTENT_KIND)
