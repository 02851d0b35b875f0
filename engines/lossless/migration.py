"""lossless-claw's side of engine migration: the adoption capability (`openclaw_ctx.contract.adoption`).

`migrate --to lossless-claw` and `backfill` resolve this engine through the registry and call these
methods; core never imports this module. Adopting a key runs :func:`engines.lossless.backfill.backfill_key`:
the engine's own sweep builds the DAG over the key's context in committed, resumable batches, adopting
the summaries already there (a legacy summary becomes a node), then rotates the key to a lossless-claw
session.
"""

from __future__ import annotations

from collections.abc import Callable

from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncConnection

from engines.lossless.assemble import fresh_tail_start
from engines.lossless.backfill import backfill_key, pending_backfill
from engines.lossless.config import LosslessConfig
from openclaw_ctx.contract.adoption import AdoptionPreview, AdoptionProgress, AdoptionReport
from openclaw_ctx.errors import NotFoundError
from openclaw_ctx.store import repo
from openclaw_ctx.store.repo import MessageItem
from openclaw_ctx.store.store import Store
from openclaw_ctx.summarize.base import Summarizer

__all__ = ["ContextAdoption", "fresh_tail_messages"]

_PAGE_START = text("SELECT ordinal FROM context_items WHERE session_id = :sid ORDER BY ordinal DESC LIMIT 1 OFFSET :n")


async def fresh_tail_messages(conn: AsyncConnection, session_id: str, config: LosslessConfig, budget: int) -> int:
    """Raw messages in the fresh tail lossless-claw would protect, reading only the end of a long context."""
    size = 8 * config.fresh_tail_count + 256
    while True:
        boundary = await conn.scalar(_PAGE_START, {"sid": session_id, "n": size})
        entries = await repo.load_context(conn, session_id, after=boundary)
        view = [(e.message if isinstance(e, MessageItem) else None, e.token_count) for e in entries]
        tail = fresh_tail_start(view, config.fresh_tail_count, config.tail_max_tokens(budget))
        # A tail reaching the page's first item may reach further back: read a larger page.
        if tail > 0 or boundary is None:
            return sum(1 for e in entries[tail:] if isinstance(e, MessageItem))
        size *= 4


class ContextAdoption:
    """The adoption capability, mixed into :class:`engines.lossless.engine.LosslessContextEngine`."""

    store: Store
    config: LosslessConfig
    summarizer: Summarizer

    async def preview_adoption(self, session_key: str, *, budget: int) -> AdoptionPreview:
        """The fresh tail adopting would keep, and whether an interrupted backfill would resume."""
        async with self.store.read() as conn:
            session = await repo.active_session(conn, session_key)
            if session is None:
                raise NotFoundError(f"session key {session_key!r} has no active session")
            pending = await pending_backfill(conn, session_key)
            kept = await fresh_tail_messages(conn, session.session_id, self.config, budget)
        return AdoptionPreview(kept, pending is not None and pending.get("session_id") == session.session_id)

    async def adoption_pending(self, session_key: str) -> bool:
        """True when a backfill of the key was interrupted and waits to resume."""
        async with self.store.read() as conn:
            return await pending_backfill(conn, session_key) is not None

    async def adopt_context(
        self,
        session_key: str,
        *,
        budget: int,
        batch: int,
        reason: str,
        stop_after: int | None = None,
        progress: Callable[[AdoptionProgress], None] | None = None,
    ) -> AdoptionReport:
        """Build the DAG over the key's context in batches and rotate it to a lossless-claw session."""
        return await backfill_key(
            self.store,
            session_key,
            config=self.config,
            summarizer=self.summarizer,
            budget=budget,
            batch=batch,
            reason=reason,
            stop_after=stop_after,
            progress=progress,
        )
