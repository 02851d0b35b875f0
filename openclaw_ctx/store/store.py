"""The Store: one AsyncEngine over aiosqlite per database file, its pragmas, transactions and schema checks.

Engines never open connections; the registry's factory context hands them this object.
"""

from __future__ import annotations

import asyncio
import contextlib
import re
import sqlite3
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any

from alembic import command
from alembic.config import Config
from alembic.script import ScriptDirectory
from sqlalchemy import event, text
from sqlalchemy.engine import Connection
from sqlalchemy.exc import DBAPIError, OperationalError, SQLAlchemyError
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine, create_async_engine

from openclaw_ctx.errors import (
    DatabaseCorruptError,
    MigrationRequiredError,
    SchemaTooNewError,
    StoreError,
)
from openclaw_ctx.store.locks import ProcessLocks
from openclaw_ctx.tokens import TokenCounter, get_counter

__all__ = ["SchemaState", "Store", "alembic_config", "database_path", "wrap_db_errors"]

_SQLITE_MAGIC = b"SQLite format 3\x00"
BUSY_TIMEOUT_MS = 30_000
ANALYSIS_LIMIT = 400  # rows ANALYZE samples per index when close() runs PRAGMA optimize (SQLite's advice)


def alembic_config(url: str | None = None) -> Config:
    """An Alembic config that points at the migrations shipped inside the installed package."""
    cfg = Config()
    cfg.set_main_option("script_location", str(resources.files("migrations")))
    if url:
        cfg.set_main_option("sqlalchemy.url", url)
    return cfg


_STORAGE_FAULTS = (
    ("database or disk is full", "the disk is full"),
    ("attempt to write a readonly database", "the database is on read-only storage or not writable"),
    ("disk I/O error", "the storage failed to read or write"),
)
"""Driver messages that mean the storage, not the data, failed, and what to tell the user."""


@contextlib.contextmanager
def wrap_db_errors(path: str) -> Iterator[None]:
    """Turn driver errors that mean 'this file is not a usable database' into clear StoreErrors."""
    try:
        yield
    except (DBAPIError, sqlite3.DatabaseError) as exc:
        message = str(getattr(exc, "orig", exc))
        if "file is not a database" in message or "malformed" in message:
            raise DatabaseCorruptError(f"{path}: the database is corrupt or not SQLite ({message})") from exc
        if "unable to open database file" in message:
            raise StoreError(f"{path}: cannot open the database file ({message})") from exc
        for needle, meaning in _STORAGE_FAULTS:
            if needle in message:
                raise StoreError(f"{path}: {meaning} ({message}); the transaction was rolled back") from exc
        raise


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

    def __init__(self, engine: AsyncEngine, path: str, counter: TokenCounter) -> None:
        self.engine = engine
        self.path = path
        self.counter = counter
        self._write_lock = asyncio.Lock()
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
                raise _too_new(store.path, state.current, state.head)
            if not state.up_to_date:
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
        """
        path = _prepare_path(path)
        _refuse_newer(path)
        engine = create_async_engine(f"sqlite+aiosqlite:///{path}", **(engine_kwargs or {}))
        _install_connection_hooks(engine)
        return cls(engine, path, counter or get_counter())

    async def close(self) -> None:
        """Dispose of the engine (running a bounded ``PRAGMA optimize`` first)."""
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
        known = current is None or _revision_known(script, current)
        return SchemaState(current=current, head=head, known=known)

    async def upgrade(self, revision: str = "head") -> None:
        """Run Alembic upgrade in-process on this store's connection."""
        await self._alembic(lambda cfg: command.upgrade(cfg, revision))

    async def downgrade(self, revision: str) -> None:
        """Run Alembic downgrade in-process on this store's connection."""
        await self._alembic(lambda cfg: command.downgrade(cfg, revision))

    async def _alembic(self, action: Any) -> None:
        def run(sync_conn: Connection) -> None:
            cfg = alembic_config()
            cfg.attributes["connection"] = sync_conn
            action(cfg)

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

    @contextlib.asynccontextmanager
    async def read(self) -> AsyncIterator[AsyncConnection]:
        """A read transaction: one consistent snapshot for the block."""
        with wrap_db_errors(self.path):
            async with self.engine.connect() as conn, conn.begin():
                yield conn


def _revision_known(script: ScriptDirectory, revision: str) -> bool:
    try:
        return script.get_revision(revision) is not None
    except Exception:
        return False


def _too_new(path: str, current: str | None, head: str) -> SchemaTooNewError:
    return SchemaTooNewError(
        f"{path}: schema revision {current} is newer than this openclaw-ctx "
        f"(head {head}); upgrade openclaw-ctx, the database was not touched"
    )


def _refuse_newer(path: str) -> None:
    """Read the revision over a read-only connection: the WAL pragma must not run on a file we refuse."""
    file = Path(path)
    if not file.exists() or file.stat().st_size == 0:
        return
    with (
        wrap_db_errors(path),
        contextlib.closing(
            sqlite3.connect(f"{file.resolve().as_uri()}?mode=ro", uri=True, timeout=BUSY_TIMEOUT_MS / 1000)
        ) as db,
    ):
        found = db.execute("SELECT 1 FROM sqlite_master WHERE type='table' AND name='alembic_version'").fetchone()
        current = db.execute("SELECT version_num FROM alembic_version").fetchone() if found else None
    if current is None:
        return
    script = ScriptDirectory.from_config(alembic_config())
    if not _revision_known(script, current[0]):
        head = script.get_current_head()
        raise _too_new(path, current[0], head or "?")


_URL = re.compile(r"^([A-Za-z][A-Za-z0-9+.\-]*)://(.*)$", re.DOTALL)
_SQLITE_SCHEMES = ("sqlite", "sqlite+aiosqlite", "sqlite+pysqlite")


def database_path(location: str | Path) -> Path:
    """The SQLite file a ``--db`` value names: a path, or a ``sqlite:///…`` URL.

    Raises:
        StoreError: another URL scheme (only the password-free scheme is named in the message).
    """
    match = _URL.match(str(location)) if isinstance(location, str) else None
    if match is None:
        return Path(location).expanduser()
    scheme, rest = match.groups()
    if scheme.lower() not in _SQLITE_SCHEMES:
        raise StoreError(
            f"{scheme}://… is not a store this version can use: the store is one SQLite file; "
            "pass its path or a sqlite:///PATH URL"
        )
    if not rest.startswith("/") or rest in ("/", "/:memory:"):
        raise StoreError(f"{scheme}://{rest}: name a database file, as sqlite:///relative.db or sqlite:////abs.db")
    return Path(rest[1:]).expanduser()


def _prepare_path(path: str | Path) -> str:
    file = database_path(path)
    _check_file(file)
    file.parent.mkdir(parents=True, exist_ok=True)
    return str(file)


def _check_file(file: Path) -> None:
    path = str(file)
    if not file.exists():
        return
    if file.is_dir():
        raise StoreError(f"{path}: is a directory, not a database file")
    if not file.is_file():
        # /dev/null, a FIFO, a socket: SQLite would write its journal beside it (`/dev/null-journal`).
        raise StoreError(f"{path}: not a regular file; the store needs a file it can write a journal beside")
    if file.stat().st_size == 0:
        return
    with file.open("rb") as handle:
        header = handle.read(16)
    if header != _SQLITE_MAGIC:
        raise DatabaseCorruptError(f"{path}: not an SQLite database (header {header[:16]!r})")


def _install_connection_hooks(engine: AsyncEngine) -> None:
    sync_engine = engine.sync_engine

    @event.listens_for(sync_engine, "connect")
    def _on_connect(dbapi_conn: Any, _record: Any) -> None:
        # Let SQLAlchemy, not the driver, decide when transactions begin (see _on_begin).
        dbapi_conn.isolation_level = None
        cursor = dbapi_conn.cursor()
        for pragma in (
            f"PRAGMA busy_timeout={BUSY_TIMEOUT_MS}",
            "PRAGMA journal_mode=WAL",
            "PRAGMA synchronous=NORMAL",
            "PRAGMA foreign_keys=ON",
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
