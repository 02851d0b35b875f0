"""The server as the host's transcript for engines that leave persistence to the host.

An engine without ``ownsCompaction`` (``legacy``) stores nothing itself: in this project's runtime the
host persists every message and the engine's ``compact`` delegates to the runtime's compaction over
those stored rows. Under ``serve`` the server is that host, so before such an engine's ``ingest``,
``ingestBatch`` or ``afterTurn`` runs, the messages the call carries are written to the key's active
session (created with the host's ``sessionId``), idempotently on their entry ids (or provider event keys).
"""

from __future__ import annotations

from collections.abc import Sequence

from pydantic import BaseModel

from openclaw_ctx.contract import AfterTurnParams, ContextEngine, IngestBatchParams, IngestParams
from openclaw_ctx.messages import AgentMessage, provider_event_key
from openclaw_ctx.store import repo
from openclaw_ctx.store.store import Store

__all__ = ["persists_for", "record_messages"]


def persists_for(engine: ContextEngine) -> bool:
    """Whether the server keeps the transcript for `engine` (it does not own compaction)."""
    return not engine.info.owns_compaction


def _carried(params: BaseModel) -> tuple[Sequence[AgentMessage], Sequence[str | None]] | None:
    if isinstance(params, IngestParams):
        return [params.message], [params.entry_id]
    if isinstance(params, IngestBatchParams):
        return params.messages, params.entry_ids or [None] * len(params.messages)
    if isinstance(params, AfterTurnParams):
        new = params.messages[params.pre_prompt_message_count :]
        return new, [None] * len(new)
    return None


async def record_messages(store: Store, params: BaseModel) -> int:
    """Persist the messages `params` carries (none for other hooks); returns how many were new."""
    carried = _carried(params)
    if carried is None or getattr(params, "is_heartbeat", False):
        return 0
    messages, entry_ids = carried
    if not messages or len(entry_ids) != len(messages):
        return 0
    session_id: str = getattr(params, "session_id")  # noqa: B009 - every carrying params model has one
    key = getattr(params, "session_key", None) or session_id
    items = [
        repo.NewMessage(message=m, entry_id=e, event_key=provider_event_key(m))
        for m, e in zip(messages, entry_ids, strict=True)
    ]
    async with store.transaction() as conn:
        session = await repo.ensure_session(conn, key, session_id=session_id)
        written = await repo.append_messages(conn, session, items, store.counter)
    return sum(1 for w in written if w.inserted)
