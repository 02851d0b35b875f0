"""N processes on one key and on different keys at once, with readers alongside (#13 fault suite).

Three replays write one key (the budget makes each compact) while two more write their own keys, and
two reader processes query the store the whole time (`sql`, `grep`, `sessions`). Afterwards: every
writer succeeded, no reader saw an error, every transcript entry is stored exactly once per key, and
`doctor --deep` and `PRAGMA integrity_check` are clean. The suite prints its figures.
"""

from __future__ import annotations

import json
import sqlite3
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from fault_kit import cli, integrity, no_traceback, record, write_transcript

pytestmark = pytest.mark.slow

WRITERS_ON_ONE_KEY = 3
READS = (
    ("sql", "SELECT count(*) FROM messages"),
    ("grep", "migration", "--all", "--limit", "5"),
    ("sessions", "--json"),
)


def test_writers_on_one_key_and_on_others_with_readers_lose_nothing(tmp_path: Path) -> None:
    db = tmp_path / "ctx.db"
    assert cli(db, "db", "upgrade").returncode == 0
    shared = write_transcript(tmp_path / "shared.jsonl", messages=90, words=80, seed=3)
    own = [write_transcript(tmp_path / f"own{i}.jsonl", messages=60, words=80, seed=10 + i) for i in range(2)]
    jobs = [("replay", str(shared), "--key", "shared", "--budget", "4000", "--json")] * WRITERS_ON_ONE_KEY
    jobs += [
        ("replay", str(t), "--key", f"own{i}", "--budget", "4000", "--engine", "lossless-claw")
        for i, t in enumerate(own)
    ]

    reads = {"reads": 0, "read_errors": 0}
    with ThreadPoolExecutor(len(jobs)) as pool:
        running = [pool.submit(cli, db, *job, timeout=600) for job in jobs]
        while not all(r.done() for r in running):
            for args in READS:
                result = cli(db, *args, timeout=120)
                reads["reads"] += 1
                reads["read_errors"] += int(result.returncode != 0 or not no_traceback(result))
                assert result.returncode == 0, (args, result.stderr[-2000:])
            time.sleep(0.05)
        writes = [r.result() for r in running]
    assert [w.returncode for w in writes] == [0] * len(jobs), [w.stderr[-2000:] for w in writes]

    stored = _per_key(db)
    baseline = tmp_path / "baseline.db"  # what each key holds when its transcript is imported alone
    assert cli(baseline, "import", str(shared), *map(str, own)).returncode == 0
    expected = {k.replace("file:", ""): n for k, (n, _) in _per_key(baseline).items()}
    names = {"shared": shared, "own0": own[0], "own1": own[1]}
    want = {key: expected[_session_id(path)] for key, path in names.items()}
    lost = sum(max(0, want[k] - stored.get(k, (0, 0))[1]) for k in want)
    duplicated = sum(total - distinct for total, distinct in stored.values())
    compactions = sum(json.loads(w.stdout)["compactions"] for w in writes[:WRITERS_ON_ONE_KEY])
    record(
        "N processes, one key + others, readers",
        writers=len(jobs),
        compactions=compactions,
        lost=lost,
        duplicated=duplicated,
        **reads,
    )
    assert stored == {k: (n, n) for k, n in want.items()}, (stored, want)
    doctor = cli(db, "doctor", "--deep", "--json")
    checks = {c["name"]: c for c in json.loads(doctor.stdout)["checks"]}
    assert doctor.returncode == 0 and checks["deep check"]["status"] == "ok", checks.get("deep check")
    assert integrity(db) == ["ok"]
    assert compactions >= WRITERS_ON_ONE_KEY, "the budget must make the writers on one key compact"


def _per_key(db: Path) -> dict[str, tuple[int, int]]:
    with sqlite3.connect(db) as conn:
        rows = conn.execute(
            "SELECT session_key, count(*), count(DISTINCT entry_id) FROM messages GROUP BY 1"
        ).fetchall()
    conn.close()
    return {key: (total, distinct) for key, total, distinct in rows}


def _session_id(transcript: Path) -> str:
    return str(json.loads(transcript.read_text(encoding="utf-8").splitlines()[0])["id"])
