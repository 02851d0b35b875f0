"""The JSONL lines of one exported session.

A session that came from an import is written back line for line: its `transcript_entries` rows in file
order (non-message entries verbatim, message envelopes joined with their stored message), followed by
any message the runtime appended since. A session the runtime created is written from its messages,
with `compaction` entries regenerated from its `legacy` summary nodes the way OpenClaw writes them:
appended to the compacted session's file, and repeated after the kept messages at the start of the
successor's file. The rows a transcript cannot otherwise hold are appended as `custom` entries of the
registered kinds (:mod:`openclaw_ctx.transcripts.custom`) unless the replayed lines already hold them.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncConnection

from openclaw_ctx._time import iso_from_ms
from openclaw_ctx.store.models import Compaction, ContextItem, Message, Session, Summary, TranscriptEntry
from openclaw_ctx.store.repo import SessionRow
from openclaw_ctx.transcripts.custom import (
    CHUNK,
    CONTEXT_TYPE,
    SUMMARY_KIND,
    EntryKind,
    EntryKinds,
    ExportNames,
    context_data,
    summary_data,
)
from openclaw_ctx.transcripts.entries import TRANSCRIPT_VERSION, CompactionEntry
from openclaw_ctx.transcripts.jsonl import dumps, read_transcript
from openclaw_ctx.transcripts.legacy_summaries import IMPORT_SUMMARIZER

__all__ = ["session_lines"]


def _compaction_entry_id(summary_id: str) -> str:
    return hashlib.sha256(summary_id.encode()).hexdigest()[:8]


def _entry_id(entry_id: str | None, message_id: int) -> str:
    # Messages the runtime wrote without a transcript entry id get a stable one from their row id.
    return entry_id or f"m{message_id:07x}"


_NAMES = ExportNames(_entry_id, _compaction_entry_id)


@dataclass
class _Lines:
    """Lines being built for one file, tracking the last entry id (the next parentId)."""

    kinds: EntryKinds
    lines: list[str] = field(default_factory=list)
    leaf: str | None = None
    ids: set[str] = field(default_factory=set)
    messages: int = 0
    # Rows already written as custom entries (by kind and row key), and the last lcm-context's data.
    written: set[tuple[str, str]] = field(default_factory=set)
    context: Any = None

    def add(self, obj: dict[str, Any], *, raw: str | None = None) -> None:
        self.lines.append(raw if raw is not None else dumps(obj))
        self.leaf = obj.get("id") or self.leaf
        if obj.get("id"):
            self.ids.add(str(obj["id"]))
        data = obj.get("data") if obj.get("type") == "custom" else None
        custom_type = obj.get("customType")
        kind = self.kinds.get(custom_type) if isinstance(custom_type, str) else None
        if kind is not None and kind.row_key is not None and isinstance(data, dict):
            self.written.add((kind.custom_type, kind.row_key(data)))
        elif custom_type == CONTEXT_TYPE:
            self.context = data

    def row(self, kind: EntryKind[Any], data: dict[str, Any], fallback_stamp: str) -> None:
        """Append a custom entry for one row unless the file already has it."""
        assert kind.row_key is not None
        key = kind.row_key(data)
        if (kind.custom_type, key) not in self.written:
            stamp = (data.get(kind.stamp) if kind.stamp else None) or fallback_stamp
            self.add_custom(kind.custom_type, data, stamp, key)

    def add_custom(self, custom_type: str, data: dict[str, Any], timestamp: str, seed: str) -> None:
        """Append a `custom` entry (extension state, never model context) at the leaf, with a stable id."""
        digest = hashlib.sha256(f"{custom_type}\0{seed}".encode()).hexdigest()
        entry_id = next((digest[:n] for n in (8, 16) if digest[:n] not in self.ids), digest)
        entry = {"type": "custom", "id": entry_id, "parentId": self.leaf, "timestamp": timestamp}
        self.add(entry | {"customType": custom_type, "data": data})


async def _header(conn: AsyncConnection, session: SessionRow, parent_path: str | None) -> str:
    """The header line: as it was read when nothing in it changed, else written from its keys."""
    meta_json, cwd = (
        await conn.execute(select(Session.meta_json, Session.cwd).where(Session.session_id == session.session_id))
    ).one()
    meta = json.loads(meta_json) if meta_json else {}
    header = dict(meta.get("header") or {})
    if not header:
        header = {"type": "session", "version": TRANSCRIPT_VERSION, "id": session.session_id}
        header["timestamp"] = session.created_at
        header["cwd"] = cwd or ""
    if parent_path is not None:
        header["parentSession"] = parent_path
    if isinstance(header.get("version"), int) and header["version"] < TRANSCRIPT_VERSION:
        header["version"] = TRANSCRIPT_VERSION  # its lines were upgraded on import (ids, custom messages)
    line = meta.get("headerLine")
    return line if isinstance(line, str) and json.loads(line) == header else dumps(header)


async def _messages_by_entry(conn: AsyncConnection, session_key: str, entry_ids: list[str]) -> dict[str, str]:
    found: dict[str, str] = {}
    for start in range(0, len(entry_ids), CHUNK):
        chunk = entry_ids[start : start + CHUNK]
        rows = await conn.execute(
            select(Message.entry_id, Message.message_json).where(
                Message.session_key == session_key, Message.entry_id.in_(chunk)
            )
        )
        found.update({e: m for e, m in rows if e is not None})
    return found


async def _stored_lines(conn: AsyncConnection, session: SessionRow, out: _Lines) -> None:
    rows = (
        await conn.execute(
            select(TranscriptEntry.entry_type, TranscriptEntry.raw_json, TranscriptEntry.source_line)
            .where(TranscriptEntry.session_id == session.session_id, TranscriptEntry.entry_type != "malformed")
            .order_by(TranscriptEntry.line_no, TranscriptEntry.row_id)
        )
    ).all()
    parsed = [json.loads(raw) for _, raw, _ in rows]
    # A message row holds its envelope; one that kept its `message` (a `system` message, never stored as a
    # message) is a verbatim line like any other entry.
    envelopes = [
        obj for (kind, _, _), obj in zip(rows, parsed, strict=True) if kind == "message" and "message" not in obj
    ]
    messages = await _messages_by_entry(conn, session.session_key, [str(e.get("id")) for e in envelopes])
    for (kind, raw, source_line), envelope in zip(rows, parsed, strict=True):
        if kind != "message" or "message" in envelope:
            out.add(envelope, raw=raw)
            continue
        stored = messages.get(str(envelope.get("id")))
        if stored is not None:
            # Messages are never rewritten, so the line as read is still the entry: written back byte for byte.
            out.add({**envelope, "message": json.loads(stored)}, raw=source_line)
            out.messages += 1


def _message_entry(out: _Lines, entry_id: str | None, message_id: int, message_json: str, created: str) -> None:
    message = json.loads(message_json)
    stamp = message.get("timestamp") if isinstance(message.get("timestamp"), int) else None
    entry_id = _entry_id(entry_id, message_id)
    out.add(
        {
            "type": "message",
            "id": entry_id,
            "parentId": out.leaf,
            "timestamp": iso_from_ms(stamp) or created,
            "message": message,
        }
    )
    out.messages += 1


async def _native_lines(conn: AsyncConnection, session: SessionRow, out: _Lines) -> None:
    """Messages the runtime wrote to this session that no imported line accounts for, and its compactions."""
    # Kept messages from earlier sessions open a successor's file, then the compaction it continues from.
    items = (
        await conn.execute(
            select(ContextItem.item_type, ContextItem.summary_id, Summary.kind, Message.session_id, Message.entry_id)
            .add_columns(Message.message_id, Message.message_json, Message.created_at)
            .outerjoin(Message, Message.message_id == ContextItem.message_id)
            .outerjoin(Summary, Summary.summary_id == ContextItem.summary_id)
            .where(ContextItem.session_id == session.session_id)
            .order_by(ContextItem.ordinal)
        )
    ).all()
    opening = [r for r in items if r.kind == "legacy"][:1]
    if not out.lines and opening and session.parent_session_id:
        kept = [r for r in items if r.item_type == "message" and r.session_id != session.session_id]
        for row in kept:
            _message_entry(out, row.entry_id, row.message_id, row.message_json, row.created_at)
        first = _entry_id(kept[0].entry_id, kept[0].message_id) if kept else None
        await _summary_lines(conn, session, out, [str(opening[0].summary_id)])
        await _compaction_lines(conn, [str(opening[0].summary_id)], out, first)
    rows = await conn.execute(
        select(Message.entry_id, Message.message_id, Message.message_json, Message.created_at)
        .where(Message.session_id == session.session_id)
        .order_by(Message.seq)
    )
    for entry_id, message_id, message_json, created in rows:
        if entry_id is None or entry_id not in out.ids:
            _message_entry(out, entry_id, message_id, message_json, created)
    await _summary_lines(conn, session, out)
    done = (
        await conn.execute(
            select(Compaction.summary_id, Message.entry_id, Message.message_id)
            .outerjoin(Message, Message.message_id == Compaction.first_kept_message_id)
            .join(Summary, Summary.summary_id == Compaction.summary_id)
            .where(
                Compaction.before_session_id == session.session_id,
                Summary.kind == "legacy",
                Summary.summarizer != IMPORT_SUMMARIZER,
            )
            .order_by(Compaction.compaction_id)
        )
    ).all()
    for summary_id, first_entry, first_message in done:
        first = _entry_id(first_entry, first_message) if first_message is not None else None
        await _compaction_lines(conn, [str(summary_id)], out, first)


async def _compaction_lines(conn: AsyncConnection, summary_ids: list[str], out: _Lines, first_kept: str | None) -> None:
    for summary_id in summary_ids:
        entry_id = _compaction_entry_id(summary_id)
        if entry_id in out.ids:
            continue
        content, created, summarizer = (
            await conn.execute(
                select(Summary.content, Summary.created_at, Summary.summarizer).where(Summary.summary_id == summary_id)
            )
        ).one()
        if summarizer == IMPORT_SUMMARIZER:
            continue
        before = await conn.scalar(select(Compaction.tokens_before).where(Compaction.summary_id == summary_id))
        entry: dict[str, Any] = {"type": "compaction", "id": entry_id, "parentId": out.leaf, "timestamp": created}
        entry |= {"summary": content, "firstKeptEntryId": first_kept, "tokensBefore": int(before or 0)}
        out.add(entry)


async def _summary_lines(
    conn: AsyncConnection, session: SessionRow, out: _Lines, summary_ids: list[str] | None = None
) -> None:
    """Custom entries for the rows of this session (or for the given summaries) not written yet.

    A runtime-written legacy summary gets one too, before its `compaction` entry, so it keeps its id
    and edges on import. With the session's own summaries come the rows of every other exported kind
    (large content first, then its `turns` and the `compactions` rows that rotated into it).
    """
    if summary_ids is not None:
        for data in await summary_data(conn, _NAMES, summary_ids=summary_ids):
            out.row(SUMMARY_KIND, data, session.created_at)
        return
    for kind in out.kinds:
        if kind.export_rows is not None:
            for data in await kind.export_rows(conn, session, _NAMES):
                out.row(kind, data, session.created_at)


async def _context_line(conn: AsyncConnection, session: SessionRow, out: _Lines) -> None:
    """For a lossless projection, an lcm-context entry with its context items (unless the last one says the same)."""
    data, lossless = await context_data(conn, session, _entry_id)
    # A rotated session keeps the context it had when it rotated, while its file ends with the
    # compaction that rotated it (as OpenClaw's files do): import would rebuild the view after it.
    wanted = lossless or (session.status == "rotated" and _shape(data) != _file_view(session, out.lines))
    context = data if wanted else None
    if context is not None and context != out.context:
        updated = await conn.scalar(select(Session.updated_at).where(Session.session_id == session.session_id))
        out.add_custom(CONTEXT_TYPE, context, updated or session.created_at, f"{session.session_id}\0{dumps(context)}")


def _shape(context: dict[str, Any]) -> list[str | None]:
    """Context items as entry ids, None for a summary."""
    return [None if item.get("summaryId") else item.get("entryId") for item in context.get("items", [])]


def _file_view(session: SessionRow, lines: list[str]) -> list[str | None]:
    """What import rebuilds from these lines (buildSessionContext), in the shape of :func:`_shape`."""
    header = dumps({"type": "session", "version": 3, "id": session.session_id, "timestamp": session.created_at})
    transcript = read_transcript(session.session_id, lines=(line.encode() for line in [header, *lines]))
    return [None if isinstance(e, CompactionEntry) else e.id for e in transcript.context_entries()]


async def session_lines(
    conn: AsyncConnection, session: SessionRow, parent_path: str | None, kinds: EntryKinds
) -> tuple[list[str], int]:
    """The JSONL lines of one session (header first) and how many of them are messages."""
    out = _Lines(kinds)
    await _stored_lines(conn, session, out)
    await _native_lines(conn, session, out)
    await _context_line(conn, session, out)
    return [await _header(conn, session, parent_path), *out.lines], out.messages
