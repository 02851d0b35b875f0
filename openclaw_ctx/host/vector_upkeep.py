"""Embedding each turn's new messages and summaries after the reply, so semantic recall finds them stored.

One background task per runtime works through the keys that had turns, oldest rows first, in short
transactions of their own; a turn never waits for it (``settle()`` and ``dispose()`` do). The model
loads in a worker thread on first use; when it cannot load, upkeep stops and recall is lexical.
Vectors are derived data: a failed batch is only logged, and ``openclaw-ctx embed`` catches up.
"""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING

from sqlalchemy.exc import SQLAlchemyError

from openclaw_ctx.errors import StoreError
from openclaw_ctx.store.store import Store

if TYPE_CHECKING:
    from openclaw_ctx.recall.embedding import Embedder

__all__ = ["VectorUpkeep"]

log = logging.getLogger("openclaw_ctx.host.runtime")

_PER_PASS = 1024
"""Items one key embeds per pass before the next key gets its turn."""


class VectorUpkeep:
    """The keys whose new rows await vectors, and the one task embedding them."""

    def __init__(self, store: Store, *, enabled: bool = True) -> None:
        self._store = store
        self._enabled = enabled
        self._dirty: dict[str, None] = {}
        self._after: dict[str, dict[str, int]] = {}
        self._task: asyncio.Task[None] | None = None

    def touch(self, session_key: str) -> None:
        """Note that the key has new rows; start the worker if it is idle."""
        if not self._enabled:
            return
        self._dirty[session_key] = None
        if self._task is None or self._task.done():
            self._task = asyncio.get_running_loop().create_task(self._work(), name="openclaw-ctx vector upkeep")
            self._store.track(self._task)

    async def settle(self) -> None:
        """Wait until every noted key is embedded (a cancelled caller leaves the work running)."""
        while self._task is not None and not self._task.done():
            await asyncio.shield(self._task)

    async def _work(self) -> None:
        # Imported here: NumPy and the model load only in a process that runs turns with upkeep on.
        from openclaw_ctx.recall.embedding import default_embedder

        embedder = await asyncio.to_thread(default_embedder)
        if embedder is None or self._store.closing:
            self._enabled = False
            self._dirty.clear()
            return
        while self._dirty and not self._store.closing:
            key = next(iter(self._dirty))
            del self._dirty[key]
            if not await self._embed(key, embedder):
                return

    async def _embed(self, key: str, embedder: Embedder) -> bool:
        """One pass over the key; False when the store is gone (upkeep stops)."""
        from openclaw_ctx.recall.vectors import embed_pending

        try:
            report = await embed_pending(
                self._store, embedder, session_key=key, after=self._after.get(key), limit=_PER_PASS
            )
        except StoreError as exc:
            log.debug("vector upkeep stopped: %s", exc)
            self._dirty.clear()
            return False
        except SQLAlchemyError as exc:  # derived data: a busy or damaged store is not the turn's problem
            log.warning("vector upkeep skipped %s: %s", key, exc)
            return True
        self._after[key] = report.after
        if report.messages + report.summaries >= _PER_PASS:
            self._dirty[key] = None  # more to do: back of the queue
        return True
