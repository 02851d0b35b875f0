"""Per-session ordering for ``serve``: calls for one key run one at a time in arrival order, keys in parallel.

Each key has a queue and, while the queue is not empty, one worker task that runs its jobs in turn. A job
runs in its own task so that cancelling it (``$/cancel``) never cancels the worker or the jobs behind it.
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Callable, Coroutine
from typing import Any

from openclaw_ctx.contract import AbortSignal

__all__ = ["Job", "Lanes"]


class Job:
    """One call waiting in, or running on, its key's lane."""

    def __init__(self, work: Callable[[Job], Coroutine[Any, Any, None]], on_cancelled: Callable[[Job], None]) -> None:
        self.work = work
        """Runs the call and answers it; raises CancelledError when cancelled."""
        self.on_cancelled = on_cancelled
        """Answers the call as cancelled (called once, when its task ended cancelled)."""
        self.signal = AbortSignal()
        """Aborted on cancel, for engines that watch an abort signal."""
        self.task: asyncio.Task[None] | None = None
        self.cancelled = False

    def cancel(self) -> None:
        """Cancel the call: skipped if it has not started, its task cancelled if it runs."""
        self.cancelled = True
        self.signal.abort("cancelled by the client")
        if self.task is not None:
            self.task.cancel()


class Lanes:
    """The lanes of every key with calls pending."""

    def __init__(self) -> None:
        self._queues: dict[str, deque[Job]] = {}
        self._workers: set[asyncio.Task[None]] = set()

    def submit(self, key: str, job: Job) -> None:
        """Queue `job` behind the calls already queued for `key`."""
        queue = self._queues.get(key)
        if queue is None:
            queue = self._queues[key] = deque()
            worker = asyncio.create_task(self._work(key, queue), name=f"serve-lane:{key}")
            self._workers.add(worker)
            worker.add_done_callback(self._workers.discard)
        queue.append(job)

    async def _work(self, key: str, queue: deque[Job]) -> None:
        try:
            while queue:
                job = queue[0]
                job.task = asyncio.create_task(job.work(job))
                if job.cancelled:
                    job.task.cancel()
                await asyncio.wait([job.task])
                if job.task.cancelled():
                    job.on_cancelled(job)
                queue.popleft()
        finally:
            del self._queues[key]

    async def drain(self) -> None:
        """Return once every queued and running call has finished."""
        while self._workers:
            await asyncio.wait(set(self._workers))
