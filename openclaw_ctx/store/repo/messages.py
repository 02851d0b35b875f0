"""Messages: idempotent appends (with their context items) and parsed loads."""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncConnection

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
    Message,
)
from openclaw_ctx.store.repo.driver import Driver
from openclaw_ctx.store.repo.sessions import SessionRow
from openclaw_ctx.tokens import TokenCounter

__all__ = [
    "AppendResult",
    "NewMessage",
    "append_messages",
    "load_messages",
    "message_token_count",
    "stored_entry_ids",
]

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


async def stored_entry_ids(conn: AsyncConnection, session_key: str, entry_ids: Iterable[str]) -> set[str]:
    """Which of `entry_ids` the key already stores (one indexed lookup per 500 ids)."""
    ids = list(dict.fromkeys(entry_ids))
    found: set[str] = set()
    for start in range(0, len(ids), 500):
        chunk = ids[start : start + 500]
        rows = await conn.execute(
            select(Message.entry_id).where(Message.session_key == session_key, Message.entry_id.in_(chunk))
        )
        found.update(str(entry_id) for (entry_id,) in rows)
    return found
