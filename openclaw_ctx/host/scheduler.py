"""Per-key scheduling: one lock per session key, and the deferred compaction a turn hands its lock to.

Turns on one key are serialised; different keys run concurrently. An engine that defers compaction
(``drain_debt``) pays its debt after the reply: the turn hands the key's held lock to a background
task, which releases it when done, so the next turn on the key (or /compact, /new) waits for the
drain and the reply does not. :meth:`KeyScheduler.settle` awaits those tasks.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager

from openclaw_ctx.contract import CompactResult

__all__ = ["Drain", "KeyScheduler", "drain_deferred"]

log = logging.getLogger("openclaw_ctx.host.runtime")

Drain = Callable[[], Awaitable[CompactResult | None]]
"""One key's deferred compaction, ready to run."""


class KeyScheduler:
    """The locks of session keys and the background drains holding them."""

    def __init__(self) -> None:
        self._locks: dict[str, asyncio.Lock] = {}
        # Deferred compaction paid after the reply, one task per key at most (see `settle`).
        self._drains: dict[str, asyncio.Task[CompactResult | None]] = {}

    def lock(self, key: str) -> asyncio.Lock:
        """The key's lock."""
        return self._locks.setdefault(key, asyncio.Lock())

    @asynccontextmanager
    async def turn(self, key: str, hand_over: Callable[[], Drain | None]) -> AsyncIterator[None]:
        """Hold the key's lock for a turn; on success, hand it to the drain `hand_over()` returns, if any."""
        lock = self.lock(key)
        await lock.acquire()
        handed_over = False
        try:
            yield
            drain = hand_over()
            if drain is not None:
                self._drains[key] = asyncio.create_task(_release_after(drain, lock))
                handed_over = True
        finally:
            if not handed_over:
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


async def _release_after(drain: Drain, lock: asyncio.Lock) -> CompactResult | None:
    try:
        return await drain()
    finally:
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
