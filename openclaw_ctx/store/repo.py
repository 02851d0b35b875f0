"""Data access shared by the host and every engine: sessions, messages, context items, summaries.

Plain functions over an :class:`AsyncConnection` (pass the one from ``store.transaction()`` or
``store.read()``). Hot paths use Core statements and column selects, a few awaits per operation,
never a loop of awaits.
"""

from __future__ import annotations

import json
import secrets
import uuid
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal

from sqlalchemy import func, insert, select, text, update
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
    "NewMessage",
    "NewSummary",
    "SessionRow",
    "active_session",
    "append_messages",
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
    images = _image_count(message)
    return counter.count(flatten_text(message)) + 1200 * images + 4


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
    """
    if not items:
        return []
    existing = await _existing_ids(conn, session.session_key, items)
    seq = await conn.scalar(
        select(func.coalesce(func.max(Message.seq), 0)).where(Message.session_key == session.session_key)
    )
    assert seq is not None
    # Each item resolves either to an existing row (duplicate) or to an index into `rows`.
    plan: list[AppendResult | int] = []
    rows: list[dict[str, Any]] = []
    batch_keys: set[str] = set()
    for item in items:
        known = _lookup(existing, batch_keys, item)
        if known is not None:
            plan.append(AppendResult(known[0], False, known[1]))
            continue
        seq += 1
        rows.append(_message_row(session, item, seq, counter))
        plan.append(len(rows) - 1)
    if not rows:
        return [p for p in plan if isinstance(p, AppendResult)]
    await conn.execute(insert(Message), rows)
    ids = await _ids_by_seq(conn, session.session_key, [r["seq"] for r in rows])
    results = [p if isinstance(p, AppendResult) else AppendResult(ids[p], True, rows[p]["token_count"]) for p in plan]
    if add_to_context:
        ordinal = await conn.scalar(
            select(func.coalesce(func.max(ContextItem.ordinal), -1)).where(ContextItem.session_id == session.session_id)
        )
        assert ordinal is not None
        new = [r for r in results if r.inserted]
        await conn.execute(
            insert(ContextItem),
            [
                {
                    "session_id": session.session_id,
                    "ordinal": ordinal + 1 + i,
                    "item_type": "message",
                    "message_id": r.message_id,
                    "token_count": r.token_count,
                }
                for i, r in enumerate(new)
            ],
        )
    return results


def _message_row(session: SessionRow, item: NewMessage, seq: int, counter: TokenCounter) -> dict[str, Any]:
    tool_call_id, tool_name = _tool_columns(item.message)
    return {
        "session_id": session.session_id,
        "session_key": session.session_key,
        "seq": seq,
        "entry_id": item.entry_id,
        "parent_entry_id": item.parent_entry_id,
        "event_key": item.event_key,
        "role": item.message.role,
        "message_json": message_to_json(item.message),
        "text": _searchable(flatten_text(item.message)),
        "token_count": message_token_count(item.message, counter),
        "tool_call_id": tool_call_id,
        "tool_name": tool_name,
        "on_active_branch": int(item.on_active_branch),
        "is_heartbeat": int(item.is_heartbeat),
        "timestamp_ms": getattr(item.message, "timestamp", None),
    }


async def _existing_ids(
    conn: AsyncConnection, session_key: str, items: Sequence[NewMessage]
) -> dict[str, tuple[int, int]]:
    keys = {k for item in items for k in (item.entry_id, item.event_key) if k}
    if not keys:
        return {}
    found: dict[str, tuple[int, int]] = {}
    key_list = list(keys)
    for start in range(0, len(key_list), 500):
        chunk = key_list[start : start + 500]
        rows = await conn.execute(
            select(Message.entry_id, Message.event_key, Message.message_id, Message.token_count).where(
                Message.session_key == session_key,
                (Message.entry_id.in_(chunk)) | (Message.event_key.in_(chunk)),
            )
        )
        for entry_id, event_key, message_id, tokens in rows:
            for k in (entry_id, event_key):
                if k in keys:
                    found[k] = (message_id, tokens)
    return found


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


async def _ids_by_seq(conn: AsyncConnection, session_key: str, seqs: list[int]) -> list[int]:
    rows = await conn.execute(
        select(Message.seq, Message.message_id).where(
            Message.session_key == session_key, Message.seq.between(min(seqs), max(seqs))
        )
    )
    by_seq: dict[int, int] = dict(rows.all())
    return [by_seq[s] for s in seqs]


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


_CONTEXT_SQL = text(
    """
    SELECT ci.ordinal, ci.item_type, ci.token_count, ci.message_id, m.message_json, m.entry_id, m.seq,
           ci.summary_id, s.kind, s.depth, s.content, s.descendant_count, s.earliest_at, s.latest_at,
           s.summarizer, s.fallback_level
    FROM context_items AS ci
    LEFT JOIN messages AS m ON m.message_id = ci.message_id
    LEFT JOIN summaries AS s ON s.summary_id = ci.summary_id
    WHERE ci.session_id = :sid AND ci.ordinal > :after
    ORDER BY ci.ordinal
    LIMIT :limit
    """
)


async def load_context(
    conn: AsyncConnection, session_id: str, *, after: int | None = None, limit: int | None = None
) -> list[ContextEntry]:
    """The session's context items in order, resolved, with one indexed query.

    `after` and `limit` read one page (items with an ordinal above `after`, at most `limit` of them),
    for work over a context too long to hold at once.
    """
    page = {"after": -1 if after is None else after, "limit": -1 if limit is None else limit}
    rows = await conn.execute(_CONTEXT_SQL, {"sid": session_id, **page})
    out: list[ContextEntry] = []
    for r in rows:
        if r.item_type == "message":
            out.append(
                ContextEntry(
                    r.ordinal,
                    "message",
                    r.token_count,
                    message_id=r.message_id,
                    message=message_from_json(r.message_json),
                    entry_id=r.entry_id,
                    seq=r.seq,
                )
            )
        else:
            out.append(
                ContextEntry(
                    r.ordinal,
                    "summary",
                    r.token_count,
                    summary_id=r.summary_id,
                    summary={
                        "kind": r.kind,
                        "depth": r.depth,
                        "content": r.content,
                        "descendant_count": r.descendant_count,
                        "earliest_at": r.earliest_at,
                        "latest_at": r.latest_at,
                        "summarizer": r.summarizer,
                        "fallback_level": r.fallback_level,
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

    A node over other summaries sits one above the deepest of them, whatever its kind (a legacy
    summary that updates earlier ones included), so depths stay consistent across engines.
    """
    depth = summary.depth
    if summary.source_summary_ids:
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
