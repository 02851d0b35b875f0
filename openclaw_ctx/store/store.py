"""The Store: one AsyncEngine over aiosqlite per database file, its pragmas, transactions and schema checks.

Engines never open connections; the registry's factory context hands them this object.
"""

from __future__ import annotations

import asyncio
import contextlib
import sqlite3
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from alembic import command
from alembic.script import ScriptDirectory
from sqlalchemy import event, text
from sqlalchemy.engine import Connection
from sqlalchemy.exc import OperationalError, SQLAlchemyError
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine, create_async_engine

from openclaw_ctx.errors import DatabaseCorruptError, MigrationRequiredError, ReadOnlyStorageError, StoreError
from openclaw_ctx.store.files import (
    BUSY_TIMEOUT_MS,
    alembic_config,
    database_path,
    prepare_path,
    read_only_url,
    refuse_unusable,
    revision_known,
    storage_is_read_only,
    too_new,
    wrap_db_errors,
)
from openclaw_ctx.store.locks import ProcessLocks
from openclaw_ctx.store.upgrade_progress import upgrade_progress
from openclaw_ctx.tokens import TokenCounter, get_counter

__all__ = ["BUSY_TIMEOUT_MS", "SchemaState", "Store", "alembic_config", "database_path", "wrap_db_errors"]

ANALYSIS_LIMIT = 400  # rows ANALYZE samples per index when close() runs PRAGMA optimize (SQLite's advice)


@dataclass(frozen=True)
class SchemaState:
    """Where a database's schema stands relative to this code."""

    current: str | None
    head: str
    known: bool

    @property
    def up_to_date(self) -> bool:
        """True when the database is at this code's head revision."""
        return self.current == self.head


class Store:
    """Owns the async engine for one SQLite database.

    Use :meth:`open`; it checks the file, refuses a newer schema, upgrades an older one (unless
    ``upgrade=False``) and returns a ready store. Writes go through :meth:`transaction`, which takes
    the store's write lock and begins ``IMMEDIATE`` so concurrent writers queue instead of failing.
    """

    def __init__(self, engine: AsyncEngine, path: str, counter: TokenCounter, *, read_only: bool = False) -> None:
        self.engine = engine
        self.path = path
        self.counter = counter
        self.read_only = read_only
        """The file is on storage this process cannot write: reads work, every write is refused."""
        self._write_lock = asyncio.Lock()
        self._closed = False
        self._closing = False
        self._background: set[asyncio.Task[Any]] = set()
        self.locks = ProcessLocks(path)
        """Cross-process locks: a session key's for a whole turn or compaction, the schema's for upgrades."""

    # --- opening -----------------------------------------------------------------------------

    @classmethod
    async def open(
        cls,
        path: str | Path,
        *,
        upgrade: bool = True,
        counter: TokenCounter | None = None,
        engine_kwargs: dict[str, Any] | None = None,
    ) -> Store:
        """Open (creating if needed) the database at `path` and bring its schema to head.

        Raises:
            DatabaseCorruptError: the file is not SQLite or is damaged.
            SchemaTooNewError: the schema was written by a newer openclaw-ctx (the file is untouched).
            MigrationRequiredError: the schema is older and `upgrade` is False.
        """
        store = await cls.connect(path, counter=counter, engine_kwargs=engine_kwargs)
        try:
            state = await store.schema_state()
            if not state.known:
                raise too_new(store.path, state.current, state.head)
            if not state.up_to_date:
                if store.read_only:
                    raise MigrationRequiredError(
                        f"{store.path}: schema at {state.current or 'empty'}, code expects {state.head}, and the "
                        "database is on read-only storage; upgrade it where it can be written"
                    )
                if not upgrade:
                    raise MigrationRequiredError(
                        f"{store.path}: schema at {state.current or 'empty'}, code expects {state.head}; "
                        "run `openclaw-ctx db upgrade`"
                    )
                await store.upgrade("head")
        except BaseException:
            await store.engine.dispose()
            raise
        return store

    @classmethod
    async def connect(
        cls,
        path: str | Path,
        *,
        counter: TokenCounter | None = None,
        engine_kwargs: dict[str, Any] | None = None,
    ) -> Store:
        """Open the database at `path` without migrating it (``openclaw-ctx db …`` and ``doctor`` use this).

        The file is checked before any connection with pragmas is made, so a foreign or newer
        database is refused byte-for-byte untouched. An older or empty schema is left as it is.

        Raises:
            DatabaseCorruptError: the file is not SQLite or is damaged.
            SchemaTooNewError: the schema was written by a newer openclaw-ctx (the file is untouched).
            ForeignDatabaseError: another program's database (the file is untouched).
        """
        path = prepare_path(path)
        read_only = storage_is_read_only(Path(path))
        refuse_unusable(path)
        # A read-only store is opened by URI (mode=ro, immutable on a read-only mount): SQLite would
        # otherwise fail to open it at all, wanting to create the -shm file beside it.
        url = (
            f"sqlite+aiosqlite:///{read_only_url(Path(path))}&uri=true" if read_only else f"sqlite+aiosqlite:///{path}"
        )
        engine = create_async_engine(url, **(engine_kwargs or {}))
        _install_connection_hooks(engine, read_only=read_only)
        return cls(engine, path, counter or get_counter(), read_only=read_only)

    def track(self, task: asyncio.Task[Any]) -> None:
        """A background writer (vector upkeep) that :meth:`close` lets finish its batch first."""
        self._background.add(task)
        task.add_done_callback(self._background.discard)

    @property
    def closing(self) -> bool:
        """True once :meth:`close` began: background writers stop after their current batch."""
        return self._closing or self._closed

    async def close(self) -> None:
        """Dispose of the engine (running a bounded ``PRAGMA optimize`` first); later reads and writes raise.

        Background writers registered with :meth:`track` finish their current batch first, so none
        is left holding a connection of a disposed engine.
        """
        if self._closed:
            return
        self._closing = True
        loop = asyncio.get_running_loop()
        pending = [t for t in self._background if not t.done() and t.get_loop() is loop]
        if pending:
            await asyncio.wait(pending, timeout=30)
        self._closed = True
        if self.read_only:
            await self.engine.dispose()
            return
        with contextlib.suppress(SQLAlchemyError):
            async with self.engine.connect() as conn:
                # Without a limit, optimize may ANALYZE whole indexes: on a 560 MB store that read
                # ~120 MB of pages into this process at every close (bench/README.md, memory).
                await conn.exec_driver_sql(f"PRAGMA analysis_limit={ANALYSIS_LIMIT}")
                await conn.exec_driver_sql("PRAGMA optimize")
        await self.engine.dispose()

    async def __aenter__(self) -> Store:
        return self

    async def __aexit__(self, *_exc: object) -> None:
        await self.close()

    # --- schema --------------------------------------------------------------------------------

    async def schema_state(self) -> SchemaState:
        """The database's Alembic revision compared with this code's."""
        script = ScriptDirectory.from_config(alembic_config())
        head = script.get_current_head()
        assert head is not None
        with wrap_db_errors(self.path):
            async with self.engine.connect() as conn:
                has_table = await conn.scalar(
                    text("SELECT 1 FROM sqlite_master WHERE type='table' AND name='alembic_version'")
                )
                current = await conn.scalar(text("SELECT version_num FROM alembic_version")) if has_table else None
        known = current is None or revision_known(script, current)
        return SchemaState(current=current, head=head, known=known)

    async def upgrade(self, revision: str = "head") -> None:
        """Run Alembic upgrade in-process on this store's connection."""
        await self._alembic(lambda cfg: command.upgrade(cfg, revision))

    async def downgrade(self, revision: str) -> None:
        """Run Alembic downgrade in-process on this store's connection."""
        await self._alembic(lambda cfg: command.downgrade(cfg, revision))

    async def _alembic(self, action: Any) -> None:
        # Read here, in the caller's context: the migration itself runs in SQLAlchemy's greenlet.
        progress = upgrade_progress.get()

        def run(sync_conn: Connection) -> None:
            cfg = alembic_config()
            cfg.attributes["connection"] = sync_conn
            cfg.attributes["progress"] = progress
            action(cfg)

        self.require_writable()
        # The schema lock makes concurrent first opens take turns: the later ones find the schema at
        # head and have nothing left to do, instead of failing with "database is locked".
        # BEGIN IMMEDIATE takes the write lock before Alembic's first read: a deferred transaction that
        # read first and wrote later would fail at once ("database is locked", no busy wait) whenever
        # another connection committed in between.
        with wrap_db_errors(self.path):
            async with self.locks.schema(), self._write_lock, self.engine.connect() as conn:
                conn = await conn.execution_options(openclaw_begin="BEGIN IMMEDIATE")
                async with conn.begin():
                    await conn.run_sync(run)

    # --- transactions -------------------------------------------------------------------------

    @contextlib.asynccontextmanager
    async def transaction(self) -> AsyncIterator[AsyncConnection]:
        """One write transaction (``BEGIN IMMEDIATE``), committed on exit, rolled back on error.

        The commit is shielded from caller cancellation: once the block has finished, a cancelled
        caller cannot leave a half-committed write.
        """
        self.require_writable()
        self._require_open()
        async with self._write_lock:
            with wrap_db_errors(self.path):
                conn = await self.engine.connect()
                try:
                    conn = await conn.execution_options(openclaw_begin="BEGIN IMMEDIATE")
                    await conn.begin()
                    try:
                        yield conn
                    except BaseException:
                        await asyncio.shield(conn.rollback())
                        raise
                    await asyncio.shield(conn.commit())
                finally:
                    await asyncio.shield(conn.close())

    async def check_integrity(self) -> None:
        """Refuse a bulk write into a damaged file: ``PRAGMA quick_check``, its first problems named.

        It reads the whole file (about a second per few hundred MB), so commands that write a whole
        history (replay, import, migrate, backfill) run it first; a turn does not.

        Raises:
            DatabaseCorruptError: the check found damage; nothing was written.
        """
        async with self.read() as conn:
            damage = [str(row[0]) for row in await conn.exec_driver_sql("PRAGMA quick_check(5)")]
        if damage != ["ok"]:
            found = "; ".join(" ".join(line.split()) for line in damage)
            raise DatabaseCorruptError(
                f"{self.path}: the database fails its integrity check ({found}); nothing was written. "
                f"Keep a copy, then restore a backup or rebuild it with `sqlite3 {self.path} .recover`"
            )

    def _require_open(self) -> None:
        if self._closed:
            raise StoreError(f"{self.path}: this Store was closed; open the database again to use it")

    def require_writable(self) -> None:
        """Raise ReadOnlyStorageError when the store was opened from storage this process cannot write."""
        if self.read_only:
            raise ReadOnlyStorageError(
                f"{self.path}: the database is on read-only storage (or not writable by this user); "
                "reading works, this command writes and nothing was written"
            )

    @contextlib.asynccontextmanager
    async def read(self) -> AsyncIterator[AsyncConnection]:
        """A read transaction: one consistent snapshot for the block."""
        self._require_open()
        with wrap_db_errors(self.path):
            async with self.engine.connect() as conn, conn.begin():
                yield conn


def _install_connection_hooks(engine: AsyncEngine, *, read_only: bool) -> None:
    sync_engine = engine.sync_engine
    # journal_mode and synchronous would write (or fail) on storage that cannot be written.
    pragmas = (
        (f"PRAGMA busy_timeout={BUSY_TIMEOUT_MS}", "PRAGMA query_only=ON", "PRAGMA foreign_keys=ON")
        if read_only
        else (
            f"PRAGMA busy_timeout={BUSY_TIMEOUT_MS}",
            "PRAGMA journal_mode=WAL",
            "PRAGMA synchronous=NORMAL",
            "PRAGMA foreign_keys=ON",
        )
    )

    @event.listens_for(sync_engine, "connect")
    def _on_connect(dbapi_conn: Any, _record: Any) -> None:
        # Let SQLAlchemy, not the driver, decide when transactions begin (see _on_begin).
        dbapi_conn.isolation_level = None
        cursor = dbapi_conn.cursor()
        for pragma in (
            *pragmas,
            "PRAGMA cache_size=-65536",
            "PRAGMA temp_store=MEMORY",
            "PRAGMA mmap_size=268435456",
        ):
            try:
                cursor.execute(pragma)
            except sqlite3.DatabaseError as exc:
                cursor.close()
                raise OperationalError(pragma, {}, exc) from exc
        cursor.close()

    @event.listens_for(sync_engine, "begin")
    def _on_begin(conn: Connection) -> None:
        conn.exec_driver_sql(conn.get_execution_options().get("openclaw_begin", "BEGIN"))
