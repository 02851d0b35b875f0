"""Helpers for the lossless engine tests: message builders, host-side persistence, DAG queries."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from sqlalchemy import text

from engines.lossless.engine import LosslessContextEngine, create_engine
from openclaw_ctx import testing
from openclaw_ctx.contract import EngineContext
from openclaw_ctx.messages import (
    AgentMessage,
    AssistantMessage,
    ToolResultMessage,
    Usage,
    UserMessage,
)
from openclaw_ctx.store import repo
from openclaw_ctx.store.store import Store

# A configuration small enough that a few dozen short messages exercise every pass.
SMALL = {
    "freshTailCount": 4,
    "leafChunkTokens": 400,
    "leafMinFanout": 2,
    "condensedMinFanout": 2,
    "condensedTargetTokens": 40,
    "leafTargetTokens": 48,
    "sweepMaxDepth": 1,
}

BASE_TS = 1_780_000_000_000


def timestamp_at(i: int) -> int:
    """The timestamp of message `i`: one a minute from BASE_TS."""
    return BASE_TS + i * 60_000


def user(text_: str, i: int = 0) -> UserMessage:
    return testing.user(text_, timestamp=timestamp_at(i))


def assistant(
    text_: str, i: int = 0, calls: Sequence[tuple[str, str]] = (), usage: int | None = None
) -> AssistantMessage:
    return testing.assistant(
        text_,
        calls=[testing.tool_call(cid, name, {"path": f"/src/{cid}.py"}) for cid, name in calls],
        timestamp=timestamp_at(i),
        usage=Usage(input=usage) if usage is not None else None,
        stop_reason="toolUse" if calls else "stop",
    )


def tool_result(call_id: str, text_: str, i: int = 0, name: str = "read_file") -> ToolResultMessage:
    return testing.tool_result(call_id, text_, name=name, timestamp=timestamp_at(i))


def conversation(turns: int, *, start: int = 0, words: int = 30) -> list[tuple[AgentMessage, str]]:
    """`turns` user/assistant/tool exchanges with distinct, fact-like text; (message, entry id) pairs."""
    out: list[tuple[AgentMessage, str]] = []
    for t in range(start, start + turns):
        filler = " ".join(f"w{t}x{k}" for k in range(words))
        cid = f"call_{t}"
        out.append((user(f"Turn {t}: please check module_{t} and fact FACT_{t} {filler}", 3 * t), f"e{t}u"))
        out.append((assistant(f"Reading module_{t}.", 3 * t + 1, calls=[(cid, "read_file")]), f"e{t}a"))
        out.append((tool_result(cid, f"contents of module_{t}: value={t * 7} {filler}", 3 * t + 2), f"e{t}r"))
    return out


async def host_persist(store: Store, key: str, pairs: Sequence[tuple[AgentMessage, str]]) -> repo.SessionRow:
    """What the host runtime does each turn: persist to the key's active session and its context."""
    async with store.transaction() as conn:
        session = await repo.ensure_session(conn, key)
        await repo.append_messages(
            conn, session, [repo.NewMessage(message=m, entry_id=e) for m, e in pairs], store.counter
        )
    return session


def make_engine(store: Store, **overrides: Any) -> LosslessContextEngine:
    return create_engine(EngineContext(config={**SMALL, **overrides}, store=store))


async def active_id(store: Store, key: str) -> str:
    async with store.read() as conn:
        session = await repo.active_session(conn, key)
    assert session is not None
    return session.session_id


_REACHABLE = text(
    """
    WITH RECURSIVE ctx(summary_id) AS (
        SELECT ci.summary_id FROM context_items AS ci WHERE ci.session_id = :sid AND ci.summary_id IS NOT NULL
        UNION
        SELECT sp.source_summary_id FROM ctx CROSS JOIN summary_parents AS sp ON sp.summary_id = ctx.summary_id
    )
    SELECT sm.message_id FROM ctx CROSS JOIN summary_messages AS sm ON sm.summary_id = ctx.summary_id
    UNION
    SELECT ci.message_id FROM context_items AS ci WHERE ci.session_id = :sid AND ci.message_id IS NOT NULL
    """
)


async def reachable_message_ids(store: Store, key: str) -> set[int]:
    """Message ids reachable from the key's current context through the DAG edges (recursive CTE)."""
    sid = await active_id(store, key)
    async with store.read() as conn:
        return {r[0] for r in await conn.execute(_REACHABLE, {"sid": sid})}


async def all_message_ids(store: Store, key: str) -> set[int]:
    async with store.read() as conn:
        rows = await conn.execute(text("SELECT message_id FROM messages WHERE session_key = :k"), {"k": key})
        return {r[0] for r in rows}


async def summary_rows(store: Store, key: str) -> list[dict[str, Any]]:
    async with store.read() as conn:
        rows = await conn.execute(
            text("SELECT * FROM summaries WHERE session_key = :k ORDER BY created_at, rowid"), {"k": key}
        )
        return [dict(r._mapping) for r in rows]
