"""Raw-sqlite3 baselines and the fixtures both sides share.

Every baseline writes into the *same* schema as ours: the file is created by opening a real
:class:`~openclaw_ctx.store.store.Store` (so Alembic builds every table, index, FTS5 table and
trigger), then written with plain :mod:`sqlite3` under the Store's own pragmas.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from openclaw_ctx.messages import parse_message
from openclaw_ctx.store import repo
from openclaw_ctx.store.store import Store

__all__ = [
    "CONTEXT_SQL",
    "MESSAGE_COLUMNS",
    "connect",
    "fresh_store",
    "insert_context_sql",
    "insert_message_sql",
    "new_messages",
    "read_message_rows",
]

# Every column the store writes for a message (created_at is left to its server default on both sides).
MESSAGE_COLUMNS = (
    "message_id", "session_id", "session_key", "seq", "entry_id", "parent_entry_id", "event_key", "role",
    "message_json", "text", "token_count", "tool_call_id", "tool_name", "on_active_branch", "is_heartbeat",
    "timestamp_ms",
)  # fmt: skip

# The same context-rows query as repo.load_context, for raw reads.
CONTEXT_SQL = """
    SELECT ci.ordinal, ci.item_type, ci.token_count, ci.message_id, m.message_json, m.entry_id, m.seq,
           ci.summary_id, s.kind, s.depth, s.content, s.descendant_count, s.earliest_at, s.latest_at,
           s.summarizer, s.fallback_level
    FROM context_items AS ci
    LEFT JOIN messages AS m ON m.message_id = ci.message_id
    LEFT JOIN summaries AS s ON s.summary_id = ci.summary_id
    WHERE ci.session_id = ?
    ORDER BY ci.ordinal
"""


def insert_message_sql() -> str:
    """INSERT for a full message row (FTS is filled by the schema's trigger, as for the store)."""
    cols = ", ".join(MESSAGE_COLUMNS)
    marks = ", ".join("?" for _ in MESSAGE_COLUMNS)
    return f"INSERT INTO messages({cols}) VALUES ({marks})"


def insert_context_sql() -> str:
    """INSERT for a message context item."""
    return (
        "INSERT INTO context_items(session_id, ordinal, item_type, message_id, token_count) "
        "VALUES (?, ?, 'message', ?, ?)"
    )


def connect(path: Path) -> sqlite3.Connection:
    """A plain sqlite3 connection with the Store's pragmas, autocommit mode (explicit BEGIN/COMMIT)."""
    conn = sqlite3.connect(path, isolation_level=None)
    for pragma in (
        "PRAGMA busy_timeout=30000",
        "PRAGMA journal_mode=WAL",
        "PRAGMA synchronous=NORMAL",
        "PRAGMA foreign_keys=ON",
        "PRAGMA cache_size=-65536",
        "PRAGMA temp_store=MEMORY",
        "PRAGMA mmap_size=268435456",
    ):
        conn.execute(pragma)
    return conn


async def fresh_store(path: Path, session_key: str) -> tuple[Store, repo.SessionRow]:
    """A migrated Store on `path` with one active session for `session_key`."""
    store = await Store.open(path)
    async with store.transaction() as conn:
        session = await repo.ensure_session(conn, session_key)
    return store, session


def new_messages(wire: Sequence[dict[str, Any]], prefix: str = "e") -> list[repo.NewMessage]:
    """Parsed messages with transcript entry ids, as a host hands them to an engine."""
    return [repo.NewMessage(parse_message(m), entry_id=f"{prefix}{i}") for i, m in enumerate(wire)]


def read_message_rows(path: Path) -> list[tuple[Any, ...]]:
    """Every message row of a database in MESSAGE_COLUMNS order (to replay them raw)."""
    conn = sqlite3.connect(path)
    try:
        return conn.execute(f"SELECT {', '.join(MESSAGE_COLUMNS)} FROM messages ORDER BY message_id").fetchall()
    finally:
        conn.close()
