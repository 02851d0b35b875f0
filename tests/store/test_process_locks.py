"""Per-key and schema locks hold across real processes, and a killed holder releases them."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from openclaw_ctx.store.locks import ProcessLocks, lock_dir_for

HOLDER = textwrap.dedent(
    """
    import asyncio, sys
    from pathlib import Path
    from openclaw_ctx.store.locks import ProcessLocks

    async def main(db: str, key: str, flag: str) -> None:
        async with ProcessLocks(db).key(key):
            Path(flag).write_text("held")
            await asyncio.sleep(3600)

    asyncio.run(main(*sys.argv[1:]))
    """
)


def _wait_for(path: Path, what: str) -> None:
    deadline = time.monotonic() + 60
    while not path.exists():
        if time.monotonic() > deadline:
            pytest.fail(f"{what} never happened")
        time.sleep(0.02)


def _start_holder(db: Path, key: str, flag: Path) -> subprocess.Popen[bytes]:
    proc = subprocess.Popen([sys.executable, "-c", HOLDER, str(db), key, str(flag)])
    _wait_for(flag, "the holder taking its lock")
    return proc


async def _acquire_within(locks: ProcessLocks, key: str, seconds: float) -> bool:
    async def take() -> None:
        async with locks.key(key):
            pass

    try:
        await asyncio.wait_for(take(), seconds)
    except TimeoutError:
        return False
    return True


async def test_another_process_waits_for_the_same_key_and_not_for_others(tmp_path: Path) -> None:
    db = tmp_path / "ctx.db"
    holder = _start_holder(db, "agent:main:main", tmp_path / "held")
    try:
        locks = ProcessLocks(db)
        assert await _acquire_within(locks, "agent:main:other", 30)
        assert not await _acquire_within(locks, "agent:main:main", 0.3)
    finally:
        holder.kill()
        holder.wait()


async def test_a_killed_holder_releases_its_key(tmp_path: Path) -> None:
    db = tmp_path / "ctx.db"
    holder = _start_holder(db, "k", tmp_path / "held")
    os.kill(holder.pid, signal.SIGKILL)
    holder.wait()
    assert await _acquire_within(ProcessLocks(db), "k", 30)


async def test_a_cancelled_waiter_holds_nothing(tmp_path: Path) -> None:
    db = tmp_path / "ctx.db"
    locks = ProcessLocks(db)
    async with locks.key("k"):
        assert not await _acquire_within(ProcessLocks(db), "k", 0.1)
    assert await _acquire_within(ProcessLocks(db), "k", 30)


async def test_odd_keys_get_their_own_plain_file_names(tmp_path: Path) -> None:
    db = tmp_path / "ctx.db"
    locks = ProcessLocks(db)
    for key in ["agent:main:telegram:42", "../../etc/passwd", "\x1b[31mred", "键\udcff", ""]:
        async with locks.key(key):
            pass
    names = sorted(p.name for p in lock_dir_for(db).iterdir())
    assert len(names) == 5
    assert all(n.startswith("key-") and n.endswith(".lock") and "/" not in n for n in names)


async def test_read_only_storage_locks_nothing_and_fails_nothing(tmp_path: Path) -> None:
    ro = tmp_path / "ro"
    ro.mkdir()
    ro.chmod(0o500)
    try:
        if os.access(ro, os.W_OK):
            pytest.skip("running as a user whom permissions do not stop (root): no read-only directory here")
        async with ProcessLocks(ro / "ctx.db").key("k"):
            pass
    finally:
        ro.chmod(0o700)


async def test_no_path_means_no_locks() -> None:
    async with ProcessLocks(None).key("k"), ProcessLocks(None).schema():
        pass
