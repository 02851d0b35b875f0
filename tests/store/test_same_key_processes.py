"""Two processes writing one session key never lose context: turns and compactions take the key's lock.

Before the cross-process key lock, one process compacted from a snapshot taken before the other
appended, and a whole turn's messages were neither raw in the successor's context nor under a summary
(`doctor --deep`: "uncovered"). Here two replays of one transcript run at once into one key, on a
budget small enough that both compact many times; afterwards every message is stored once and the
deep check is clean.
"""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "coding-session.jsonl"
CLI = [sys.executable, "-m", "openclaw_ctx"]


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*CLI, *args], capture_output=True, text=True, timeout=600, check=False)


@pytest.mark.parametrize("engine", ["legacy", "lossless-claw"])
def test_two_replays_into_one_key_lose_nothing(tmp_path: Path, engine: str) -> None:
    transcript = tmp_path / "head.jsonl"
    transcript.write_text("".join(EXAMPLE.read_text(encoding="utf-8").splitlines(keepends=True)[:260]))
    db = tmp_path / "ctx.db"
    assert _cli("--db", str(db), "db", "upgrade").returncode == 0
    replay = ("--db", str(db), "replay", str(transcript), "--engine", engine, "--budget", "8000", "--key", "shared")
    with ThreadPoolExecutor(2) as pool:
        runs = list(pool.map(lambda _: _cli(*replay, "--json"), range(2)))
    assert [r.returncode for r in runs] == [0, 0], [r.stderr[-2000:] for r in runs]
    compactions = sum(json.loads(r.stdout)["compactions"] for r in runs)
    assert compactions >= 2, "the budget must make both runs compact"

    with sqlite3.connect(db) as conn:
        stored = conn.execute("SELECT count(*), count(DISTINCT entry_id) FROM messages WHERE session_key = 'shared'")
        total, distinct = stored.fetchone()
    assert total == distinct > 0, "every transcript entry is stored exactly once"

    doctor = _cli("--db", str(db), "doctor", "--deep", "--json")
    assert doctor.returncode == 0, doctor.stdout + doctor.stderr
    checks = {c["name"]: c for c in json.loads(doctor.stdout)["checks"]}
    assert checks["deep check"]["status"] == "ok", checks["deep check"]
