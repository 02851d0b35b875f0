"""One Store and one model-less Runtime per database in a process, on a private event loop thread.

Agent frameworks call their session stores from anywhere: the Runner's loop, ``asyncio.run`` in a
test, worker threads that each run their own loop. A Store belongs to the loop that opened it, so
every call is carried to this backend's own loop and its result carried back; all the sessions of
one database (and engine) in a process share the backend, so their writes queue on one Store's
write lock instead of racing each other's connections. The last session to close it closes it.
"""

from __future__ import annotations

import asyncio
import tempfile
import threading
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, ClassVar, TypeVar

from openclaw_ctx.config import OpenClawConfig
from openclaw_ctx.host import Runtime
from openclaw_ctx.store import Store
from openclaw_ctx.summarize.base import Summarizer

__all__ = ["Backend"]

T = TypeVar("T")
MEMORY = ":memory:"


class Backend:
    """A Runtime on its own loop thread; get one with :meth:`acquire`, give it back with :meth:`release`."""

    _shared: ClassVar[dict[tuple[Any, ...], Backend]] = {}
    _guard: ClassVar[threading.Lock] = threading.Lock()

    def __init__(self, share_key: tuple[Any, ...] | None) -> None:
        self._share_key = share_key
        self._users = 0
        self._scratch: tempfile.TemporaryDirectory[str] | None = None
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="openclaw-ctx-store", daemon=True)
        self._thread.start()
        self.runtime: Runtime

    @classmethod
    def acquire(
        cls,
        db_path: str | Path,
        *,
        engine: str,
        context_window: int,
        config: OpenClawConfig | None = None,
        summarizer: Summarizer | None = None,
    ) -> Backend:
        """The backend of `db_path` for `engine`, opened (schema upgraded) on first use.

        ``":memory:"`` gives a private database in a temporary directory, removed when released.
        """
        private = str(db_path) == MEMORY or config is not None or summarizer is not None
        key = None if private else (str(Path(db_path).expanduser().resolve()), engine, context_window)
        with cls._guard:
            backend = cls._shared.get(key) if key is not None else None
            if backend is None:
                backend = cls(key)
                try:
                    backend._open(db_path, engine, context_window, config, summarizer)
                except BaseException:
                    backend._stop()
                    raise
                if key is not None:
                    cls._shared[key] = backend
            backend._users += 1
            return backend

    def _open(
        self,
        db_path: str | Path,
        engine: str,
        window: int,
        config: OpenClawConfig | None,
        summarizer: Summarizer | None,
    ) -> None:
        if str(db_path) == MEMORY:
            self._scratch = tempfile.TemporaryDirectory(prefix="openclaw-ctx-")
            db_path = Path(self._scratch.name) / "memory.db"

        async def start() -> Runtime:
            store = await Store.open(db_path)
            try:
                return await Runtime.create(
                    store,
                    config=(config or OpenClawConfig()).with_engine(engine),
                    summarizer=summarizer,
                    context_window=window,
                )
            except BaseException:
                await store.close()
                raise

        self.runtime = asyncio.run_coroutine_threadsafe(start(), self._loop).result()

    def release(self) -> None:
        """One user fewer; the last one settles background compaction, closes the store and the thread."""
        with self._guard:
            self._users -= 1
            if self._users > 0:
                return
            if self._share_key is not None:
                self._shared.pop(self._share_key, None)

        async def finish() -> None:
            try:
                await self.runtime.dispose()
            finally:
                await self.runtime.store.close()

        try:
            asyncio.run_coroutine_threadsafe(finish(), self._loop).result()
        finally:
            self._stop()

    def _stop(self) -> None:
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join()
        self._loop.close()
        if self._scratch is not None:
            self._scratch.cleanup()

    async def call(self, work: Callable[[Runtime], Awaitable[T]], *, mutation: bool = False) -> T:
        """Run ``work(runtime)`` on the backend's loop and await its result from the caller's loop.

        A `mutation` finishes even when the caller is cancelled (the cancellation is raised once the
        write is done), as the SDKs require of their session stores; a read is cancelled with it.
        """
        future = asyncio.wrap_future(asyncio.run_coroutine_threadsafe(_run(work, self.runtime), self._loop))
        if not mutation:
            return await future
        cancelled: asyncio.CancelledError | None = None
        while not future.done():
            try:
                await asyncio.wait({future})
            except asyncio.CancelledError as exc:
                cancelled = cancelled or exc
        if cancelled is not None:
            raise cancelled
        return future.result()


async def _run(work: Callable[[Runtime], Awaitable[T]], runtime: Runtime) -> T:
    return await work(runtime)
