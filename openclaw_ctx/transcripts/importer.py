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
- the ``openclaw-ctx/*`` `custom` entries export writes (:mod:`openclaw_ctx.transcripts.custom`)
  restore summaries (lossless-claw's `leaf`/`condensed` nodes, and runtime-written `legacy` ones, which
  their `compaction` entry then stands for) with their ids and edges, the runtime's turns and audit
  rows, the rows of the kinds engines register (lossless-claw's `large_content`), and the session's
  `context_items` when the branch carries an ``openclaw-ctx/lcm-context`` entry (instead of
  buildSessionContext's view); one that does not validate, names rows the store lacks, or belongs to
  an engine that is not installed becomes a malformed line;
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
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Literal

from sqlalchemy.exc import StatementError
from sqlalchemy.ext.asyncio import AsyncConnection

from openclaw_ctx.errors import HostStoreError, MissingDependencyError
from openclaw_ctx.store.restore import settle_imported_status
from openclaw_ctx.store.store import Store
from openclaw_ctx.tokens import TokenCounter
from openclaw_ctx.transcripts.agent_store import HostSession, read_host_transcript
from openclaw_ctx.transcripts.custom import (
    CONTEXT_KIND,
    SUMMARY_KIND,
    EntryKinds,
    FoundEntries,
    RestoreScope,
    load_entry_kinds,
    resolve_context,
    restore_summaries,
    validate_entries,
)
from openclaw_ctx.transcripts.discover import SourceFile, discover, link_chain, parent_candidates, read_header
from openclaw_ctx.transcripts.jsonl import read_transcript
from openclaw_ctx.transcripts.legacy_summaries import write_legacy_summaries
from openclaw_ctx.transcripts.report import FileReport, ImportProgress, ImportReport, ProgressCallback
from openclaw_ctx.transcripts.tree import Transcript
from openclaw_ctx.transcripts.write import parent_from_store, session_for, write_context, write_lines, write_messages

__all__ = ["import_host_session", "import_paths", "import_transcript"]

UNSTORABLE = (OverflowError, RecursionError, UnicodeError, StatementError)
"""What one file's data can raise on its way into SQLite; storage faults are StoreErrors and stop the import."""


async def import_paths(
    store: Store,
    paths: Iterable[str | Path],
    *,
    progress: ProgressCallback | None = None,
    kinds: EntryKinds | None = None,
) -> ImportReport:
    """Import transcript files and agent directories (see the module docstring for the mapping).

    Args:
        store: an open :class:`openclaw_ctx.store.store.Store`.
        paths: JSONL files, `sessions/` directories, agent directories, an `agents/` root, or an
            OpenClaw agent store (``openclaw-agent.sqlite``, read-only: every session it holds).
        progress: called as bytes are read and after each file.
        kinds: the custom entry kinds to restore (default: core's and every installed engine's).

    Returns:
        What was imported, per file, and every skipped line as ``file:line: reason``.

    Raises:
        NotFoundError: a path does not exist.
    """
    sources, problems, notes = await asyncio.to_thread(discover, list(paths))
    report = ImportReport(skipped=list(problems), notes=notes)
    for source in sources:
        await asyncio.to_thread(read_header, source)
    ordered = link_chain(sources)
    sizes = await asyncio.to_thread(lambda: [s.size for s in ordered])
    total = sum(sizes)
    done = 0

    def tick(name: str, files_done: int, amount: int = 0) -> None:
        nonlocal done
        done += amount
        if progress is not None:
            progress(ImportProgress(name, files_done, len(ordered), done, total))

    for index, (source, size) in enumerate(zip(ordered, sizes, strict=True)):
        file_report = FileReport(path=source.name)
        report.files.append(file_report)
        if source.header is None:
            file_report.error = source.header_error or "no session header"
            report.skipped.append(f"{source.name}:1: {file_report.error}; file skipped")
            tick(source.name, index + 1, size)
            continue
        before = done
        try:
            transcript = await asyncio.to_thread(_read, source, functools.partial(tick, source.name, index))
        except (HostStoreError, MissingDependencyError) as exc:
            file_report.error = str(exc)
            report.skipped.append(f"{source.name}:1: {file_report.error}; session skipped")
            tick(source.name, index + 1, size - (done - before))
            continue
        try:
            async with store.transaction() as conn:
                if source.parent_id is None and source.header.parent_session:
                    source.parent_id = await parent_from_store(conn, *parent_candidates(source.header.parent_session))
                await import_transcript(conn, store.counter, transcript, source, file_report, kinds=kinds)
        except UNSTORABLE as exc:
            # Data the store cannot hold (a value out of SQLite's range): this file is rolled back
            # whole and named; the other files still import.
            reason = f"{type(exc).__name__}: {str(exc)[:200]}"
            file_report.error = f"cannot be stored ({reason}); nothing from it was written"
        report.skipped.extend(str(e) for e in transcript.errors)
        if file_report.error:
            report.skipped.append(f"{source.name}:1: {file_report.error}; file skipped")
        tick(source.name, index + 1, size - (done - before))
    return report


def _read(source: SourceFile, on_bytes: Callable[[int], None]) -> Transcript:
    if source.host is not None:
        return read_host_transcript(source.host, on_bytes=on_bytes)
    return read_transcript(source.path, on_bytes=on_bytes)


async def import_host_session(
    conn: AsyncConnection, counter: TokenCounter, transcript: Transcript, where: HostSession, session_key: str
) -> FileReport:
    """Write a session read from the host's agent store under `session_key`, in the caller's transaction.

    The mapping is a JSONL file's: every message with its entry id, the host's compactions as legacy
    summaries, the context as OpenClaw rebuilds it. Importing the same session again adds only what is
    new. A transcript without a header writes nothing (``report.error`` says why), as does a session
    id stored under another key.
    """
    report = FileReport(path=where.name)
    if transcript.header is None:
        report.error = transcript.errors[0].reason if transcript.errors else "the host holds no such session"
        return report
    source = SourceFile(path=where.store_path, session_key=session_key, header=transcript.header, host=where)
    await import_transcript(conn, counter, transcript, source, report)
    return report


async def _restore_kinds(
    scope: RestoreScope, found: FoundEntries, kinds: EntryKinds, stage: Literal["messages", "summaries"]
) -> None:
    """Restore the rows of the kinds that write their own, once what they need (`stage`) is stored."""
    for kind in kinds.restored_after(stage):
        entries = found.of(kind)
        if entries and kind.restore is not None:
            await kind.restore(scope, entries)


async def import_transcript(
    conn: AsyncConnection,
    counter: TokenCounter,
    t: Transcript,
    source: SourceFile,
    report: FileReport,
    *,
    kinds: EntryKinds | None = None,
) -> None:
    """Write one read transcript in the caller's transaction; fills `report`."""
    kinds = kinds if kinds is not None else load_entry_kinds()
    found = validate_entries(t, kinds)
    report.entries, report.skipped_lines = len(t.entries), len(t.errors)
    session = await session_for(conn, source, report)
    if session is None:
        return
    report.session_key, report.session_id = session.session_key, session.session_id
    report.parent_session_id = session.parent_session_id
    scope = RestoreScope(conn, session, t)
    path = t.active_branch()
    active = {e.id for e in path}
    ids = await write_messages(conn, counter, session, t, active, report)
    await _restore_kinds(scope, found, kinds, "messages")
    # Legacy summaries rebuilt from compaction entries first: restored DAG nodes may be built on them
    # (a history migrated to lossless-claw); those stored as lcm-summary entries wait for their rows.
    nodes = found.of(SUMMARY_KIND)
    planned = {d.compaction_entry_id: d.summary_id for _, d in nodes if d.compaction_entry_id is not None}
    _, early = await write_legacy_summaries(
        conn, counter, session, path, ids, planned, hold=frozenset(planned.values()), kept_from=t.first_kept
    )
    restored = await restore_summaries(scope, nodes)
    summaries, legacy = await write_legacy_summaries(
        conn, counter, session, path, ids, restored.by_compaction, kept_from=t.first_kept
    )
    report.summaries_new = len(restored.created) + early + legacy
    await _restore_kinds(scope, found, kinds, "summaries")
    projection = await resolve_context(scope, found.of(CONTEXT_KIND))
    # Lines are indexed last: an entry whose references do not resolve is a malformed line.
    report.entries_new = await write_lines(conn, session, t, active)
    report.entries, report.skipped_lines = len(t.entries), len(t.errors)
    changed = bool(report.messages_new or report.entries_new or report.summaries_new)
    await write_context(conn, session, t, ids, summaries, changed, projection)
    await settle_imported_status(conn, session)
