"""The runtime's reads and writes of sessions, history and turns, all through :mod:`openclaw_ctx.store.repo`."""

from __future__ import annotations

import secrets
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from sqlalchemy.ext.asyncio import AsyncConnection

from openclaw_ctx.context import pipeline_messages
from openclaw_ctx.messages import AgentMessage
from openclaw_ctx.store import repo
from openclaw_ctx.store.store import Store

__all__ = ["EntryIds", "Persisted", "Sessions", "TurnStats", "Writes", "new_entry_id"]

EntryIds = Callable[[AgentMessage], str | None]
"""The transcript entry id of a message, when the caller has one (else the host makes one up)."""
Writes = Callable[[AsyncConnection], Awaitable[None]]
"""A caller's own statements, run inside a turn's persist transaction (they commit with it or not at all)."""


def new_entry_id() -> str:
    """An 8-hex transcript entry id, as OpenClaw writes them."""
    return secrets.token_hex(4)


@dataclass(frozen=True)
class TurnStats:
    """What the `turns` row of a turn records."""

    assembled_tokens: int
    budget: int
    compacted: bool
    prompt_tokens: int | None = None
    """The largest prompt the turn's model calls were sent (None: no model call)."""


@dataclass(frozen=True)
class Persisted:
    """A persisted turn: its number in `turns` (None when nothing was new) and each message's entry id."""

    number: int | None
    entry_ids: list[str | None]


class Sessions:
    """Session rows of one store; new sessions are created for the engine `engine_id()` names."""

    def __init__(self, store: Store, engine_id: Callable[[], str]) -> None:
        self._store = store
        self._engine_id = engine_id

    async def active(self, key: str) -> repo.SessionRow:
        """The key's active session, created on first use."""
        # Reads are cheap and concurrent; take the write lock only to create the key's first session.
        async with self._store.read() as conn:
            session = await repo.active_session(conn, key)
        if session is not None:
            return session
        async with self._store.transaction() as conn:
            return await repo.ensure_session(conn, key, engine_id=self._engine_id())

    async def start_fresh(self, key: str, reason: str) -> repo.SessionRow:
        """Archive the key's active session and start an empty one."""
        async with self._store.transaction() as conn:
            return await repo.start_fresh_session(conn, key, reason=reason, engine_id=self._engine_id())

    async def history(self, session: repo.SessionRow) -> tuple[list[AgentMessage], dict[int, int]]:
        """The session's pipeline messages, and their stored token counts keyed by object identity."""
        async with self._store.read() as conn:
            entries = await repo.load_context(conn, session.session_id)
        messages = pipeline_messages(entries)
        # Keyed by identity so that the host's estimate never re-tokenizes history.
        known = {id(m): e.token_count for m, e in zip(messages, entries, strict=True)}
        return messages, known

    async def context_tokens(self, session: repo.SessionRow) -> int:
        """Tokens of the session's current context."""
        async with self._store.read() as conn:
            return await repo.context_tokens(conn, session.session_id)

    async def engine_state(self, engine_id: str, session_key: str, name: str) -> Any:
        """A value an engine (or the host on its behalf) keeps per key."""
        async with self._store.read() as conn:
            return await repo.get_engine_state(conn, engine_id, session_key, name)

    async def set_engine_state(self, engine_id: str, session_key: str, name: str, value: Any) -> None:
        """Keep `value` for the engine and key."""
        async with self._store.transaction() as conn:
            await repo.set_engine_state(conn, engine_id, session_key, name, value)

    async def mark_compacted(self, key: str, turn_number: int) -> None:
        """Record in the `turns` row that turn `turn_number` compacted."""
        async with self._store.transaction() as conn:
            await repo.mark_turn_compacted(conn, key, turn_number)

    async def persist(
        self,
        session: repo.SessionRow,
        messages: list[AgentMessage],
        entry_ids: EntryIds,
        is_heartbeat: bool,
        stats: TurnStats,
        writes: Writes | None = None,
    ) -> Persisted:
        """The turn's persist transaction: its new messages, its `turns` row and the caller's `writes`.

        A turn whose messages were all stored already (a replayed turn) adds no row (number None) and
        runs no `writes`; `writes` raising rolls the whole turn back.
        """
        items = [
            repo.NewMessage(message=m, entry_id=entry_ids(m) or new_entry_id(), is_heartbeat=is_heartbeat)
            for m in messages
        ]
        ids = [item.entry_id for item in items]
        async with self._store.transaction() as conn:
            written = await repo.append_messages(conn, session, items, self._store.counter)
            if not any(r.inserted for r in written):
                return Persisted(None, ids)
            if writes is not None:
                await writes(conn)
            number = await repo.record_turn(
                conn,
                session,
                assembled_tokens=stats.assembled_tokens,
                prompt_tokens=stats.prompt_tokens,
                budget=stats.budget,
                compacted=stats.compacted,
            )
        return Persisted(number, ids)
