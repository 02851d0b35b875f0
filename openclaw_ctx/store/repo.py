"""Data access shared by the host and every engine: sessions, messages, context items, summaries.

Plain functions over an :class:`AsyncConnection` (pass the one from ``store.transaction()`` or
``store.read()``). Hot paths use Core statements and column selects, a few awaits per operation,
never a loop of awaits.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import secrets
import sqlite3
import uuid
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal

from sqlalchemy import func, insert, select, text, update
from sqlalchemy.exc import DBAPIError
from sqlalchemy.ext.asyncio import AsyncConnection

from openclaw_ctx.errors import NotFoundError
from openclaw_ctx.messages import (
    AgentMessage,
    AssistantMessage,
    ToolCall,
    ToolResultMessage,
    flatten_text,
    message_from_json,
    message_to_json,
)
from openclaw_ctx.store.models import (
    Compaction,
    ContextItem,
    EngineState,
    Message,
    Session,
    Summary,
    SummaryMessage,
    SummaryParent,
    Turn,
)
from openclaw_ctx.tokens import TokenCounter

__all__ = [
    "AppendResult",
    "ContextEntry",
    "Driver",
    "NewMessage",
    "NewSummary",
    "SessionRow",
    "active_session",
    "append_messages",
    "context_item_count",
    "context_tokens",
    "ensure_session",
    "get_engine_state",
    "get_session",
    "load_context",
    "load_messages",
    "mark_turn_compacted",
    "message_token_count",
    "new_session_id",
    "new_summary_id",
    "record_compaction",
    "record_turn",
    "rotate_session",
    "session_chain",
    "set_engine_state",
    "start_fresh_session",
    "successor_session_file",
    "insert_summary",
    "utc_now",
]

ItemType = Literal["message", "summary"]


def utc_now() -> str:
    """Current time as the ISO-8601 UTC text the store uses everywhere."""
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"


def new_session_id() -> str:
    """A fresh session id (UUID4, as OpenClaw uses)."""
    return str(uuid.uuid4())


def new_summary_id() -> str:
    """`sum_` + 16 hex characters."""
    return "sum_" + secrets.token_hex(8)


def successor_session_file(previous: str | None, session_id: str, directory: str | None = None) -> str:
    """OpenClaw's successor name: `<ISO time with : and . as ->_<sessionId>.jsonl`, beside the predecessor."""
    stamp = utc_now().replace(":", "-").replace(".", "-")
    folder = Path(previous).parent if previous else Path(directory or ".")
    return str(folder / f"{stamp}_{session_id}.jsonl")


# --- sessions ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class SessionRow:
    """A `sessions` row."""

    session_id: str
    session_key: str
    session_file: str | None
    parent_session_id: str | None
    rotation_reason: str | None
    status: str
    engine_id: str | None
    created_at: str

    @classmethod
    def from_row(cls, row: Any) -> SessionRow:
        """Build from a selected row of the `_SESSION_COLUMNS`."""
        return cls(**row._mapping)


_SESSION_COLUMNS = (
    Session.session_id,
    Session.session_key,
    Session.session_file,
    Session.parent_session_id,
    Session.rotation_reason,
    Session.status,
    Session.engine_id,
    Session.created_at,
)


async def get_session(conn: AsyncConnection, session_id: str) -> SessionRow:
    """The session with this id.

    Raises:
        NotFoundError: no such session.
    """
    row = (await conn.execute(select(*_SESSION_COLUMNS).where(Session.session_id == session_id))).first()
    if row is None:
        raise NotFoundError(f"no session with id {session_id!r}")
    return SessionRow.from_row(row)


async def active_session(conn: AsyncConnection, session_key: str) -> SessionRow | None:
    """The active session of a key, if any."""
    row = (
        await conn.execute(
            select(*_SESSION_COLUMNS).where(Session.session_key == session_key, Session.status == "active")
        )
    ).first()
    return SessionRow.from_row(row) if row else None


async def ensure_session(
    conn: AsyncConnection,
    session_key: str,
    *,
    session_id: str | None = None,
    session_file: str | None = None,
    engine_id: str | None = None,
    cwd: str | None = None,
    sessions_dir: str | None = None,
) -> SessionRow:
    """The active session of `session_key`, created if the key has none."""
    existing = await active_session(conn, session_key)
    if existing is not None:
        return existing
    sid = session_id or new_session_id()
    file = session_file or successor_session_file(None, sid, sessions_dir)
    await conn.execute(
        insert(Session).values(session_id=sid, session_key=session_key, session_file=file, engine_id=engine_id, cwd=cwd)
    )
    return await get_session(conn, sid)


async def start_fresh_session(
    conn: AsyncConnection, session_key: str, *, reason: str, engine_id: str | None = None
) -> SessionRow:
    """OpenClaw's ``/new`` and ``/reset``: archive the key's active session and start an empty one.

    The new session has a new id and no parent (it continues nothing); `reason` goes in its
    ``rotation_reason``. Nothing is deleted: the archived session's messages and summaries stay in
    the store, in the key's chain and in recall.
    """
    old = await active_session(conn, session_key)
    if old is not None:
        await conn.execute(
            update(Session).where(Session.session_id == old.session_id).values(status="archived", updated_at=utc_now())
        )
    sid = new_session_id()
    await conn.execute(
        insert(Session).values(
            session_id=sid,
            session_key=session_key,
            session_file=successor_session_file(old.session_file if old else None, sid),
            rotation_reason=reason,
            engine_id=engine_id or (old.engine_id if old else None),
        )
    )
    return await get_session(conn, sid)


async def session_chain(conn: AsyncConnection, session_key: str) -> list[SessionRow]:
    """Every session of a key, oldest first (the rotation chain plus any archived rows)."""
    rows = await conn.execute(
        select(*_SESSION_COLUMNS)
        .where(Session.session_key == session_key)
        .order_by(Session.created_at, Session.session_id)
    )
    return [SessionRow.from_row(r) for r in rows]


# --- messages ------------------------------------------------------------------------------------


@dataclass
class NewMessage:
    """A message to persist. `entry_id` (transcript entry id) makes the write idempotent."""

    message: AgentMessage
    entry_id: str | None = None
    parent_entry_id: str | None = None
    event_key: str | None = None
    on_active_branch: bool = True
    is_heartbeat: bool = False


@dataclass(frozen=True)
class AppendResult:
    """Outcome of one NewMessage: its row id and whether it was written now (False = duplicate)."""

    message_id: int
    inserted: bool
    token_count: int


def message_token_count(message: AgentMessage, counter: TokenCounter) -> int:
    """Tokens a message costs in a prompt: its flattened text (images count a fixed 1,200)."""
    return _token_count(message, flatten_text(message), counter)


def _token_count(message: AgentMessage, flat: str, counter: TokenCounter) -> int:
    return counter.count(flat) + 1200 * _image_count(message) + 4


def _image_count(message: AgentMessage) -> int:
    content = getattr(message, "content", None)
    if not isinstance(content, list):
        return 0
    return sum(1 for block in content if getattr(block, "type", None) == "image")


def _searchable(text_value: str) -> str:
    # The FTS column must be valid UTF-8; message_json keeps the exact original.
    try:
        text_value.encode("utf-8")
        return text_value
    except UnicodeEncodeError:
        return text_value.encode("utf-8", "replace").decode("utf-8")


def _tool_columns(message: AgentMessage) -> tuple[str | None, str | None]:
    if isinstance(message, ToolResultMessage):
        return message.tool_call_id, message.tool_name or None
    if isinstance(message, AssistantMessage):
        ids = [b.id for b in message.content if isinstance(b, ToolCall)]
        return (ids[0] if len(ids) == 1 else None), None
    return None, None


# Lookup of already-stored entry ids / event keys plus the key's next seq and the session's next
# ordinal, in one round trip. The keys travel as one JSON array so the SQL text never changes (the
# statement cache always hits) and each branch is an indexed probe of a partial unique index.
# Placeholders, in order: key, keys, key, keys, key, session id (see _lookup_params).
_APPEND_LOOKUP_SQL = """
    SELECT 0, entry_id, message_id, token_count FROM messages
    WHERE session_key = ? AND entry_id IN (SELECT value FROM json_each(?))
    UNION ALL
    SELECT 0, event_key, message_id, token_count FROM messages
    WHERE session_key = ? AND event_key IN (SELECT value FROM json_each(?))
    UNION ALL
    SELECT 1, NULL,
        (SELECT coalesce(max(seq), 0) FROM messages WHERE session_key = ?),
        (SELECT coalesce(max(ordinal), -1) FROM context_items WHERE session_id = ?)
"""
_MESSAGE_COLUMNS = (
    "session_id", "session_key", "seq", "entry_id", "parent_entry_id", "event_key", "role", "message_json",
    "text", "token_count", "tool_call_id", "tool_name", "on_active_branch", "is_heartbeat", "timestamp_ms",
)  # fmt: skip
_INSERT_MESSAGE_SQL = (
    f"INSERT INTO messages({', '.join(_MESSAGE_COLUMNS)}) VALUES ({', '.join('?' for _ in _MESSAGE_COLUMNS)})"
)
# The new rows' context items, written from the rows themselves (ordinal = base + seq), returning
# each new id with its seq (RETURNING sees only context_items' columns, hence ordinal - base).
# Placeholders: session id, base, key, first seq, last seq, base.
_INSERT_CONTEXT_SQL = """
    INSERT INTO context_items(session_id, ordinal, item_type, message_id, token_count)
    SELECT ?, ? + seq, 'message', message_id, token_count FROM messages
    WHERE session_key = ? AND seq BETWEEN ? AND ?
    ORDER BY seq
    RETURNING message_id, ordinal - ?
"""
_IDS_BY_SEQ_SQL = "SELECT message_id, seq FROM messages WHERE session_key = ? AND seq BETWEEN ? AND ?"
# Rows per INSERT round trip: while one chunk is written by the driver thread, the next is built
# (serialised, flattened, token-counted) on a worker thread.
_INSERT_CHUNK = 128


async def append_messages(
    conn: AsyncConnection,
    session: SessionRow,
    items: Sequence[NewMessage],
    counter: TokenCounter,
    *,
    add_to_context: bool = True,
) -> list[AppendResult]:
    """Persist messages to `session` (idempotent on entry id and event key within the session key).

    New messages get the next `seq` of the key and, with `add_to_context`, an item at the end of the
    session's `context_items`. A duplicate is reported with ``inserted=False`` and its existing id.

    Round trips: one lookup, one INSERT per 128 new rows (the next chunk is prepared on a worker
    thread while the previous one is written), one statement for the context items and the new ids;
    each is a single hop to the driver thread (see :class:`Driver`).
    """
    if not items:
        return []
    keys = sorted({k for item in items for k in (item.entry_id, item.event_key) if k})
    existing: dict[str, tuple[int, int]] = {}
    seq = ordinal = 0
    driver = await Driver.of(conn)
    rows = await driver.fetchall(_APPEND_LOOKUP_SQL, _lookup_params(session, json.dumps(keys)))
    for r in rows:
        if r[0] == 1:
            seq, ordinal = int(r[2]), int(r[3])
        else:
            existing[r[1]] = (int(r[2]), int(r[3]))
    # Each item resolves either to an existing row (duplicate) or to an index into the new rows.
    plan: list[AppendResult | int] = []
    fresh: list[NewMessage] = []
    batch_keys: set[str] = set()
    for item in items:
        known = _lookup(existing, batch_keys, item)
        if known is not None:
            plan.append(AppendResult(known[0], False, known[1]))
            continue
        fresh.append(item)
        plan.append(len(fresh) - 1)
    if not fresh:
        return [p for p in plan if isinstance(p, AppendResult)]
    first_seq = seq + 1
    tokens: list[int] = []

    def build(start: int) -> list[tuple[Any, ...]]:
        return [
            _message_values(session, item, first_seq + start + i, counter)
            for i, item in enumerate(fresh[start : start + _INSERT_CHUNK])
        ]

    loop = asyncio.get_running_loop()
    starts = range(0, len(fresh), _INSERT_CHUNK)
    chunk = build(0)
    for start in starts:
        # While this chunk is written (the loop drives the driver's round trips), a worker thread
        # builds the next one: tiktoken and SQLite both release the GIL, so the two overlap.
        upcoming = (
            loop.run_in_executor(None, build, start + _INSERT_CHUNK) if start + _INSERT_CHUNK < len(fresh) else None
        )
        try:
            await driver.executemany(_INSERT_MESSAGE_SQL, chunk)
        except BaseException:
            if upcoming is not None:
                with contextlib.suppress(BaseException):
                    await upcoming
            raise
        tokens.extend(values[9] for values in chunk)
        if upcoming is not None:
            chunk = await upcoming
    last_seq = first_seq + len(fresh) - 1
    if add_to_context:
        base = ordinal + 1 - first_seq
        got = await driver.fetchall(
            _INSERT_CONTEXT_SQL, (session.session_id, base, session.session_key, first_seq, last_seq, base)
        )
    else:
        got = await driver.fetchall(_IDS_BY_SEQ_SQL, (session.session_key, first_seq, last_seq))
    by_seq = {int(sq): int(mid) for mid, sq in got}
    ids = [by_seq[first_seq + i] for i in range(len(fresh))]
    return [p if isinstance(p, AppendResult) else AppendResult(ids[p], True, tokens[p]) for p in plan]


class Driver:
    """The aiosqlite connection under an AsyncConnection, for hot-path statements in one hop each (public for engines).

    SQLAlchemy's asyncio adapter spends three to four driver round trips per statement (open a
    cursor, execute, fetch, close); aiosqlite's own ``execute_fetchall`` / ``executemany`` spend one.
    The statements run on the very connection, inside the transaction SQLAlchemy began; driver
    errors are raised as SQLAlchemy's exception types, as everywhere else in the store.
    """

    def __init__(self, raw: Any) -> None:
        self._raw = raw

    @classmethod
    async def of(cls, conn: AsyncConnection) -> Driver:
        """The driver connection of `conn`, inside a transaction (begun here as SQLAlchemy's autobegin would)."""
        if not conn.in_transaction():
            await conn.begin()
        return cls((await conn.get_raw_connection()).driver_connection)

    async def fetchall(self, sql: str, params: Sequence[Any] | Mapping[str, Any]) -> list[Any]:
        """Execute one statement (``?`` or ``:name`` placeholders) and return its rows as tuples."""
        try:
            return list(await self._raw.execute_fetchall(sql, params))
        except sqlite3.Error as exc:
            raise _wrapped(sql, params, exc) from exc

    async def executemany(self, sql: str, rows: Sequence[Sequence[Any]]) -> None:
        """Execute one statement for every row."""
        try:
            cursor = await self._raw.executemany(sql, rows)
            await cursor.close()
        except sqlite3.Error as exc:
            raise _wrapped(sql, rows, exc) from exc


def _wrapped(sql: str, params: Any, exc: sqlite3.Error) -> BaseException:
    return DBAPIError.instance(sql, params, exc, sqlite3.Error)


def _lookup_params(session: SessionRow, keys: str) -> tuple[Any, ...]:
    # Positional, in the order the placeholders appear in _APPEND_LOOKUP_SQL.
    k = session.session_key
    return (k, keys, k, keys, k, session.session_id)


def _message_values(session: SessionRow, item: NewMessage, seq: int, counter: TokenCounter) -> tuple[Any, ...]:
    """One `messages` row in _MESSAGE_COLUMNS order (index 9 is the token count)."""
    message = item.message
    tool_call_id, tool_name = _tool_columns(message)
    flat = flatten_text(message)
    return (
        session.session_id,
        session.session_key,
        seq,
        item.entry_id,
        item.parent_entry_id,
        item.event_key,
        message.role,
        message_to_json(message),
        _searchable(flat),
        _token_count(message, flat, counter),
        tool_call_id,
        tool_name,
        int(item.on_active_branch),
        int(item.is_heartbeat),
        getattr(message, "timestamp", None),
    )


def _lookup(existing: dict[str, tuple[int, int]], batch_keys: set[str], item: NewMessage) -> tuple[int, int] | None:
    keys = [k for k in (item.entry_id, item.event_key) if k]
    for key in keys:
        if key in existing:
            return existing[key]
    for key in keys:
        if key in batch_keys:
            raise ValueError(f"entry/event id {key!r} appears twice in one batch")
    batch_keys.update(keys)
    return None


async def load_messages(conn: AsyncConnection, message_ids: Iterable[int]) -> dict[int, AgentMessage]:
    """Messages by id, parsed (a row that no longer parses is corruption and raises)."""
    ids = list(message_ids)
    out: dict[int, AgentMessage] = {}
    for start in range(0, len(ids), 500):
        chunk = ids[start : start + 500]
        rows = await conn.execute(select(Message.message_id, Message.message_json).where(Message.message_id.in_(chunk)))
        for message_id, raw in rows:
            out[message_id] = message_from_json(raw)
    return out


# --- context items -------------------------------------------------------------------------------


@dataclass(frozen=True)
class ContextEntry:
    """One resolved context item: a message (parsed) or a summary (its row fields)."""

    ordinal: int
    item_type: ItemType
    token_count: int
    message_id: int | None = None
    message: AgentMessage | None = None
    entry_id: str | None = None
    seq: int | None = None
    summary_id: str | None = None
    summary: dict[str, Any] | None = field(default=None)


_CONTEXT_SQL = """
    SELECT ci.ordinal, ci.item_type, ci.token_count, ci.message_id, m.message_json, m.entry_id, m.seq,
           ci.summary_id, s.kind, s.depth, s.content, s.descendant_count, s.earliest_at, s.latest_at,
           s.summarizer, s.fallback_level
    FROM context_items AS ci
    LEFT JOIN messages AS m ON m.message_id = ci.message_id
    LEFT JOIN summaries AS s ON s.summary_id = ci.summary_id
    WHERE ci.session_id = ? AND ci.ordinal > ?
    ORDER BY ci.ordinal
    LIMIT ?
"""


async def load_context(
    conn: AsyncConnection, session_id: str, *, after: int | None = None, limit: int | None = None
) -> list[ContextEntry]:
    """The session's context items in order, resolved, with one indexed query (one driver hop).

    `after` and `limit` read one page (items with an ordinal above `after`, at most `limit` of them),
    for work over a context too long to hold at once.
    """
    page = (-1 if after is None else after, -1 if limit is None else limit)
    rows = await (await Driver.of(conn)).fetchall(_CONTEXT_SQL, (session_id, *page))
    out: list[ContextEntry] = []
    for (
        ordinal,
        item_type,
        token_count,
        message_id,
        message_json,
        entry_id,
        seq,
        summary_id,
        kind,
        depth,
        content,
        descendant_count,
        earliest_at,
        latest_at,
        summarizer,
        fallback_level,
    ) in rows:
        if item_type == "message":
            out.append(
                ContextEntry(
                    ordinal,
                    "message",
                    token_count,
                    message_id=message_id,
                    message=message_from_json(message_json),
                    entry_id=entry_id,
                    seq=seq,
                )
            )
        else:
            out.append(
                ContextEntry(
                    ordinal,
                    "summary",
                    token_count,
                    summary_id=summary_id,
                    summary={
                        "kind": kind,
                        "depth": depth,
                        "content": content,
                        "descendant_count": descendant_count,
                        "earliest_at": earliest_at,
                        "latest_at": latest_at,
                        "summarizer": summarizer,
                        "fallback_level": fallback_level,
                    },
                )
            )
    return out


async def context_tokens(conn: AsyncConnection, session_id: str) -> int:
    """Sum of stored token counts over the session's context items."""
    total = await conn.scalar(
        select(func.coalesce(func.sum(ContextItem.token_count), 0)).where(ContextItem.session_id == session_id)
    )
    return int(total or 0)


async def context_item_count(conn: AsyncConnection, session_id: str) -> int:
    """How many context items the session has (one indexed count; nothing is parsed)."""
    count = await conn.scalar(select(func.count()).select_from(ContextItem).where(ContextItem.session_id == session_id))
    return int(count or 0)


# --- summaries, rotation, audit ------------------------------------------------------------------


@dataclass
class NewSummary:
    """A summary node and its sources."""

    kind: Literal["legacy", "leaf", "condensed"]
    content: str
    token_count: int
    summarizer: str
    source_message_ids: list[int] = field(default_factory=list)
    source_summary_ids: list[str] = field(default_factory=list)
    depth: int = 0
    model: str | None = None
    fallback_level: str = "none"
    earliest_at: str | None = None
    latest_at: str | None = None
    descendant_count: int = 0
    descendant_token_count: int = 0
    source_message_token_count: int = 0
    details: Any = None
    summary_id: str = field(default_factory=new_summary_id)
    created_at: str | None = None  # None: now (set when restoring a row, e.g. on import)


async def insert_summary(conn: AsyncConnection, session: SessionRow, summary: NewSummary) -> str:
    """Insert a summary row and its edges; returns its id.

    A legacy summary that updates earlier ones sits one above the deepest of them, so depths stay
    consistent across engines (lossless nodes arrive with their depth computed by the sweep).
    """
    depth = summary.depth
    if summary.kind == "legacy" and summary.source_summary_ids:
        deepest = await conn.scalar(
            select(func.max(Summary.depth)).where(Summary.summary_id.in_(summary.source_summary_ids))
        )
        depth = int(deepest or 0) + 1
    await conn.execute(
        insert(Summary).values(
            summary_id=summary.summary_id,
            session_key=session.session_key,
            session_id=session.session_id,
            kind=summary.kind,
            depth=depth,
            content=summary.content,
            token_count=summary.token_count,
            earliest_at=summary.earliest_at,
            latest_at=summary.latest_at,
            descendant_count=summary.descendant_count,
            descendant_token_count=summary.descendant_token_count,
            source_message_token_count=summary.source_message_token_count,
            summarizer=summary.summarizer,
            model=summary.model,
            fallback_level=summary.fallback_level,
            details_json=json.dumps(summary.details, ensure_ascii=False) if summary.details is not None else None,
            **({"created_at": summary.created_at} if summary.created_at is not None else {}),
        )
    )
    if summary.source_message_ids:
        await conn.execute(
            insert(SummaryMessage),
            [
                {"summary_id": summary.summary_id, "message_id": mid, "ordinal": i}
                for i, mid in enumerate(summary.source_message_ids)
            ],
        )
    if summary.source_summary_ids:
        await conn.execute(
            insert(SummaryParent),
            [
                {"summary_id": summary.summary_id, "source_summary_id": sid, "ordinal": i}
                for i, sid in enumerate(summary.source_summary_ids)
            ],
        )
    return summary.summary_id


async def rotate_session(
    conn: AsyncConnection,
    old: SessionRow,
    items: Sequence[tuple[ItemType, int | str, int]],
    *,
    reason: str,
    engine_id: str | None,
) -> SessionRow:
    """Write the successor of `old` with the given context items; mark `old` rotated.

    `items` are ``(item_type, message_id | summary_id, token_count)`` in order. Run inside the same
    transaction as the summary writes so the rotation is all-or-nothing.
    """
    await conn.execute(
        update(Session).where(Session.session_id == old.session_id).values(status="rotated", updated_at=utc_now())
    )
    sid = new_session_id()
    await conn.execute(
        insert(Session).values(
            session_id=sid,
            session_key=old.session_key,
            session_file=successor_session_file(old.session_file, sid),
            parent_session_id=old.session_id,
            rotation_reason=reason,
            engine_id=engine_id or old.engine_id,
        )
    )
    if items:
        await conn.execute(
            insert(ContextItem),
            [
                {
                    "session_id": sid,
                    "ordinal": i,
                    "item_type": kind,
                    "message_id": ref if kind == "message" else None,
                    "summary_id": ref if kind == "summary" else None,
                    "token_count": tokens,
                }
                for i, (kind, ref, tokens) in enumerate(items)
            ],
        )
    return await get_session(conn, sid)


async def record_compaction(conn: AsyncConnection, **values: Any) -> int:
    """Append a row to the `compactions` audit log; returns its id."""
    if "details" in values:
        details = values.pop("details")
        values["details_json"] = json.dumps(details, ensure_ascii=False, default=str) if details is not None else None
    result = await conn.execute(insert(Compaction).returning(Compaction.compaction_id), [values])
    return int(result.scalar_one())


async def record_turn(
    conn: AsyncConnection, session: SessionRow, *, assembled_tokens: int, budget: int, compacted: bool
) -> int:
    """Append a `turns` row for the key; returns its number (1, 2, … across the key's whole chain)."""
    last = await conn.scalar(
        select(func.coalesce(func.max(Turn.turn), 0)).where(Turn.session_key == session.session_key)
    )
    number = int(last or 0) + 1
    await conn.execute(
        insert(Turn).values(
            session_key=session.session_key,
            session_id=session.session_id,
            turn=number,
            assembled_tokens=assembled_tokens,
            budget=budget,
            compacted=int(compacted),
        )
    )
    return number


async def mark_turn_compacted(conn: AsyncConnection, session_key: str, turn: int) -> None:
    """Flag a recorded turn as one during which the context was compacted."""
    await conn.execute(update(Turn).where(Turn.session_key == session_key, Turn.turn == turn).values(compacted=1))


# --- engine state --------------------------------------------------------------------------------


async def get_engine_state(conn: AsyncConnection, engine_id: str, session_key: str, name: str) -> Any:
    """A stored engine-state value, or None."""
    raw = await conn.scalar(
        select(EngineState.value_json).where(
            EngineState.engine_id == engine_id,
            EngineState.session_key == session_key,
            EngineState.name == name,
        )
    )
    return json.loads(raw) if raw is not None else None


async def set_engine_state(conn: AsyncConnection, engine_id: str, session_key: str, name: str, value: Any) -> None:
    """Insert or replace an engine-state value (None deletes it)."""
    if value is None:
        await conn.execute(
            text("DELETE FROM engine_state WHERE engine_id=:e AND session_key=:k AND name=:n"),
            {"e": engine_id, "k": session_key, "n": name},
        )
        return
    await conn.execute(
        text(
            "INSERT INTO engine_state(engine_id, session_key, name, value_json, updated_at) "
            "VALUES (:e, :k, :n, :v, :t) ON CONFLICT(engine_id, session_key, name) "
            "DO UPDATE SET value_json = excluded.value_json, updated_at = excluded.updated_at"
        ),
        {"e": engine_id, "k": session_key, "n": name, "v": json.dumps(value), "t": utc_now()},
    )
