"""``openclaw-ctx/lcm-summary``: a summary node and its edges.

``data`` is the whole `summaries` row (``summaryId``, ``kind``, ``depth``, ``content``, ``tokenCount``,
``earliestAt``/``latestAt``, the descendant and source token counts, ``summarizer``, ``model``,
``fallbackLevel``, ``details``, ``createdAt``) plus its edges: ``sourceEntryIds`` (the entry ids of
the messages it covers, in `summary_messages` order) and ``sourceSummaryIds`` (`summary_parents`
order). A node is written in the file of the session it was created in, after every node it was built
from. A `legacy` node the runtime wrote gets one too, with ``compactionEntryId``: the `compaction`
entry OpenClaw reads it as (written after it, and repeated at the start of the successor's file) then
stands for this very node, so a DAG that mixes both kinds keeps its ids and edges.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Annotated, Any, Literal

from pydantic import Field, model_validator
from sqlalchemy import literal_column, select
from sqlalchemy.ext.asyncio import AsyncConnection

from openclaw_ctx.store.models import Message, Summary, SummaryMessage, SummaryParent
from openclaw_ctx.store.repo import NewSummary, SessionRow, insert_summary
from openclaw_ctx.transcripts.custom.lookup import CHUNK, message_ids, summary_keys
from openclaw_ctx.transcripts.custom.registry import EntryData, EntryKind, ExportNames, RestoreScope, dump, from_row
from openclaw_ctx.transcripts.entries import CustomEntry
from openclaw_ctx.transcripts.legacy_summaries import IMPORT_SUMMARIZER

__all__ = ["SUMMARY_KIND", "SUMMARY_TYPE", "Restored", "SummaryData", "loads", "restore_summaries", "summary_data"]

SUMMARY_TYPE = "openclaw-ctx/lcm-summary"
NonNegative = Annotated[int, Field(ge=0)]


class SummaryData(EntryData):
    """The ``data`` of an ``openclaw-ctx/lcm-summary`` entry: one `summaries` row and its edges."""

    summary_id: Annotated[str, Field(min_length=1)]
    kind: Literal["leaf", "condensed", "legacy"]
    depth: NonNegative = 0
    content: str
    token_count: NonNegative
    earliest_at: str | None = None
    latest_at: str | None = None
    descendant_count: NonNegative = 0
    descendant_token_count: NonNegative = 0
    source_message_token_count: NonNegative = 0
    summarizer: str
    model: str | None = None
    fallback_level: str = "none"
    details: Any = None
    created_at: str | None = None
    source_entry_ids: list[str] = Field(default_factory=list)
    source_summary_ids: list[str] = Field(default_factory=list)
    compaction_entry_id: str | None = None  # legacy only: the `compaction` entry this node is written as

    @model_validator(mode="after")
    def _edges_are_sets(self) -> SummaryData:
        for name, ids in (("sourceEntryIds", self.source_entry_ids), ("sourceSummaryIds", self.source_summary_ids)):
            if len(set(ids)) != len(ids):
                raise ValueError(f"{name} lists an id twice")
        if self.summary_id in self.source_summary_ids:
            raise ValueError("sourceSummaryIds names the summary itself")
        return self


def loads(raw: str | None) -> Any:
    """A stored ``*_json`` column as JSON (None stays None)."""
    return json.loads(raw) if raw is not None else None


# --- export ------------------------------------------------------------------------------------------


async def _edges(conn: AsyncConnection, ids: list[str], names: ExportNames) -> tuple[dict[str, list[str]], ...]:
    messages: dict[str, list[str]] = {}
    parents: dict[str, list[str]] = {}
    for start in range(0, len(ids), CHUNK):
        chunk = ids[start : start + CHUNK]
        edges = await conn.execute(
            select(SummaryMessage.summary_id, Message.entry_id, Message.message_id)
            .join(Message, Message.message_id == SummaryMessage.message_id)
            .where(SummaryMessage.summary_id.in_(chunk))
            .order_by(SummaryMessage.summary_id, SummaryMessage.ordinal)
        )
        for summary_id, entry_id, message_id in edges:
            messages.setdefault(summary_id, []).append(names.entry_id_of(entry_id, message_id))
        links = await conn.execute(
            select(SummaryParent.summary_id, SummaryParent.source_summary_id)
            .where(SummaryParent.summary_id.in_(chunk))
            .order_by(SummaryParent.summary_id, SummaryParent.ordinal)
        )
        for summary_id, source in links:
            parents.setdefault(summary_id, []).append(source)
    return messages, parents


async def summary_data(
    conn: AsyncConnection, names: ExportNames, *, session_id: str | None = None, summary_ids: list[str] | None = None
) -> list[dict[str, Any]]:
    """The lcm-summary ``data`` of every summary created in `session_id` (or of `summary_ids`), sources first.

    That is every `leaf` and `condensed` node, and every `legacy` one the runtime wrote (a legacy node
    rebuilt from an imported `compaction` entry is rebuilt from it again). Insertion (rowid) order is a
    valid order: the foreign keys of the edges make a node's sources older.
    """
    rows = (
        await conn.execute(
            select(Summary)
            .where(
                Summary.session_id == session_id if summary_ids is None else Summary.summary_id.in_(summary_ids),
                Summary.summarizer != IMPORT_SUMMARIZER,
            )
            .order_by(literal_column("summaries.rowid"))
        )
    ).all()
    messages, parents = await _edges(conn, [r.summary_id for r in rows], names)
    out = []
    for row in rows:
        data = from_row(
            SummaryData,
            row,
            details=loads(row.details_json),
            source_entry_ids=messages.get(row.summary_id, []),
            source_summary_ids=parents.get(row.summary_id, []),
            compaction_entry_id=names.compaction_id_of(row.summary_id) if row.kind == "legacy" else None,
        )
        dumped = dump(data)
        if data.compaction_entry_id is None:
            del dumped["compactionEntryId"]
        out.append(dumped)
    return out


async def _session_summaries(conn: AsyncConnection, session: SessionRow, names: ExportNames) -> list[dict[str, Any]]:
    return await summary_data(conn, names, session_id=session.session_id)


# --- import ------------------------------------------------------------------------------------------


@dataclass
class Restored:
    """What :func:`restore_summaries` did."""

    created: set[str]
    """Summaries inserted by this import."""
    by_compaction: dict[str, str]
    """``compaction`` entry id → the legacy summary it stands for (inserted now or before)."""


def _problem(data: SummaryData, key: str, messages: dict[str, tuple[int, int]], known: dict[str, str]) -> str | None:
    missing = [e for e in data.source_entry_ids if e not in messages]
    if missing:
        return f"{SUMMARY_TYPE}: source message entry {missing[0]!r} is not stored under this key"
    absent = [s for s in data.source_summary_ids if known.get(s) != key]
    if absent:
        return f"{SUMMARY_TYPE}: source summary {absent[0]!r} is not stored under this key"
    return None


def _new_summary(data: SummaryData, messages: dict[str, tuple[int, int]]) -> NewSummary:
    return NewSummary(
        kind=data.kind,
        content=data.content,
        token_count=data.token_count,
        summarizer=data.summarizer,
        source_message_ids=[messages[e][0] for e in data.source_entry_ids],
        source_summary_ids=list(data.source_summary_ids),
        depth=data.depth,
        model=data.model,
        fallback_level=data.fallback_level,
        earliest_at=data.earliest_at,
        latest_at=data.latest_at,
        descendant_count=data.descendant_count,
        descendant_token_count=data.descendant_token_count,
        source_message_token_count=data.source_message_token_count,
        details=data.details,
        summary_id=data.summary_id,
        created_at=data.created_at,
    )


async def restore_summaries(scope: RestoreScope, nodes: list[tuple[CustomEntry, SummaryData]]) -> Restored:
    """Insert the file's summary nodes that the store lacks, with their edges.

    A node already stored under this key is skipped (re-imports add nothing); one whose sources are
    not stored, or whose id belongs to another key, becomes a malformed line.
    """
    conn, session, t = scope.conn, scope.session, scope.transcript
    messages = await message_ids(conn, session.session_key, (e for _, d in nodes for e in d.source_entry_ids))
    known = await summary_keys(
        conn, [d.summary_id for _, d in nodes] + [s for _, d in nodes for s in d.source_summary_ids]
    )
    done = Restored(set(), {})
    for entry, data in nodes:
        if data.summary_id in known:
            if known[data.summary_id] != session.session_key:
                stored_under = known[data.summary_id]
                t.reject(entry, f"{SUMMARY_TYPE}: {data.summary_id!r} is already stored under key {stored_under!r}")
            elif data.compaction_entry_id is not None:
                done.by_compaction[data.compaction_entry_id] = data.summary_id
            continue
        problem = _problem(data, session.session_key, messages, known)
        if problem is not None:
            t.reject(entry, problem)
            continue
        await insert_summary(conn, session, _new_summary(data, messages))
        known[data.summary_id] = session.session_key
        done.created.add(data.summary_id)
        if data.compaction_entry_id is not None:
            done.by_compaction[data.compaction_entry_id] = data.summary_id
    return done


SUMMARY_KIND = EntryKind(
    SUMMARY_TYPE,
    SummaryData,
    row_key=lambda d: str(d.get("summaryId")),
    stamp="createdAt",
    export_rows=_session_summaries,
    position=20,
)
"""Restored by the importer itself, between the legacy summaries it rebuilds from `compaction` entries."""
