"""Import OpenClaw JSONL transcripts and agent directories into the store.

What goes where:

- every AgentMessage entry, and the entries that are model context without being messages
  (`custom_message`, `branch_summary`), becomes a `messages` row with ``entry_id``/``parent_entry_id``;
  entries off the active branch are kept with ``on_active_branch = 0``;
- every line of the file is indexed in `transcript_entries` in file order: non-message entries verbatim,
  message entries as their envelope (``type, id, parentId, timestamp`` — the message itself lives in
  `messages`), malformed lines verbatim with ``entry_type = 'malformed'`` and the reason in ``error``;
- each `compaction` on the active branch becomes a `legacy` summary (summarizer ``openclaw-import``)
  with edges to the branch messages it replaced and to the summary it updated, plus a `compactions`
  audit row; the session's `context_items` are what OpenClaw's buildSessionContext shows;
- the ``openclaw-ctx/lcm-*`` `custom` entries export writes (:mod:`openclaw_ctx.transcripts.lcm`)
  restore summaries (lossless-claw's `leaf`/`condensed` nodes, and runtime-written `legacy` ones, which
  their `compaction` entry then stands for) with their ids and edges, `large_content` rows, and the
  session's `context_items` when the branch carries an ``openclaw-ctx/lcm-context`` entry (instead of
  buildSessionContext's view); one that does not validate or names rows the store lacks becomes a
  malformed line;
- a file whose header names a `parentSession` continues its parent's session key; the parent row
  becomes ``rotated`` and the child's ``parent_session_id`` points at it.

Session keys come from `sessions.json` when a whole agent directory is imported (a successor's
ancestors inherit the key). A bare file continues the key of its parent session when that is known,
otherwise it is stored under ``file:<sessionId>``. Re-importing the same files adds nothing: rows are
matched by session id and entry id.
"""

from __future__ import annotations

import asyncio
import functools
import hashlib
import json
import re
from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from sqlalchemy import delete, insert, select, update
from sqlalchemy.ext.asyncio import AsyncConnection

from openclaw_ctx.errors import NotFoundError
from openclaw_ctx.messages import CompactionSummaryMessage
from openclaw_ctx.store.models import ContextItem, Session, Summary, TranscriptEntry
from openclaw_ctx.store.repo import (
    AppendResult,
    NewMessage,
    NewSummary,
    SessionRow,
    active_session,
    append_messages,
    get_session,
    insert_summary,
    message_token_count,
    record_compaction,
    utc_now,
)
from openclaw_ctx.store.store import Store
from openclaw_ctx.tokens import TokenCounter
from openclaw_ctx.transcripts.jsonl import (
    BranchSummaryEntry,
    CompactionEntry,
    CustomMessageEntry,
    Entry,
    MessageEntry,
    SessionHeader,
    Transcript,
    TranscriptLineError,
    context_message,
    iso_to_ms,
    iter_entries,
    read_transcript,
)
from openclaw_ctx.transcripts.lcm import (
    IMPORT_SUMMARIZER,
    Restored,
    resolve_context,
    restore_compactions,
    restore_large_content,
    restore_summaries,
    restore_turns,
    set_engine,
    split_lcm_entries,
)

__all__ = [
    "IMPORT_SUMMARIZER",
    "FileReport",
    "ImportProgress",
    "ImportReport",
    "ProgressCallback",
    "SourceFile",
    "discover",
    "import_paths",
    "import_transcript",
    "legacy_summary_id",
    "parent_from_store",
]

_BATCH = 1000
_COUNTERS = ("entries", "entries_new", "messages_new", "messages_duplicate", "summaries_new", "skipped_lines")
_UUID_TAIL = re.compile(r"([0-9a-fA-F-]{36})$")


@dataclass(frozen=True)
class ImportProgress:
    """Where an import stands: the file being read and the bytes read over all files."""

    file: str
    files_done: int
    files_total: int
    bytes_done: int
    bytes_total: int


ProgressCallback = Callable[[ImportProgress], None]


@dataclass
class FileReport:
    """What importing one file did."""

    path: str
    session_key: str | None = None
    session_id: str | None = None
    parent_session_id: str | None = None
    entries: int = 0
    entries_new: int = 0
    messages_new: int = 0
    messages_duplicate: int = 0
    summaries_new: int = 0
    skipped_lines: int = 0
    error: str | None = None


@dataclass
class ImportReport:
    """Totals of an import, per file, and every skipped line as ``file:line: reason``."""

    files: list[FileReport] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)

    def total(self, name: str) -> int:
        """Sum of one FileReport counter over all files (e.g. ``"messages_new"``)."""
        return sum(int(getattr(f, name)) for f in self.files)

    @property
    def failed_files(self) -> int:
        """Files that could not be imported at all."""
        return sum(1 for f in self.files if f.error)

    @property
    def clean(self) -> bool:
        """True when nothing was skipped."""
        return not self.skipped

    def to_json(self) -> dict[str, Any]:
        """A JSON-ready dict: totals, files and skipped lines."""
        totals = {name: self.total(name) for name in _COUNTERS}
        return {
            "files": len(self.files),
            "failedFiles": self.failed_files,
            **totals,
            "perFile": [asdict(f) for f in self.files],
            "skipped": self.skipped,
        }


@dataclass
class SourceFile:
    """A transcript file to import, with the session key `sessions.json` gives it (if any)."""

    path: Path
    session_key: str | None = None
    header: SessionHeader | None = None
    header_error: str | None = None
    parent_id: str | None = None

    @property
    def size(self) -> int:
        """File size in bytes."""
        return self.path.stat().st_size


def _session_dirs(root: Path) -> list[Path]:
    if (root / "sessions.json").is_file() or any(root.glob("*.jsonl")):
        return [root]
    if (root / "sessions").is_dir():
        return [root / "sessions"]
    base = root / "agents" if (root / "agents").is_dir() else root
    return sorted(d / "sessions" for d in base.iterdir() if (d / "sessions").is_dir())


def _resolve_listed(folder: Path, session_id: str, session_file: Any) -> Path | None:
    candidates: list[Path] = []
    if isinstance(session_file, str) and session_file:
        given = Path(session_file)
        candidates += [given if given.is_absolute() else folder / given, folder / given.name]
    candidates.append(folder / f"{session_id}.jsonl")
    candidates += sorted(folder.glob(f"*_{session_id}.jsonl"))
    return next((c for c in candidates if c.is_file()), None)


def _read_sessions_json(folder: Path, problems: list[str]) -> dict[Path, str]:
    path = folder / "sessions.json"
    if not path.is_file():
        return {}
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        problems.append(f"{path}: not valid JSON ({exc}); its files are imported as bare transcripts")
        return {}
    if not isinstance(data, dict):
        problems.append(f"{path}: expected an object of session keys; its files are imported as bare transcripts")
        return {}
    keyed: dict[Path, str] = {}
    for key, entry in data.items():
        session_id = entry.get("sessionId") if isinstance(entry, dict) else None
        if not isinstance(session_id, str) or not session_id:
            problems.append(f"{path}: session key {key!r} has no sessionId")
            continue
        file = _resolve_listed(folder, session_id, entry.get("sessionFile"))
        if file is None:
            problems.append(f"{path}: session key {key!r}: transcript for {session_id} not found")
            continue
        keyed[file.resolve()] = key
    return keyed


def discover(paths: Iterable[str | Path]) -> tuple[list[SourceFile], list[str]]:
    """The transcript files under `paths` (files, session dirs, agent dirs) and any problems found.

    Raises:
        NotFoundError: a path does not exist.
    """
    found: dict[Path, SourceFile] = {}
    problems: list[str] = []
    for raw in paths:
        path = Path(raw).expanduser()
        if path.name == "sessions.json" and path.is_file():
            path = path.parent
        if path.is_file():
            found.setdefault(path.resolve(), SourceFile(path.resolve()))
            continue
        if not path.is_dir():
            raise NotFoundError(f"{path}: no such file or directory")
        files = 0
        for folder in _session_dirs(path):
            keyed = _read_sessions_json(folder, problems)
            for file in sorted(folder.glob("*.jsonl")):
                resolved = file.resolve()
                source = found.setdefault(resolved, SourceFile(resolved))
                source.session_key = keyed.get(resolved, source.session_key)
                files += 1
        if not files:
            problems.append(f"{path}: no transcripts (*.jsonl) found")
    return list(found.values()), problems


def _read_header(source: SourceFile) -> None:
    try:
        first = next(iter_entries(source.path), None)
    except OSError as exc:
        source.header_error = f"cannot read: {exc}"
        return
    if isinstance(first, SessionHeader):
        source.header = first
    elif isinstance(first, TranscriptLineError):
        source.header_error = f"no usable session header ({first})"
    else:
        source.header_error = "no session header"


def _parent_candidates(parent: str) -> tuple[str, str]:
    name = Path(parent).name
    stem = name[:-6] if name.endswith(".jsonl") else name
    match = _UUID_TAIL.search(stem)
    return name, match.group(1) if match else stem.rsplit("_", 1)[-1]


def _link_chain(sources: list[SourceFile]) -> list[SourceFile]:
    """Resolve parents among the sources, spread keys to ancestors, order parents first."""
    by_name = {s.path.name: s for s in sources if s.header}
    by_id = {s.header.id: s for s in sources if s.header}
    parents: dict[str, SourceFile] = {}
    for source in sources:
        if source.header and source.header.parent_session:
            name, guessed_id = _parent_candidates(source.header.parent_session)
            parent = by_name.get(name) or by_id.get(guessed_id)
            if parent is not None and parent is not source:
                parents[source.header.id] = parent
                source.parent_id = parent.header.id if parent.header else None
    for source in sources:
        current, key, seen = source, source.session_key, set()
        while key and current.header and current.header.id in parents and id(current) not in seen:
            seen.add(id(current))
            current = parents[current.header.id]
            current.session_key = current.session_key or key

    def depth(s: SourceFile) -> int:
        n, current = 0, s
        while current.header and current.header.id in parents and n < len(sources):
            current, n = parents[current.header.id], n + 1
        return n

    return sorted(sources, key=lambda s: (depth(s), str(s.path)))


async def import_paths(
    store: Store, paths: Iterable[str | Path], *, progress: ProgressCallback | None = None
) -> ImportReport:
    """Import transcript files and agent directories (see the module docstring for the mapping).

    Args:
        store: an open :class:`openclaw_ctx.store.store.Store`.
        paths: JSONL files, `sessions/` directories, agent directories or an `agents/` root.
        progress: called as bytes are read and after each file.

    Returns:
        What was imported, per file, and every skipped line as ``file:line: reason``.

    Raises:
        NotFoundError: a path does not exist.
    """
    sources, problems = await asyncio.to_thread(discover, list(paths))
    report = ImportReport(skipped=list(problems))
    for source in sources:
        await asyncio.to_thread(_read_header, source)
    ordered = _link_chain(sources)
    sizes = await asyncio.to_thread(lambda: [s.size for s in ordered])
    total = sum(sizes)
    done = 0

    def tick(name: str, files_done: int, amount: int = 0) -> None:
        nonlocal done
        done += amount
        if progress is not None:
            progress(ImportProgress(name, files_done, len(ordered), done, total))

    for index, (source, size) in enumerate(zip(ordered, sizes, strict=True)):
        file_report = FileReport(path=str(source.path))
        report.files.append(file_report)
        if source.header is None:
            file_report.error = source.header_error or "no session header"
            report.skipped.append(f"{source.path}:1: {file_report.error}; file skipped")
            tick(str(source.path), index + 1, size)
            continue
        before = done
        transcript = await asyncio.to_thread(
            read_transcript, source.path, on_bytes=functools.partial(tick, str(source.path), index)
        )
        async with store.transaction() as conn:
            if source.parent_id is None and source.header.parent_session:
                source.parent_id = await parent_from_store(conn, *_parent_candidates(source.header.parent_session))
            await import_transcript(conn, store.counter, transcript, source, file_report)
        report.skipped.extend(str(e) for e in transcript.errors)
        if file_report.error:
            report.skipped.append(f"{source.path}:1: {file_report.error}; file skipped")
        tick(str(source.path), index + 1, size - (done - before))
    return report


# --- writing one transcript ------------------------------------------------------------------------


def legacy_summary_id(session_key: str, entry_id: str) -> str:
    """The summary id a compaction entry imports as: stable, so re-imports find it."""
    return "sum_" + hashlib.sha256(f"{session_key}\0{entry_id}".encode()).hexdigest()[:16]


def _store_time(iso: str | None) -> str | None:
    ms = iso_to_ms(iso)
    if ms is None:
        return None
    return datetime.fromtimestamp(ms / 1000, UTC).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"


async def parent_from_store(conn: AsyncConnection, name: str, guessed_id: str) -> str | None:
    """The stored session a `parentSession` path names (by file name, else by the id in it)."""
    found = await conn.scalar(
        select(Session.session_id).where(
            (Session.session_id == guessed_id) | Session.session_file.like(f"%{name}") | (Session.session_file == name)
        )
    )
    return found


async def _session_for(conn: AsyncConnection, source: SourceFile, report: FileReport) -> SessionRow | None:
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
    key = source.session_key or f"file:{header.id}"
    parent = source.parent_id
    if parent is not None and await conn.scalar(select(Session.session_id).where(Session.session_id == parent)) is None:
        parent = None
    values: dict[str, Any] = {
        "session_id": header.id,
        "session_key": key,
        "session_file": str(source.path),
        "parent_session_id": parent,
        "rotation_reason": "openclaw-transcript-rotation" if parent else None,
        "status": "archived",
        "engine_id": "legacy",
        "cwd": header.cwd,
        "meta_json": json.dumps({"header": header.raw, "importedFrom": str(source.path)}, ensure_ascii=False),
    }
    created = _store_time(header.timestamp)
    if created:
        values["created_at"] = values["updated_at"] = created
    await conn.execute(insert(Session).values(**values))
    return await get_session(conn, header.id)


async def _settle_status(conn: AsyncConnection, session: SessionRow) -> None:
    """Parents of imported successors are rotated; the newest leaf becomes active if the key has none."""
    await conn.execute(
        update(Session)
        .where(
            Session.session_key == session.session_key,
            Session.status != "rotated",
            Session.session_id.in_(
                select(Session.parent_session_id).where(
                    Session.session_key == session.session_key, Session.parent_session_id.is_not(None)
                )
            ),
        )
        .values(status="rotated", updated_at=utc_now())
    )
    has_child = await conn.scalar(select(Session.session_id).where(Session.parent_session_id == session.session_id))
    active = await active_session(conn, session.session_key)
    if has_child is None and active is None:
        await conn.execute(update(Session).where(Session.session_id == session.session_id).values(status="active"))


def _context_like(entry: Entry) -> bool:
    return isinstance(entry, MessageEntry | CustomMessageEntry | BranchSummaryEntry)


async def _write_messages(
    conn: AsyncConnection,
    counter: TokenCounter,
    session: SessionRow,
    t: Transcript,
    active: set[str],
    report: FileReport,
) -> dict[str, AppendResult]:
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


def _entry_row(session_id: str, path: str, entry: Entry, active: set[str]) -> dict[str, Any]:
    raw = entry.source if entry.source is not None else json.dumps(entry.raw, ensure_ascii=False, separators=(",", ":"))
    return {
        "session_id": session_id,
        "entry_id": entry.id,
        "parent_entry_id": entry.parent_id,
        "entry_type": entry.type,
        "raw_json": raw,
        "source_file": path,
        "line_no": entry.line_no,
        "error": None,
        "on_active_branch": int(entry.id in active),
    }


async def _write_entries(conn: AsyncConnection, session: SessionRow, t: Transcript, active: set[str]) -> int:
    sid = session.session_id
    known = set(
        (await conn.execute(select(TranscriptEntry.entry_id).where(TranscriptEntry.session_id == sid))).scalars()
    )
    rows = [_entry_row(sid, t.path, e, active) for e in t.entries if e.id not in known]
    broken = {
        (line_no, raw)
        for line_no, raw in await conn.execute(
            select(TranscriptEntry.line_no, TranscriptEntry.raw_json).where(
                TranscriptEntry.session_id == sid, TranscriptEntry.entry_type == "malformed"
            )
        )
    }
    rows += [
        {
            "session_id": sid,
            "entry_id": None,
            "parent_entry_id": e.parent_id,
            "entry_type": "malformed",
            "raw_json": e.raw,
            "source_file": t.path,
            "line_no": e.line_no,
            "error": e.reason,
            "on_active_branch": 0,
        }
        for e in t.errors
        if (e.line_no, e.raw) not in broken
    ]
    for start in range(0, len(rows), _BATCH):
        await conn.execute(insert(TranscriptEntry), rows[start : start + _BATCH])
    return len(rows)


async def _write_summaries(
    conn: AsyncConnection,
    counter: TokenCounter,
    session: SessionRow,
    path: list[Entry],
    ids: dict[str, AppendResult],
    restored: Restored,
    *,
    hold: frozenset[str] = frozenset(),
) -> tuple[dict[str, str], int]:
    """A legacy summary per compaction on the branch; returns entry id → summary id and the count created.

    A compaction entry that stands for a summary restored from its lcm-summary entry keeps that summary
    (its audit row travels as a compaction-record entry). Ids in `hold` (summaries still to be restored)
    are not built, nor is any legacy summary chained after one; a later call builds those.
    """
    compactions = [(i, e) for i, e in enumerate(path) if isinstance(e, CompactionEntry)]
    wanted = {
        e.id: restored.by_compaction.get(e.id) or legacy_summary_id(session.session_key, e.id) for _, e in compactions
    }
    existing = set(
        (await conn.execute(select(Summary.summary_id).where(Summary.summary_id.in_(list(wanted.values()))))).scalars()
    )
    position = {e.id: i for i, e in enumerate(path)}
    start, previous, created = 0, None, 0
    pending: set[str] = set()
    for index, entry in compactions:
        assert isinstance(entry, CompactionEntry)
        end = min(position.get(entry.first_kept_entry_id or "", index), index)
        summary_id = wanted[entry.id]
        if summary_id not in existing:
            if summary_id in hold or previous in pending:
                pending.add(summary_id)
            else:
                await _insert_legacy(conn, counter, session, entry, path[start:end], ids, previous, summary_id)
                existing.add(summary_id)
                created += 1
        start, previous = max(start, end), summary_id
    return wanted, created


async def _insert_legacy(
    conn: AsyncConnection,
    counter: TokenCounter,
    session: SessionRow,
    entry: CompactionEntry,
    covered: list[Entry],
    ids: dict[str, AppendResult],
    previous: str | None,
    summary_id: str,
) -> None:
    sources = [e for e in covered if e.id in ids]
    below = (0, 0)
    if previous is not None:
        row = (
            await conn.execute(
                select(Summary.descendant_count, Summary.descendant_token_count).where(Summary.summary_id == previous)
            )
        ).first()
        below = (row[0], row[1]) if row else below
    tokens = sum(ids[e.id].token_count for e in sources)
    stamps = sorted(s for s in (_store_time(e.timestamp) for e in sources) if s)
    await insert_summary(
        conn,
        session,
        NewSummary(
            kind="legacy",
            content=entry.summary,
            token_count=message_token_count(CompactionSummaryMessage(summary=entry.summary), counter),
            summarizer=IMPORT_SUMMARIZER,
            source_message_ids=[ids[e.id].message_id for e in sources],
            source_summary_ids=[previous] if previous else [],
            earliest_at=stamps[0] if stamps else None,
            latest_at=stamps[-1] if stamps else None,
            descendant_count=len(sources) + below[0],
            descendant_token_count=tokens + below[1],
            source_message_token_count=tokens,
            details={
                "compactionEntryId": entry.id,
                "firstKeptEntryId": entry.first_kept_entry_id,
                "tokensBefore": entry.tokens_before,
                "fromHook": entry.from_hook,
                "details": entry.details,
            },
            summary_id=summary_id,
        ),
    )
    await _record_compaction(conn, session, entry, ids, summary_id)


async def _record_compaction(
    conn: AsyncConnection, session: SessionRow, entry: CompactionEntry, ids: dict[str, AppendResult], summary_id: str
) -> None:
    first_kept = ids.get(entry.first_kept_entry_id or "")
    await record_compaction(
        conn,
        session_key=session.session_key,
        before_session_id=session.session_id,
        after_session_id=session.session_id,
        engine_id="legacy",
        trigger="import",
        ok=1,
        compacted=1,
        tokens_before=entry.tokens_before,
        summary_id=summary_id,
        first_kept_message_id=first_kept.message_id if first_kept else None,
        first_kept_entry_id=entry.first_kept_entry_id,
        summaries_created=1,
        started_at=_store_time(entry.timestamp) or utc_now(),
        details={"source": IMPORT_SUMMARIZER},
    )


async def _write_context(
    conn: AsyncConnection,
    session: SessionRow,
    t: Transcript,
    ids: dict[str, AppendResult],
    summaries: dict[str, str],
    changed: bool,
    projection: tuple[str | None, list[dict[str, Any]]] | None,
) -> None:
    """Replace the session's context items (only when something changed).

    With an lcm-context entry on the branch (`projection`) they are what it records, and the session
    becomes that engine's; otherwise they are buildSessionContext's view.
    """
    if (
        not changed
        and await conn.scalar(select(ContextItem.ordinal).where(ContextItem.session_id == session.session_id))
        is not None
    ):
        return
    if projection is not None:
        engine_id, items = projection
        await set_engine(conn, session, engine_id)
    else:
        items = await _built_context(conn, session, t, ids, summaries)
    await conn.execute(delete(ContextItem).where(ContextItem.session_id == session.session_id))
    for start in range(0, len(items), _BATCH):
        await conn.execute(insert(ContextItem), items[start : start + _BATCH])


async def _built_context(
    conn: AsyncConnection,
    session: SessionRow,
    t: Transcript,
    ids: dict[str, AppendResult],
    summaries: dict[str, str],
) -> list[dict[str, Any]]:
    """buildSessionContext's view of the branch as `context_items` rows."""
    token_of: dict[str, int] = {}
    if summaries:
        rows = await conn.execute(
            select(Summary.summary_id, Summary.token_count).where(Summary.summary_id.in_(list(summaries.values())))
        )
        token_of = {row.summary_id: row.token_count for row in rows}
    items: list[dict[str, Any]] = []
    for entry in t.context_entries():
        base = {"session_id": session.session_id, "ordinal": len(items), "message_id": None, "summary_id": None}
        if isinstance(entry, CompactionEntry):
            summary_id = summaries[entry.id]
            items.append(base | {"item_type": "summary", "summary_id": summary_id, "token_count": token_of[summary_id]})
        elif entry.id in ids:
            result = ids[entry.id]
            items.append(
                base | {"item_type": "message", "message_id": result.message_id, "token_count": result.token_count}
            )
    return items


async def import_transcript(
    conn: AsyncConnection, counter: TokenCounter, t: Transcript, source: SourceFile, report: FileReport
) -> None:
    """Write one read transcript in the caller's transaction; fills `report`."""
    lcm = split_lcm_entries(t)
    report.entries = len(t.entries)
    report.skipped_lines = len(t.errors)
    session = await _session_for(conn, source, report)
    if session is None:
        return
    report.session_key, report.session_id = session.session_key, session.session_id
    report.parent_session_id = session.parent_session_id
    path = t.active_branch()
    active = {e.id for e in path}
    ids = await _write_messages(conn, counter, session, t, active, report)
    await restore_large_content(conn, session, t, lcm)
    # Legacy summaries rebuilt from compaction entries first: restored DAG nodes may be built on them
    # (a history migrated to lossless-claw); those stored as lcm-summary entries wait for their rows.
    planned = {d.compaction_entry_id: d.summary_id for _, d in lcm.summaries if d.compaction_entry_id is not None}
    _, early = await _write_summaries(
        conn, counter, session, path, ids, Restored(set(), planned), hold=frozenset(planned.values())
    )
    restored = await restore_summaries(conn, session, t, lcm)
    summaries, legacy = await _write_summaries(conn, counter, session, path, ids, restored)
    report.summaries_new = len(restored.created) + early + legacy
    await restore_compactions(conn, session, t, lcm)
    await restore_turns(conn, session, t, lcm)
    projection = await resolve_context(conn, session, t, lcm)
    # Entries are written last: an lcm entry whose references do not resolve is a malformed line.
    report.entries_new = await _write_entries(conn, session, t, active)
    report.entries, report.skipped_lines = len(t.entries), len(t.errors)
    changed = bool(report.messages_new or report.entries_new or report.summaries_new)
    await _write_context(conn, session, t, ids, summaries, changed, projection)
    await _settle_status(conn, session)
