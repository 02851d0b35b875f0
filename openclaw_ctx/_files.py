"""Writing the files a command was asked for, and nothing else.

Every output path goes through :func:`guard_output` before anything is written: an existing file is
replaced only with ``force``, and the open database (with its ``-wal``/``-shm``/``-journal`` siblings) is
never a valid output, ``force`` or not. :func:`write_atomic` then writes beside the target and renames,
so a failed write (disk full, a signal) leaves the old file whole and no half-written one behind.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path

from openclaw_ctx.errors import OutputPathError

__all__ = ["database_files", "guard_output", "write_atomic"]

_DB_SIDECARS = ("", "-wal", "-shm", "-journal")


def database_files(db: Path) -> list[Path]:
    """The database file and the sidecars SQLite keeps beside it."""
    return [db.with_name(db.name + suffix) for suffix in _DB_SIDECARS]


def _same(a: Path, b: Path) -> bool:
    if a.exists() and b.exists():
        return os.path.samefile(a, b)
    return a.resolve() == b.resolve()


def guard_output(path: Path, *, force: bool = False, protected: Iterable[Path] = ()) -> None:
    """Refuse `path` as an output unless writing it is what the user asked for.

    Raises :class:`OutputPathError` when `path` is (or links to) a protected file, is a directory,
    or exists and `force` is not set.
    """
    for guarded in protected:
        if _same(path, guarded):
            raise OutputPathError(f"refusing to write {path}: it is the open database file {guarded}")
    if path.is_dir():
        raise OutputPathError(f"refusing to write {path}: it is a directory; name a file")
    if path.exists() and not path.is_file():
        # A rename onto /dev/full or a FIFO would replace the device node itself.
        raise OutputPathError(f"refusing to write {path}: it is not a regular file (a device, FIFO or socket)")
    if (path.exists() or path.is_symlink()) and not force:
        raise OutputPathError(f"{path} already exists; pass --force to replace it")


def write_atomic(path: Path, text: str) -> None:
    """Write `text` to `path` through a temporary file in the same directory and one rename.

    Raises:
        OutputPathError: the directory cannot be made or the file cannot be written (disk full,
            read-only storage, a file where a directory should be); `path` is as it was before.
    """
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        with open(tmp, "w", encoding="utf-8", newline="\n") as handle:
            handle.write(text)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    except OSError as exc:
        _discard(tmp)
        why = exc.strerror or str(exc)
        if isinstance(exc, FileExistsError | NotADirectoryError):
            why = f"{exc.filename or path.parent} is not a directory"
        raise OutputPathError(f"cannot write {path}: {why}; nothing was replaced") from exc
    except BaseException:
        _discard(tmp)
        raise


def _discard(tmp: Path) -> None:
    try:
        tmp.unlink(missing_ok=True)
    except OSError:
        pass  # the directory itself was never made, or storage refuses even the unlink
