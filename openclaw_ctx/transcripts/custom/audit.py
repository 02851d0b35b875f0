"""``openclaw-ctx/turn`` and ``openclaw-ctx/compaction-record``: the runtime's records of a session.

A turn entry is a `turns` row of the session (``turn``, ``assembledTokens``, ``promptTokens``,
``budget``, ``compacted``, ``at``); a compaction-record entry is a `compactions` audit row the runtime
wrote (its columns; the first kept message by ``firstKeptMessageEntryId``), in the file of the
session it rotated to. With them `stats` of an imported key is the original's.
"""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import Field
from sqlalchemy import func, select
from sqlalchemy.ext.asyncio import AsyncConnection

from openclaw_ctx.store.models import Compaction, Message, Session, Turn
from openclaw_ctx.store.repo import SessionRow, record_compaction
from openclaw_ctx.store.restore import RestoredTurn, restore_turns
from openclaw_ctx.transcripts.custom.lookup import message_ids, summary_keys
from openclaw_ctx.transcripts.custom.registry import EntryData, EntryKind, ExportNames, RestoreScope, dump, from_row
from openclaw_ctx.transcripts.custom.summaries import loads
from openclaw_ctx.transcripts.entries import CustomEntry

__all__ = ["COMPACTION_KIND", "COMPACTION_TYPE", "TURN_KIND", "TURN_TYPE", "CompactionData", "TurnData"]

TURN_TYPE = "openclaw-ctx/turn"
COMPACTION_TYPE = "openclaw-ctx/compaction-record"
NonNegative = Annotated[int, Field(ge=0)]


class TurnData(EntryData):
    """The ``data`` of an ``openclaw-ctx/turn`` entry: one `turns` row of the session."""

    turn: Annotated[int, Field(ge=1)]
    assembled_tokens: NonNegative
    budget: NonNegative
    compacted: Annotated[int, Field(ge=0, le=1)] = 0
    at: str | None = None
    prompt_tokens: NonNegative | None = None
    """The prompt tokens the turn sent the model (absent in files from before revision 0005)."""


class CompactionData(EntryData):
    """The ``data`` of an ``openclaw-ctx/compaction-record`` entry: one `compactions` audit row."""

    before_session_id: Annotated[str, Field(min_length=1)]
    after_session_id: str | None = None
    engine_id: str
    trigger: str
    ok: int
    compacted: int
    reason: str | None = None
    tokens_before: int
    tokens_after: int | None = None
    summary_id: str | None = None
    first_kept_message_entry_id: str | None = None
    first_kept_entry_id: str | None = None
    summaries_created: NonNegative = 0
    started_at: Annotated[str, Field(min_length=1)]
    duration_ms: NonNegative = 0
    details: Any = None


# --- turns ---------------------------------------------------------------------------------------------


async def _turn_rows(conn: AsyncConnection, session: SessionRow, names: ExportNames) -> list[dict[str, Any]]:
    """The turn data of the turns whose messages went to the session."""
    rows = (await conn.execute(select(Turn).where(Turn.session_id == session.session_id).order_by(Turn.turn))).all()
    return [dump(from_row(TurnData, r)) for r in rows]


async def _restore_turns(scope: RestoreScope, found: list[tuple[CustomEntry, TurnData]]) -> int:
    """Insert the file's `turns` rows the key lacks; returns how many.

    A turn number the key already has is skipped when it belongs to this session (a re-import) and is
    a malformed line otherwise.
    """
    session = scope.session
    stored = {
        row.turn: row.session_id
        for row in await scope.conn.execute(
            select(Turn.turn, Turn.session_id).where(Turn.session_key == session.session_key)
        )
    }
    turns = []
    for entry, data in found:
        if data.turn in stored:
            if stored[data.turn] != session.session_id:
                reason = f"{TURN_TYPE}: turn {data.turn} of this key is stored for session {stored[data.turn]}"
                scope.transcript.reject(entry, reason)
            continue
        stored[data.turn] = session.session_id
        turns.append(
            RestoredTurn(data.turn, data.assembled_tokens, data.budget, data.compacted, data.at, data.prompt_tokens)
        )
    await restore_turns(scope.conn, session, turns)
    return len(turns)


# --- compaction records --------------------------------------------------------------------------------


async def _compaction_rows(conn: AsyncConnection, session: SessionRow, names: ExportNames) -> list[dict[str, Any]]:
    """The compaction-record data of the runtime's compactions that ended in the session.

    A row lives in the file of the session it rotated to (or of the one it compacted, without a
    rotation), which imports after every row it names. Rows an import derived from `compaction`
    entries (trigger ``import``) are derived again and not written.
    """
    rows = (
        await conn.execute(
            select(Compaction, Message.entry_id.label("kept_entry_id"))
            .outerjoin(Message, Message.message_id == Compaction.first_kept_message_id)
            .where(
                func.coalesce(Compaction.after_session_id, Compaction.before_session_id) == session.session_id,
                Compaction.trigger != "import",
            )
            .order_by(Compaction.compaction_id)
        )
    ).all()
    return [
        dump(
            from_row(
                CompactionData,
                r,
                details=loads(r.details_json),
                first_kept_message_entry_id=names.entry_id_of(r.kept_entry_id, r.first_kept_message_id)
                if r.first_kept_message_id is not None
                else None,
            )
        )
        for r in rows
    ]


def _record_key(data: Any) -> str:
    return f"{data.get('beforeSessionId')}\0{data.get('trigger')}\0{data.get('startedAt')}"


async def _problems(
    scope: RestoreScope, datas: list[CompactionData]
) -> tuple[dict[int, str], dict[str, tuple[int, int]]]:
    """For each record (by index) that names a session, summary or message this key lacks: which; and the messages."""
    conn, key = scope.conn, scope.session.session_key
    named_sessions = {d.before_session_id for d in datas} | {d.after_session_id for d in datas}
    sessions = {
        sid
        for (sid,) in await conn.execute(
            select(Session.session_id).where(Session.session_key == key, Session.session_id.in_(named_sessions))
        )
    }
    summaries = await summary_keys(conn, (d.summary_id for d in datas if d.summary_id))
    messages = await message_ids(conn, key, (d.first_kept_message_entry_id or "" for d in datas))
    problems: dict[int, str] = {}
    for index, data in enumerate(datas):
        named = [data.before_session_id, *([data.after_session_id] if data.after_session_id else [])]
        problem = next((f"session {s!r}" for s in named if s not in sessions), None)
        if problem is None and data.summary_id and summaries.get(data.summary_id) != key:
            problem = f"summary {data.summary_id!r}"
        kept = data.first_kept_message_entry_id
        if problem is None and kept and kept not in messages:
            problem = f"message entry {kept!r}"
        if problem is not None:
            problems[index] = problem
    return problems, messages


async def _restore_compactions(scope: RestoreScope, found: list[tuple[CustomEntry, CompactionData]]) -> int:
    """Append the file's `compactions` audit rows the store lacks; returns how many.

    A row is known by its key, session, trigger and start time. One that names a session, summary or
    message this key does not have is a malformed line.
    """
    conn, key = scope.conn, scope.session.session_key
    problems, kept_ids = await _problems(scope, [d for _, d in found])
    stored = {
        (row.before_session_id, row.trigger, row.started_at)
        for row in await conn.execute(
            select(Compaction.before_session_id, Compaction.trigger, Compaction.started_at).where(
                Compaction.session_key == key
            )
        )
    }
    created = 0
    for index, (entry, data) in enumerate(found):
        if (data.before_session_id, data.trigger, data.started_at) in stored:
            continue
        if index in problems:
            scope.transcript.reject(entry, f"{COMPACTION_TYPE}: {problems[index]} is not stored under this key")
            continue
        kept = kept_ids[data.first_kept_message_entry_id][0] if data.first_kept_message_entry_id else None
        await record_compaction(
            conn,
            session_key=key,
            first_kept_message_id=kept,
            **data.model_dump(exclude={"version", "first_kept_message_entry_id"}),
        )
        stored.add((data.before_session_id, data.trigger, data.started_at))
        created += 1
    return created


COMPACTION_KIND = EntryKind(
    COMPACTION_TYPE,
    CompactionData,
    row_key=_record_key,
    stamp="startedAt",
    export_rows=_compaction_rows,
    restore=_restore_compactions,
    position=30,
)
TURN_KIND = EntryKind(
    TURN_TYPE,
    TurnData,
    row_key=lambda d: str(d.get("turn")),
    stamp="at",
    export_rows=_turn_rows,
    restore=_restore_turns,
    position=40,
)
