"""The rows one imported transcript becomes: its session, messages, indexed lines and context items.

Reads decide what is new; every write goes through the store (:mod:`openclaw_ctx.store.repo` and
:mod:`openclaw_ctx.store.restore`).
"""

from __future__ import annotations

from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncConnection

from openclaw_ctx._ids import LEGACY_ENGINE_ID, LOSSLESS_ENGINE_ID
from openclaw_ctx.store.models import ContextItem, Session, Summary, TranscriptEntry
from openclaw_ctx.store.repo import (
    HOST_ROTATION_REASON,
    AppendResult,
    NewMessage,
    SessionRow,
    append_messages,
    get_session,
)
from openclaw_ctx.store.restore import (
    RestoredItem,
    RestoredSession,
    TranscriptLine,
    append_transcript_lines,
    replace_context_items,
    restore_session,
    set_session_engine,
)
from openclaw_ctx.tokens import TokenCounter
from openclaw_ctx.transcripts.custom import Projection
from openclaw_ctx.transcripts.discover import SourceFile
from openclaw_ctx.transcripts.entries import (
    BranchSummaryEntry,
    CompactionEntry,
    CustomMessageEntry,
    Entry,
    MessageEntry,
)
from openclaw_ctx.transcripts.jsonl import dumps
from openclaw_ctx.transcripts.legacy_summaries import store_time
from openclaw_ctx.transcripts.report import FileReport
from openclaw_ctx.transcripts.tree import Transcript, context_message

__all__ = ["BARE_KEY_PREFIX", "parent_from_store", "session_for", "write_context", "write_lines", "write_messages"]

_BATCH = 1000

BARE_KEY_PREFIX = "file:"
"""The key of a transcript no `sessions.json` names and no parent session gives one: ``file:<sessionId>``."""


async def parent_from_store(conn: AsyncConnection, name: str, guessed_id: str) -> str | None:
    """The stored session a `parentSession` path names (by file name, else by the id in it)."""
    found = await conn.scalar(
        select(Session.session_id).where(
            (Session.session_id == guessed_id) | Session.session_file.like(f"%{name}") | (Session.session_file == name)
        )
    )
    return found


async def session_for(conn: AsyncConnection, source: SourceFile, report: FileReport) -> SessionRow | None:
    """The file's session, created if new; None (and `report.error`) when its id is stored under another key."""
    header = source.header
    assert header is not None
    row = (await conn.execute(select(Session.session_key).where(Session.session_id == header.id))).first()
    if source.session_key is None and source.parent_id is not None:
        source.session_key = await conn.scalar(
            select(Session.session_key).where(Session.session_id == source.parent_id)
        )
    if row is not None:
        if source.session_key is not None and source.session_key != row.session_key:
            report.error = (
                f"session {header.id} is already stored under key {row.session_key!r}, not {source.session_key!r}"
            )
            return None
        return await get_session(conn, header.id)
    parent = source.parent_id
    if parent is not None and await conn.scalar(select(Session.session_id).where(Session.session_id == parent)) is None:
        parent = None
    restored = RestoredSession(
        session_id=header.id,
        session_key=source.session_key or f"{BARE_KEY_PREFIX}{header.id}",
        session_file=str(source.path),
        parent_session_id=parent,
        rotation_reason=HOST_ROTATION_REASON if parent else None,
        status="archived",
        engine_id=LEGACY_ENGINE_ID,
        cwd=header.cwd,
        meta={"header": header.raw, "importedFrom": str(source.path)}
        | ({"headerLine": header.source} if header.source is not None else {})
        | ({"sessionsJson": source.store_entries} if source.store_entries else {}),
        created_at=store_time(header.timestamp),
    )
    return await restore_session(conn, restored)


def _context_like(entry: Entry) -> bool:
    return isinstance(entry, MessageEntry | CustomMessageEntry | BranchSummaryEntry)


async def write_messages(
    conn: AsyncConnection,
    counter: TokenCounter,
    session: SessionRow,
    t: Transcript,
    active: set[str],
    report: FileReport,
) -> dict[str, AppendResult]:
    """Append every entry that is model context as a message (duplicates by entry id are found, not added)."""
    items = []
    for entry in t.entries:
        message = context_message(entry) if _context_like(entry) else None
        if message is not None:
            items.append(NewMessage(message, entry.id, entry.parent_id, on_active_branch=entry.id in active))
    results: dict[str, AppendResult] = {}
    for start in range(0, len(items), _BATCH):
        chunk = items[start : start + _BATCH]
        for item, result in zip(
            chunk, await append_messages(conn, session, chunk, counter, add_to_context=False), strict=True
        ):
            assert item.entry_id is not None
            results[item.entry_id] = result
    report.messages_new = sum(1 for r in results.values() if r.inserted)
    report.messages_duplicate = len(results) - report.messages_new
    return results


def _entry_line(session_id: str, path: str, entry: Entry, active: set[str]) -> TranscriptLine:
    # A message's row holds its envelope (the message is in `messages`), and the line as read only when
    # export would not write it back byte for byte; any other entry's row is its line.
    is_message = isinstance(entry, MessageEntry)
    raw = entry.source if entry.source is not None and not is_message else dumps(entry.raw)
    return TranscriptLine(
        session_id,
        entry.id,
        entry.parent_id,
        entry.type,
        raw,
        path,
        entry.line_no,
        None,
        entry.id in active,
        source_line=entry.source if is_message else None,
    )


async def write_lines(conn: AsyncConnection, session: SessionRow, t: Transcript, active: set[str]) -> int:
    """Index the file's lines not indexed yet (entries by id, malformed lines by number and text); returns how many."""
    sid = session.session_id
    known = set(
        (await conn.execute(select(TranscriptEntry.entry_id).where(TranscriptEntry.session_id == sid))).scalars()
    )
    lines = [_entry_line(sid, t.path, e, active) for e in t.entries if e.id not in known]
    broken = {
        (line_no, raw)
        for line_no, raw in await conn.execute(
            select(TranscriptEntry.line_no, TranscriptEntry.raw_json).where(
                TranscriptEntry.session_id == sid, TranscriptEntry.entry_type == "malformed"
            )
        )
    }
    lines += [
        TranscriptLine(sid, None, e.parent_id, "malformed", e.raw, t.path, e.line_no, e.reason, False)
        for e in t.errors
        if (e.line_no, e.raw) not in broken
    ]
    await append_transcript_lines(conn, lines)
    return len(lines)


async def write_context(
    conn: AsyncConnection,
    session: SessionRow,
    t: Transcript,
    ids: dict[str, AppendResult],
    summaries: dict[str, str],
    changed: bool,
    projection: Projection | None,
) -> None:
    """Replace the session's context items (only when something changed).

    With an lcm-context entry on the branch (`projection`) they are what it records, and the session
    becomes that engine's; a session already holding lossless-claw's projection keeps it, with the new
    messages at its tail; otherwise they are buildSessionContext's view.
    """
    if (
        not changed
        and await conn.scalar(select(ContextItem.ordinal).where(ContextItem.session_id == session.session_id))
        is not None
    ):
        return
    if projection is not None:
        engine_id, items = projection
        await set_session_engine(conn, session, engine_id)
    elif (kept := await _dag_projection(conn, session)) is not None:
        # lossless-claw's projection (its runtime's, or an lcm.db import's) is not rebuilt from the file:
        # the messages new to the store join its tail, as its ingest would add them.
        tail = [ids[e.id] for e in t.context_entries() if e.id in ids and ids[e.id].inserted]
        start = kept[-1].ordinal + 1 if kept else 0
        items = kept + [RestoredItem(start + n, "message", r.message_id, r.token_count) for n, r in enumerate(tail)]
    else:
        items = await _built_context(conn, t, ids, summaries)
    await replace_context_items(conn, session.session_id, items)


async def _dag_projection(conn: AsyncConnection, session: SessionRow) -> list[RestoredItem] | None:
    """The session's context items when they are lossless-claw's projection, else None."""
    rows = (
        await conn.execute(
            select(ContextItem.ordinal, ContextItem.item_type, ContextItem.message_id, ContextItem.summary_id)
            .add_columns(ContextItem.token_count, Summary.kind)
            .outerjoin(Summary, Summary.summary_id == ContextItem.summary_id)
            .where(ContextItem.session_id == session.session_id)
            .order_by(ContextItem.ordinal)
        )
    ).all()
    if not rows or (session.engine_id != LOSSLESS_ENGINE_ID and not any(r.kind in ("leaf", "condensed") for r in rows)):
        return None
    return [
        RestoredItem(r.ordinal, r.item_type, r.message_id if r.item_type == "message" else r.summary_id, r.token_count)
        for r in rows
    ]


async def _built_context(
    conn: AsyncConnection, t: Transcript, ids: dict[str, AppendResult], summaries: dict[str, str]
) -> list[RestoredItem]:
    """buildSessionContext's view of the branch as context items."""
    token_of: dict[str, int] = {}
    if summaries:
        rows = await conn.execute(
            select(Summary.summary_id, Summary.token_count).where(Summary.summary_id.in_(list(summaries.values())))
        )
        token_of = {row.summary_id: row.token_count for row in rows}
    items: list[RestoredItem] = []
    for entry in t.context_entries():
        if isinstance(entry, CompactionEntry):
            summary_id = summaries[entry.id]
            items.append(RestoredItem(len(items), "summary", summary_id, token_of[summary_id]))
        elif entry.id in ids:
            result = ids[entry.id]
            items.append(RestoredItem(len(items), "message", result.message_id, result.token_count))
    return items
