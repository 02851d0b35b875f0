"""Ingest, batch ingest and bootstrap for the lossless engine.

The host persists every message itself (whatever engine is active), so these are idempotent on the
transcript entry id and the provider event key — never on a content hash: a message the host (or a
replayed turn) already stored is reported ``ingested=False`` and written nowhere. Engine-side ingest
exists for hosts that do not persist (direct library use). Bootstrap imports a new session's history
from the host's SQLite agent store, and adopts whatever another engine (legacy) left in the store:
its messages and context items stay as they are.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from sqlalchemy import func, select
from sqlalchemy.ext.asyncio import AsyncConnection

from engines.lossless.config import LosslessConfig
from engines.lossless.large_content import externalise_session
from openclaw_ctx.contract import AfterTurnParams, BootstrapParams, BootstrapResult, CommitTurnParams
from openclaw_ctx.errors import HostStoreError, MissingDependencyError, NotFoundError
from openclaw_ctx.messages import AgentMessage, provider_event_key
from openclaw_ctx.store import repo
from openclaw_ctx.store.models import ContextItem
from openclaw_ctx.store.store import Store
from openclaw_ctx.tokens import TokenCounter
from openclaw_ctx.transcripts import (
    HostSession,
    Transcript,
    host_session_of,
    import_host_session,
    read_host_transcript,
    with_host_entry_ids,
)

__all__ = ["BOOTSTRAP_STATE", "ENGINE_ID", "IngestOutcome", "bootstrap_session", "ingest_messages", "session_key_of"]

_log = logging.getLogger(__name__)

ENGINE_ID = "lossless-claw"
BOOTSTRAP_STATE = "bootstrap"


async def session_key_of(conn: AsyncConnection, session_id: str, session_key: str | None) -> str:
    """The stable key for a hook call: the given key, else the stored session's, else the id itself."""
    if session_key:
        return session_key
    try:
        return (await repo.get_session(conn, session_id)).session_key
    except NotFoundError:
        return session_id


@dataclass(frozen=True)
class IngestOutcome:
    """How many messages were new, and which session they went to."""

    inserted: int
    session_id: str | None
    file_ids: tuple[str, ...] = ()


async def ingest_messages(
    store: Store,
    config: LosslessConfig,
    *,
    session_id: str,
    session_key: str | None,
    messages: Sequence[AgentMessage],
    entry_ids: Sequence[str | None] | None = None,
    is_heartbeat: bool = False,
) -> IngestOutcome:
    """Persist `messages` to the key's active session in one transaction (duplicates skipped).

    Heartbeats and ignored or stateless sessions store nothing. New messages over the large-content
    threshold are externalised in the same transaction.

    Raises:
        ValueError: `entry_ids` does not line up with `messages`, or repeats an id.
    """
    if entry_ids is not None and len(entry_ids) != len(messages):
        raise ValueError(f"entry_ids has {len(entry_ids)} items for {len(messages)} messages")
    if is_heartbeat or not messages:
        return IngestOutcome(0, None)
    async with store.transaction() as conn:
        key = await session_key_of(conn, session_id, session_key)
        if config.is_ignored(key) or config.is_stateless(key):
            return IngestOutcome(0, None)
        session = await repo.ensure_session(conn, key, session_id=session_id, engine_id=ENGINE_ID)
        ids = list(entry_ids) if entry_ids is not None else [None] * len(messages)
        items = [
            repo.NewMessage(message=m, entry_id=e, event_key=provider_event_key(m))
            for m, e in zip(messages, ids, strict=True)
        ]
        results = await repo.append_messages(conn, session, items, store.counter)
        inserted = sum(1 for r in results if r.inserted)
        files: list[str] = []
        if inserted:
            files = await externalise_session(
                conn, session.session_id, key, config.large_file_token_threshold, store.counter
            )
    return IngestOutcome(inserted, session.session_id, tuple(files))


async def commit_turn_messages(
    store: Store, config: LosslessConfig, params: CommitTurnParams
) -> tuple[Literal["committed", "duplicate"], AfterTurnParams | None]:
    """A host's ``commitTurn`` in one transaction: the turn once per advancement key, large content
    externalised. Returns the status and, for a turn committed now, the ``afterTurn`` to evaluate;
    heartbeats and ignored or stateless sessions store nothing (``committed``, nothing to evaluate)."""
    if not params.is_heartbeat:
        params = await with_host_entry_ids(params)  # the tool calls and results get their host entry ids
    async with store.transaction() as conn:
        key = await repo.turn_key(conn, params)
        if params.is_heartbeat or config.is_ignored(key) or config.is_stateless(key):
            return "committed", None
        done = await repo.commit_host_turn(conn, params, store.counter, engine_id=ENGINE_ID)
        if done.inserted:
            await externalise_session(conn, done.session_id, key, config.large_file_token_threshold, store.counter)
    if done.status == "duplicate":
        return "duplicate", None
    turn = AfterTurnParams(
        session_id=done.session_id,
        session_key=key,
        messages=params.messages,
        pre_prompt_message_count=0,
        token_budget=params.token_budget,
    )
    return "committed", turn


async def _host_history(
    store: Store, config: LosslessConfig, params: BootstrapParams
) -> tuple[HostSession, Transcript] | str | None:
    """The host's transcript of a session this store has never seen (read outside any write), a reason
    it cannot be read, or None when there is nothing to import."""
    where = host_session_of(params.session_target, params.session_file, params.session_id)
    if where is None:
        return None
    async with store.read() as conn:
        key = await session_key_of(conn, params.session_id, params.session_key)
        if config.is_ignored(key) or config.is_stateless(key) or await repo.active_session(conn, key) is not None:
            return None
    try:
        return where, await asyncio.to_thread(read_host_transcript, where)
    except (HostStoreError, MissingDependencyError) as exc:
        return str(exc)


async def bootstrap_session(store: Store, config: LosslessConfig, params: BootstrapParams) -> BootstrapResult:
    """Adopt the key's existing store state for this engine (once), recording a bootstrap mark.

    A session this store has never seen whose host keeps its transcript in its SQLite agent store
    (``sessionTarget.storePath``, or a ``sqlite:`` sessionFile marker) is imported from there first:
    the history from before this engine, with the host's compactions as legacy summaries. Messages,
    summaries (legacy ones included) and context items written by the host or another engine stay
    exactly as they are; large content already in the context is externalised.
    """
    counter: TokenCounter = store.counter
    history = await _host_history(store, config, params)
    if isinstance(history, str):
        # Refusing the turn would quarantine the engine for the whole process: run without the old history.
        _log.warning("bootstrap: the host's history was not imported: %s", history)
        return BootstrapResult(bootstrapped=False, reason=f"host history not imported: {history}")
    imported = 0
    async with store.transaction() as conn:
        key = await session_key_of(conn, params.session_id, params.session_key)
        if config.is_ignored(key):
            return BootstrapResult(bootstrapped=False, reason="session matches ignoreSessionPatterns")
        mark = await repo.get_engine_state(conn, ENGINE_ID, key, BOOTSTRAP_STATE)
        existing = await repo.active_session(conn, key)
        if mark is not None and existing is not None and mark.get("session_id") == existing.session_id:
            return BootstrapResult(bootstrapped=False, reason="already bootstrapped")
        if config.is_stateless(key):
            return BootstrapResult(bootstrapped=False, reason="stateless session: read-only")
        if existing is None and history is not None:
            where, transcript = history
            report = await import_host_session(conn, counter, transcript, where, key)
            if report.error:
                return BootstrapResult(bootstrapped=False, reason=f"host history not imported: {report.error}")
            imported = report.messages_new
            existing = await repo.active_session(conn, key)
        session = existing or await repo.ensure_session(
            conn, key, session_id=params.session_id, session_file=params.session_file, engine_id=ENGINE_ID
        )
        rows = await conn.execute(
            select(ContextItem.item_type, func.count())
            .where(ContextItem.session_id == session.session_id)
            .group_by(ContextItem.item_type)
        )
        counts: dict[str, int] = {str(kind): int(n) for kind, n in rows.all()}
        files = await externalise_session(conn, session.session_id, key, config.large_file_token_threshold, counter)
        await repo.set_engine_state(
            conn,
            ENGINE_ID,
            key,
            BOOTSTRAP_STATE,
            {
                "at": repo.utc_now(),
                "session_id": session.session_id,
                "previous_engine": session.engine_id,
                "adopted_messages": counts.get("message", 0),
                "adopted_summaries": counts.get("summary", 0),
                "externalised": files,
                "imported_messages": imported,
            },
        )
    adopted = counts.get("message", 0) + counts.get("summary", 0)
    reason = f"adopted {adopted} context items" + (f" from engine {session.engine_id}" if session.engine_id else "")
    if imported:
        reason = f"imported {imported} messages from the host's transcript; {reason}"
    return BootstrapResult(bootstrapped=True, imported_messages=imported, reason=reason)
