"""Concurrent first opens of one fresh file: every opener succeeds and the schema is applied once."""

from __future__ import annotations

import asyncio
import sqlite3
import subprocess
import sys
import threading
import traceback
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from openclaw_ctx.store import Store
from openclaw_ctx.store.store import alembic_config

pytestmark = pytest.mark.slow

_CLI = [sys.executable, "-m", "openclaw_ctx"]


def _head() -> str:
    from alembic.script import ScriptDirectory

    head = ScriptDirectory.from_config(alembic_config()).get_current_head()
    assert head is not None
    return head


def test_four_processes_upgrading_a_fresh_file_all_succeed(tmp_path: Path) -> None:
    db = tmp_path / "fresh.db"

    def upgrade() -> subprocess.CompletedProcess[str]:
        return subprocess.run([*_CLI, "--db", str(db), "db", "upgrade"], capture_output=True, text=True, timeout=300)

    with ThreadPoolExecutor(4) as pool:
        outcomes = [(r.returncode, r.stderr) for r in pool.map(lambda _: upgrade(), range(4))]
    assert [rc for rc, _ in outcomes] == [0, 0, 0, 0], outcomes
    with sqlite3.connect(db) as conn:
        assert conn.execute("SELECT version_num FROM alembic_version").fetchall() == [(_head(),)]
        assert conn.execute("PRAGMA integrity_check").fetchone() == ("ok",)


def test_threads_with_their_own_loops_open_and_write_one_fresh_file(tmp_path: Path) -> None:
    db = tmp_path / "fresh.db"
    errors: list[str] = []

    def worker(n: int) -> None:
        async def run() -> None:
            async with await Store.open(db) as store, store.transaction() as conn:
                await conn.exec_driver_sql(
                    "INSERT INTO sessions (session_id, session_key, session_file, status) VALUES (?, ?, ?, 'active')",
                    (f"s{n}", f"key:{n}", f"s{n}.jsonl"),
                )

        try:
            asyncio.run(run())
        except BaseException:  # collected with its traceback (which statement failed) and asserted below
            errors.append(traceback.format_exc())

    threads = [threading.Thread(target=worker, args=(n,)) for n in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=300)
    assert errors == [], "\n".join(errors)
    with sqlite3.connect(db) as conn:
        assert conn.execute("SELECT count(*) FROM sessions").fetchone() == (6,)
