"""Export stored sessions as OpenClaw JSONL (v3) transcripts.

A session that came from an import is written back line for line: its `transcript_entries` rows in file
order (non-message entries verbatim, message envelopes joined with their stored message), followed by
any message the runtime appended since. A session the runtime created is written from its messages,
with `compaction` entries regenerated from its `legacy` summary nodes the way OpenClaw writes them:
appended to the compacted session's file, and repeated after the kept messages at the start of the
successor's file. The rows a transcript cannot otherwise hold — the summaries created in the session
(lossless-claw's DAG nodes, and runtime-written legacy ones beside their `compaction` entry), its
externalised large content and, for a lossless projection, its context items — are appended as
`custom` entries (see :mod:`openclaw_ctx.transcripts.lcm`) unless the replayed lines already hold
them. Exporting a session key writes one file per session of its chain (each successor's header
names its predecessor's exported file as `parentSession`) and a `sessions.json` that maps the key to
the newest session, so the directory imports back under the same key.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncConnection

from openclaw_ctx.errors import NotFoundError
from openclaw_ctx.store.models import Compaction, ContextItem, Message, Session, Summary, TranscriptEntry
from openclaw_ctx.store.repo import SessionRow, active_session, get_session, session_chain
from openclaw_ctx.store.store import Store
from openclaw_ctx.transcripts.jsonl import TRANSCRIPT_VERSION, iso_to_ms
from openclaw_ctx.transcripts.lcm import (
    COMPACTION_TYPE,
    CONTEXT_TYPE,
    IMPORT_SUMMARIZER,
    LARGE_CONTENT_TYPE,
    SUMMARY_TYPE,
    TURN_TYPE,
    compaction_data,
    context_data,
    large_content_data,
    summary_data,
    turn_data,
)

__all__ = ["ExportReport", "ExportedFile", "export_session", "session_lines"]


@dataclass(frozen=True)
class ExportedFile:
    """One written transcript."""

    path: str
    session_id: str
    parent_session_id: str | None
    entries: int
    messages: int


@dataclass
class ExportReport:
    """What an export wrote."""

    session_key: str
    files: list[ExportedFile] = field(default_factory=list)
    sessions_json: str | None = None

    def to_json(self) -> dict[str, Any]:
        """A JSON-ready dict."""
        return {
            "sessionKey": self.session_key,
            "sessionsJson": self.sessions_json,
            "files": [f.__dict__ for f in self.files],
        }


def _dumps(obj: Any) -> str:
    try:
        line = json.dumps(obj, ensure_ascii=False, separators=(",", ":"))
        line.encode("utf-8")
        return line
    except UnicodeEncodeError:  # lone surrogates survive only as escapes
        return json.dumps(obj, ensure_ascii=True, separators=(",", ":"))


def _iso(ms: int | None, fallback: str) -> str:
    if ms is None:
        return fallback
    moment = datetime.fromtimestamp(ms / 1000, UTC)
    return moment.strftime("%Y-%m-%dT%H:%M:%S.") + f"{moment.microsecond // 1000:03d}Z"


def _compaction_entry_id(summary_id: str) -> str:
    return hashlib.sha256(summary_id.encode()).hexdigest()[:8]


# What names the row an lcm entry carries, per customType (a file holds each row once).
_ROW_KEY: dict[str, Callable[[dict[str, Any]], str]] = {
    SUMMARY_TYPE: lambda d: str(d.get("summaryId")),
    LARGE_CONTENT_TYPE: lambda d: str(d.get("fileId")),
    TURN_TYPE: lambda d: str(d.get("turn")),
    COMPACTION_TYPE: lambda d: f"{d.get('beforeSessionId')}\0{d.get('trigger')}\0{d.get('startedAt')}",
}


@dataclass
class _Lines:
    """Lines being built for one file, tracking the last entry id (the next parentId)."""

    lines: list[str] = field(default_factory=list)
    leaf: str | None = None
    ids: set[str] = field(default_factory=set)
    messages: int = 0
    # Rows already written as lcm entries (summary ids, large-content file ids), and the last lcm-context's data.
    written: set[tuple[str, str]] = field(default_factory=set)
    context: Any = None

    def add(self, obj: dict[str, Any], *, raw: str | None = None) -> None:
        self.lines.append(raw if raw is not None else _dumps(obj))
        self.leaf = obj.get("id") or self.leaf
        if obj.get("id"):
            self.ids.add(str(obj["id"]))
        data = obj.get("data") if obj.get("type") == "custom" else None
        custom_type = obj.get("customType")
        if custom_type in _ROW_KEY and isinstance(data, dict):
            self.written.add((custom_type, _ROW_KEY[custom_type](data)))
        elif custom_type == CONTEXT_TYPE:
            self.context = data

    def row(self, custom_type: str, data: dict[str, Any], timestamp: str) -> None:
        """Append an lcm entry for one row unless the file already has it."""
        key = _ROW_KEY[custom_type](data)
        if (custom_type, key) not in self.written:
            self.add_custom(custom_type, data, timestamp, key)

    def add_custom(self, custom_type: str, data: dict[str, Any], timestamp: str, seed: str) -> None:
        """Append a `custom` entry (extension state, never model context) at the leaf, with a stable id."""
        digest = hashlib.sha256(f"{custom_type}\0{seed}".encode()).hexdigest()
        entry_id = next((digest[:n] for n in (8, 16) if digest[:n] not in self.ids), digest)
        entry = {"type": "custom", "id": entry_id, "parentId": self.leaf, "timestamp": timestamp}
        self.add(entry | {"customType": custom_type, "data": data})


async def _header(conn: AsyncConnection, session: SessionRow, parent_path: str | None) -> dict[str, Any]:
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
    return header


async def _messages_by_entry(conn: AsyncConnection, session_key: str, entry_ids: list[str]) -> dict[str, str]:
    found: dict[str, str] = {}
    for start in range(0, len(entry_ids), 500):
        chunk = entry_ids[start : start + 500]
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
            select(TranscriptEntry.entry_type, TranscriptEntry.raw_json)
            .where(TranscriptEntry.session_id == session.session_id, TranscriptEntry.entry_type != "malformed")
            .order_by(TranscriptEntry.line_no, TranscriptEntry.row_id)
        )
    ).all()
    envelopes = [json.loads(raw) for kind, raw in rows if kind == "message"]
    messages = await _messages_by_entry(conn, session.session_key, [str(e.get("id")) for e in envelopes])
    pending = iter(envelopes)
    for kind, raw in rows:
        if kind != "message":
            out.add(json.loads(raw), raw=raw)
            continue
        envelope = next(pending)
        stored = messages.get(str(envelope.get("id")))
        if stored is not None:
            out.add({**envelope, "message": json.loads(stored)})
            out.messages += 1


def _entry_id(entry_id: str | None, message_id: int) -> str:
    # Messages the runtime wrote without a transcript entry id get a stable one from their row id.
    return entry_id or f"m{message_id:07x}"


def _message_entry(out: _Lines, entry_id: str | None, message_id: int, message_json: str, created: str) -> None:
    message = json.loads(message_json)
    stamp = message.get("timestamp") if isinstance(message.get("timestamp"), int) else None
    entry_id = _entry_id(entry_id, message_id)
    out.add(
        {"type": "message", "id": entry_id, "parentId": out.leaf, "timestamp": _iso(stamp, created), "message": message}
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
    """lcm entries for the summaries created in this session (or the given ones) not written yet.

    A runtime-written legacy summary gets one too, before its `compaction` entry, so it keeps its id
    and edges on import. With the session's own summaries come its `large_content` rows (first), and
    its `turns` and the `compactions` rows that rotated into it (after).
    """
    where = {"summary_ids": summary_ids} if summary_ids is not None else {"session_id": session.session_id}
    if summary_ids is None:
        for data in await large_content_data(conn, session.session_id, _entry_id):
            out.row(LARGE_CONTENT_TYPE, data, data.get("createdAt") or session.created_at)
    for data in await summary_data(conn, _entry_id, _compaction_entry_id, **where):
        out.row(SUMMARY_TYPE, data, data.get("createdAt") or session.created_at)
    if summary_ids is None:
        for data in await compaction_data(conn, session.session_id, _entry_id):
            out.row(COMPACTION_TYPE, data, data["startedAt"])
        for data in await turn_data(conn, session.session_id):
            out.row(TURN_TYPE, data, data.get("at") or session.created_at)


async def _context_line(conn: AsyncConnection, session: SessionRow, out: _Lines) -> None:
    """For a lossless projection, an lcm-context entry with its context items (unless the last one says the same)."""
    context = await context_data(conn, session, _entry_id)
    if context is not None and context != out.context:
        updated = await conn.scalar(select(Session.updated_at).where(Session.session_id == session.session_id))
        out.add_custom(CONTEXT_TYPE, context, updated or session.created_at, f"{session.session_id}\0{_dumps(context)}")


async def session_lines(conn: AsyncConnection, session: SessionRow, parent_path: str | None) -> tuple[list[str], int]:
    """The JSONL lines of one session (header first) and how many of them are messages."""
    out = _Lines()
    await _stored_lines(conn, session, out)
    await _native_lines(conn, session, out)
    await _context_line(conn, session, out)
    header = await _header(conn, session, parent_path)
    return [_dumps(header), *out.lines], out.messages


def _write_atomic(path: Path, lines: list[str]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    tmp.write_text("".join(line + "\n" for line in lines), encoding="utf-8", newline="\n")
    os.replace(tmp, path)


def _ordered(chain: list[SessionRow]) -> list[SessionRow]:
    ids = {s.session_id for s in chain}
    placed: list[SessionRow] = []
    done: set[str] = set()
    remaining = list(chain)
    while remaining:
        ready = [s for s in remaining if s.parent_session_id not in ids or s.parent_session_id in done]
        ready = ready or remaining[:1]  # a cycle cannot happen through the schema, but never loop forever
        for s in ready:
            placed.append(s)
            done.add(s.session_id)
            remaining.remove(s)
    return placed


def _file_name(session: SessionRow, used: set[str]) -> str:
    name = Path(session.session_file).name if session.session_file else f"{session.session_id}.jsonl"
    if not name.endswith(".jsonl") or name in used:
        name = f"{session.session_id}.jsonl"
    used.add(name)
    return name


def _update_sessions_json(folder: Path, key: str, head: SessionRow, head_path: Path) -> Path:
    path = folder / "sessions.json"
    data: dict[str, Any] = {}
    if path.is_file():
        try:
            loaded = json.loads(path.read_text(encoding="utf-8"))
            data = loaded if isinstance(loaded, dict) else {}
        except (UnicodeDecodeError, json.JSONDecodeError):
            data = {}
    entry = dict(data.get(key) or {})
    updated = iso_to_ms(head.created_at) or 0
    entry.update({"sessionId": head.session_id, "sessionFile": str(head_path), "updatedAt": updated})
    data[key] = entry
    _write_atomic(path, [json.dumps(data, ensure_ascii=False, indent=2)])
    return path


async def export_session(
    store: Store, *, session_key: str | None = None, session_id: str | None = None, out: Path
) -> ExportReport:
    """Write sessions as OpenClaw JSONL v3 transcripts.

    Args:
        store: the open store.
        session_key: export every session of this key's chain into the directory `out`, plus `sessions.json`.
        session_id: export one session; `out` is the file (``*.jsonl``) or a directory to write it in.
        out: where to write.

    Returns:
        The files written.

    Raises:
        NotFoundError: no such session or key.
        ValueError: neither or both of `session_key` and `session_id` given.
    """
    if (session_key is None) == (session_id is None):
        raise ValueError("give exactly one of session_key and session_id")
    out = await asyncio.to_thread(lambda: Path(out).expanduser().absolute())
    async with store.read() as conn:
        if session_id is not None:
            session = await get_session(conn, session_id)
            target = out if out.suffix == ".jsonl" else out / _file_name(session, set())
            lines, messages = await session_lines(conn, session, None)
            await asyncio.to_thread(_write_atomic, target, lines)
            file = ExportedFile(str(target), session.session_id, session.parent_session_id, len(lines) - 1, messages)
            return ExportReport(session.session_key, [file])
        assert session_key is not None
        chain = _ordered(await session_chain(conn, session_key))
        if not chain:
            raise NotFoundError(f"no sessions stored under key {session_key!r}")
        report = ExportReport(session_key)
        paths: dict[str, Path] = {}
        used: set[str] = set()
        for session in chain:
            target = out / _file_name(session, used)
            parent = paths.get(session.parent_session_id or "")
            lines, messages = await session_lines(conn, session, str(parent) if parent else None)
            await asyncio.to_thread(_write_atomic, target, lines)
            paths[session.session_id] = target
            report.files.append(
                ExportedFile(str(target), session.session_id, session.parent_session_id, len(lines) - 1, messages)
            )
        head = await active_session(conn, session_key) or chain[-1]
        written = await asyncio.to_thread(_update_sessions_json, out, session_key, head, paths[head.session_id])
        report.sessions_json = str(written)
    return report
