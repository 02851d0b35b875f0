"""Locks that hold across processes: one per session key, and one for the schema.

SQLite serialises single statements and transactions, not a whole turn: two processes running turns on
one session key would each compact from a snapshot taken before the other appended, and a turn's
messages would fall out of what the model sees. So a turn (and a compaction, an import, a migration)
on a key holds that key's lock for its whole read-plan-write cycle, here as an advisory ``flock`` on a
small file in ``<db>.locks/`` beside the database. Processes on other keys never wait; readers never
lock. The schema lock serialises first opens, so concurrent ``db upgrade`` runs apply each migration
once instead of failing with "database is locked".

Waiting polls with a non-blocking ``flock`` and ``asyncio.sleep``, so a cancelled waiter holds nothing.
A process that dies releases its locks with its file descriptors: a crash never leaves a key locked.
The locks are not re-entrant (a second hold of the same key, even in the same process, waits for the
first): take them at the outermost entry point only (a turn, `migrate_key`, an import of a key).
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import hashlib
import os
from collections.abc import AsyncIterator
from pathlib import Path

__all__ = ["ProcessLocks", "lock_dir_for"]

_POLL_START_S = 0.002
_POLL_MAX_S = 0.05


def lock_dir_for(db_path: str | Path) -> Path:
    """The directory that holds the lock files of the database at `db_path`."""
    db = Path(db_path)
    return db.with_name(db.name + ".locks")


def _try_lock(fd: int) -> bool:
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return False
    return True


class ProcessLocks:
    """Per-key and schema locks for one database file; `None` as the path makes every lock a no-op."""

    def __init__(self, db_path: str | Path | None) -> None:
        self.directory = lock_dir_for(db_path) if db_path is not None else None

    def _open(self, name: str) -> int | None:
        if self.directory is None:
            return None
        try:
            self.directory.mkdir(exist_ok=True)
            return os.open(self.directory / name, os.O_RDWR | os.O_CREAT, 0o600)
        except OSError:
            # Read-only storage: nobody can write the database either, so there is nothing to order.
            return None

    @staticmethod
    def _key_file(session_key: str) -> str:
        return "key-" + hashlib.sha256(session_key.encode("utf-8", "surrogatepass")).hexdigest()[:32] + ".lock"

    @contextlib.asynccontextmanager
    async def key(self, session_key: str) -> AsyncIterator[None]:
        """Hold `session_key`'s lock (waiting for another process that holds it)."""
        async with self._held(self._key_file(session_key)):
            yield

    @contextlib.asynccontextmanager
    async def _held(self, name: str) -> AsyncIterator[None]:
        fd = self._open(name)
        if fd is None:
            yield
            return
        try:
            delay = _POLL_START_S
            while not _try_lock(fd):
                await asyncio.sleep(delay)
                delay = min(delay * 2, _POLL_MAX_S)
            yield
        finally:
            os.close(fd)  # closing the descriptor releases the lock

    @contextlib.asynccontextmanager
    async def schema(self) -> AsyncIterator[None]:
        """Hold the schema lock: first opens and upgrades run one process at a time."""
        async with self._held("schema.lock"):
            yield
