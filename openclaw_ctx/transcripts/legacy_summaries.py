"""Legacy summaries rebuilt from OpenClaw `compaction` entries on import.

Each `compaction` on the active branch becomes a `legacy` summary (summarizer ``openclaw-import``)
with edges to the branch messages it replaced and to the summary it updated, plus a `compactions`
audit row. A compaction entry that stands for a summary restored from its lcm-summary entry keeps
that summary instead.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Mapping

from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncConnection

from openclaw_ctx._ids import LEGACY_ENGINE_ID
from openclaw_ctx._time import iso_from_ms, ms_from_iso, utc_now
from openclaw_ctx.messages import CompactionSummaryMessage
from openclaw_ctx.store.models import Summary
from openclaw_ctx.store.repo import (
    AppendResult,
    NewSummary,
    SessionRow,
    insert_summary,
    message_token_count,
    record_compaction,
)
from openclaw_ctx.tokens import TokenCounter
from openclaw_ctx.transcripts.entries import CompactionEntry, Entry

__all__ = ["IMPORT_SUMMARIZER", "legacy_summary_id", "store_time", "write_legacy_summaries"]

IMPORT_SUMMARIZER = "openclaw-import"
"""The summarizer of a legacy summary rebuilt from an OpenClaw `compaction` entry (never written as lcm-summary)."""


def legacy_summary_id(session_key: str, entry_id: str) -> str:
    """The summary id a compaction entry imports as: stable, so re-imports find it."""
    return "sum_" + hashlib.sha256(f"{session_key}\0{entry_id}".encode()).hexdigest()[:16]


def store_time(iso: str | None) -> str | None:
    """A transcript timestamp in the store's format (None when absent or unparseable)."""
    return iso_from_ms(ms_from_iso(iso))


async def write_legacy_summaries(
    conn: AsyncConnection,
    counter: TokenCounter,
    session: SessionRow,
    path: list[Entry],
    ids: dict[str, AppendResult],
    by_compaction: Mapping[str, str],
    *,
    hold: frozenset[str] = frozenset(),
    kept_from: Callable[[CompactionEntry], str | None] = lambda entry: entry.first_kept_entry_id,
) -> tuple[dict[str, str], int]:
    """A legacy summary per compaction on the branch; returns entry id → summary id and the count created.

    `by_compaction` names the restored summaries compaction entries stand for (their audit rows travel
    as compaction-record entries). Ids in `hold` (summaries still to be restored) are not built, nor is
    any legacy summary chained after one; a later call builds those. `kept_from` gives the entry a
    compaction keeps from (the transcript's, which moves one naming an opaque record as OpenClaw does).
    """
    compactions = [(i, e) for i, e in enumerate(path) if isinstance(e, CompactionEntry)]
    wanted = {e.id: by_compaction.get(e.id) or legacy_summary_id(session.session_key, e.id) for _, e in compactions}
    existing = set(
        (await conn.execute(select(Summary.summary_id).where(Summary.summary_id.in_(list(wanted.values()))))).scalars()
    )
    position = {e.id: i for i, e in enumerate(path)}
    start, previous, created = 0, None, 0
    pending: set[str] = set()
    for index, entry in compactions:
        assert isinstance(entry, CompactionEntry)
        end = min(position.get(kept_from(entry) or "", index), index)
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
    stamps = sorted(s for s in (store_time(e.timestamp) for e in sources) if s)
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
        engine_id=LEGACY_ENGINE_ID,
        trigger="import",
        ok=1,
        compacted=1,
        tokens_before=entry.tokens_before,
        summary_id=summary_id,
        first_kept_message_id=first_kept.message_id if first_kept else None,
        first_kept_entry_id=entry.first_kept_entry_id,
        summaries_created=1,
        started_at=store_time(entry.timestamp) or utc_now(),
        details={"source": IMPORT_SUMMARIZER},
    )
