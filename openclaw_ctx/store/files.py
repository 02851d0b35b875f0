"""The database file before any connection: where a ``--db`` value points, what kind of file it is,
whether its schema is newer than this code, and whether the storage under it can be written.

Everything here reads, never writes: a file we refuse is left byte-for-byte as it was.
"""

from __future__ import annotations

import contextlib
import os
import re
import sqlite3
from collections.abc import Iterator
from importlib import resources
from pathlib import Path
from urllib.parse import quote

from alembic.config import Config
from alembic.script import ScriptDirectory
from sqlalchemy.exc import DBAPIError

from openclaw_ctx.errors import DatabaseCorruptError, ForeignDatabaseError, SchemaTooNewError, StoreError

__all__ = [
    "BUSY_TIMEOUT_MS",
    "alembic_config",
    "database_path",
    "prepare_path",
    "read_only_url",
    "refuse_unusable",
    "revision_known",
    "storage_is_read_only",
    "too_new",
    "wrap_db_errors",
]

_SQLITE_MAGIC = b"SQLite format 3\x00"
BUSY_TIMEOUT_MS = 30_000

_STORAGE_FAULTS = (
    ("database or disk is full", "the disk is full"),
    ("attempt to write a readonly database", "the database is on read-only storage or not writable"),
    ("disk I/O error", "the storage failed to read or write"),
)
"""Driver messages that mean the storage, not the data, failed, and what to tell the user."""


def alembic_config(url: str | None = None) -> Config:
    """An Alembic config that points at the migrations shipped inside the installed package."""
    cfg = Config()
    cfg.set_main_option("script_location", str(resources.files("migrations")))
    if url:
        cfg.set_main_option("sqlalchemy.url", url)
    return cfg


@contextlib.contextmanager
def wrap_db_errors(path: str) -> Iterator[None]:
    """Turn driver errors that mean 'this file is not a usable database' into clear StoreErrors."""
    try:
        yield
    except (DBAPIError, sqlite3.DatabaseError) as exc:
        message = str(getattr(exc, "orig", exc))
        if "file is not a database" in message or "malformed" in message:
            raise DatabaseCorruptError(
                f"{path}: the database is corrupt or not SQLite ({message}); nothing was written"
            ) from exc
        if "unable to open database file" in message:
            raise StoreError(f"{path}: cannot open the database file ({message})") from exc
        for needle, meaning in _STORAGE_FAULTS:
            if needle in message:
                raise StoreError(f"{path}: {meaning} ({message}); the transaction was rolled back") from exc
        raise


def revision_known(script: ScriptDirectory, revision: str) -> bool:
    """True when `revision` is one of this code's migrations."""
    try:
        return script.get_revision(revision) is not None
    except Exception:  # Alembic raises several kinds for an unknown or malformed revision id
        return False


def too_new(path: str, current: str | None, head: str) -> SchemaTooNewError:
    return SchemaTooNewError(
        f"{path}: schema revision {current} is newer than this openclaw-ctx "
        f"(head {head}); upgrade openclaw-ctx, the database was not touched"
    )


def _foreign(path: str, tables: set[str]) -> ForeignDatabaseError:
    if "transcript_events" in tables:
        what = "OpenClaw's agent store (openclaw-agent.sqlite); import it with `openclaw-ctx import PATH`"
    elif {"conversations", "summaries"} <= tables:
        what = "lossless-claw's lcm.db; bring it in with `openclaw-ctx import --lcm-db PATH`"
    else:
        shown = ", ".join(sorted(tables)[:5]) + (", …" if len(tables) > 5 else "")
        what = f"some other program's (tables {shown})"
    return ForeignDatabaseError(
        f"{path}: not an openclaw-ctx database: it looks like {what}. Nothing was changed; "
        "give --db an openclaw-ctx database or a new file"
    )


def refuse_unusable(path: str) -> None:
    """Refuse a database another program made, or one a newer openclaw-ctx migrated, before anything
    writes: read over a read-only connection, since the WAL pragma must not run on a file we refuse.

    A file with tables but no ``alembic_version`` is foreign: openclaw-ctx writes its revision in the
    same transaction as its first tables.
    """
    file = Path(path)
    if not file.exists() or file.stat().st_size == 0:
        return
    with (
        wrap_db_errors(path),
        contextlib.closing(sqlite3.connect(read_only_url(file), uri=True, timeout=BUSY_TIMEOUT_MS / 1000)) as db,
    ):
        tables = {n for (n,) in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
        current = (
            db.execute("SELECT version_num FROM alembic_version").fetchone() if "alembic_version" in tables else None
        )
    if "alembic_version" not in tables:
        if tables - {"sqlite_sequence", "sqlite_stat1", "sqlite_stat4"}:
            raise _foreign(path, tables)
        return
    if current is None:
        return
    script = ScriptDirectory.from_config(alembic_config())
    if not revision_known(script, current[0]):
        head = script.get_current_head()
        raise too_new(path, current[0], head or "?")


def storage_is_read_only(file: Path) -> bool:
    """True when the database file exists but this process cannot write it or the directory beside it.

    SQLite in WAL mode needs both: the ``-wal`` and ``-shm`` files live beside the database.
    """
    if not file.exists():
        return False
    directory = file.resolve().parent
    if _on_read_only_mount(directory):
        return True
    return not (os.access(file, os.W_OK) and os.access(directory, os.W_OK))


def _on_read_only_mount(directory: Path) -> bool:
    try:
        return bool(os.statvfs(directory).f_flag & os.ST_RDONLY)
    except OSError:
        return False


def read_only_url(file: Path) -> str:
    """An SQLite URI that reads `file` without writing anything beside it (``mode=ro``).

    On a read-only mount with no ``-wal`` file beside the database (it was closed cleanly), SQLite
    cannot create the ``-shm`` index WAL readers need, so the file is opened ``immutable``: nothing can
    change it while the storage is read-only. Otherwise ``mode=ro`` reads through the existing WAL.
    """
    resolved = file.resolve()
    uri = "file:" + quote(str(resolved)) + "?mode=ro"
    wal = resolved.with_name(resolved.name + "-wal")
    if _on_read_only_mount(resolved.parent) and (not wal.exists() or wal.stat().st_size == 0):
        uri += "&immutable=1"
    return uri


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


def prepare_path(path: str | Path) -> str:
    """Check the file a store will open and make its directory; returns the path as a string."""
    file = database_path(path)
    _check_file(file)
    if not file.exists():
        try:
            file.parent.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise StoreError(f"{file}: cannot create the database here ({exc.strerror})") from exc
        if not os.access(file.parent, os.W_OK):
            raise StoreError(f"{file}: cannot create the database, its directory is not writable")
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
