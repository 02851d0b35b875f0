"""Per-key scheduling: one lock per session key, and the deferred compaction a turn hands its lock to.

Turns on one key are serialised, within the process by an asyncio lock and across processes by the
store's key lock (:class:`openclaw_ctx.store.locks.ProcessLocks`), taken in that order and held together;
different keys run concurrently. An engine that defers compaction
(``drain_debt``) pays its debt after the reply: the turn hands the key's held lock to a background
task, which releases it when done, so the next turn on the key (or /compact, /new) waits for the
drain and the reply does not. :meth:`KeyScheduler.settle` awaits those tasks.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager

from openclaw_ctx.contract import CompactResult
from openclaw_ctx.store.locks import ProcessLocks

__all__ = ["Drain", "KeyScheduler", "drain_deferred"]

log = logging.getLogger("openclaw_ctx.host.runtime")

Drain = Callable[[], Awaitable[CompactResult | None]]
"""One key's deferred compaction, ready to run."""


class KeyScheduler:
    """The locks of session keys and the background drains holding them."""

    def __init__(self, process_locks: ProcessLocks | None = None) -> None:
        self._process_locks = process_locks or ProcessLocks(None)
        self._locks: dict[str, asyncio.Lock] = {}
        # Deferred compaction paid after the reply, one task per key at most (see `settle`).
        self._drains: dict[str, asyncio.Task[CompactResult | None]] = {}

    def lock(self, key: str) -> asyncio.Lock:
        """The key's in-process lock (:meth:`hold` also takes the cross-process one)."""
        return self._locks.setdefault(key, asyncio.Lock())

    @asynccontextmanager
    async def hold(self, key: str) -> AsyncIterator[None]:
        """Hold the key against every other turn, /compact or /new, in this process and in others."""
        async with self.lock(key), self._process_locks.key(key):
            yield

    @asynccontextmanager
    async def turn(self, key: str, hand_over: Callable[[], Drain | None]) -> AsyncIterator[None]:
        """Hold the key for a turn; on success, hand both locks to the drain `hand_over()` returns, if any."""
        lock = self.lock(key)
        await lock.acquire()
        process_lock: AbstractAsyncContextManager[None] | None = None
        handed_over = False
        try:
            process_lock = self._process_locks.key(key)
            await process_lock.__aenter__()
            yield
            drain = hand_over()
            if drain is not None:
                self._drains[key] = asyncio.create_task(_release_after(drain, lock, process_lock))
                handed_over = True
        finally:
            if not handed_over:
                if process_lock is not None:
                    await process_lock.__aexit__(None, None, None)
                lock.release()

    async def settle(self, key: str | None = None) -> list[CompactResult]:
        """Wait for the drains of one key, or of every key; returns what those that compacted did.

        A caller cancelled while waiting leaves the work running and still tracked.
        """
        keys = [key] if key is not None else list(self._drains)
        pending = {k: t for k in keys if (t := self._drains.pop(k, None)) is not None}
        if not pending:
            return []
        try:
            done = await asyncio.shield(asyncio.gather(*pending.values(), return_exceptions=True))
        except asyncio.CancelledError:
            for k, task in pending.items():
                if not task.done():
                    self._drains.setdefault(k, task)
            raise
        return [r for r in done if isinstance(r, CompactResult)]

    def forget(self, key: str) -> None:
        """Drop a key used once (a sub-agent's) unless something holds its lock."""
        if not self.lock(key).locked():
            self._locks.pop(key, None)


async def _release_after(
    drain: Drain, lock: asyncio.Lock, process_lock: AbstractAsyncContextManager[None]
) -> CompactResult | None:
    try:
        return await drain()
    finally:
        await process_lock.__aexit__(None, None, None)
        lock.release()


async def drain_deferred(
    key: str,
    drain: Callable[[str], Awaitable[CompactResult | None]],
    *,
    timeout_s: float,
    on_compacted: Callable[[], Awaitable[None]],
) -> CompactResult | None:
    """Pay `key`'s debt with `drain` under the safety timeout; a failure is logged and leaves the debt recorded."""
    started = time.perf_counter()
    try:
        async with asyncio.timeout(timeout_s):
            result = await drain(key)
        if result is not None and result.compacted:
            await on_compacted()
    except Exception as exc:  # incl. the safety timeout: the debt stays recorded for the next try
        log.warning("deferred compaction failed for %s: %s", key, exc or type(exc).__name__)
        return None
    if result is not None:
        log.info(
            "deferred compaction on %s: ok=%s compacted=%s in %.0f ms",
            key,
            result.ok,
            result.compacted,
            (time.perf_counter() - started) * 1000,
        )
    return result
