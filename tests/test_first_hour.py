"""A new user's first hour (#19): every command says what it measured and why, through the real CLI."""

from __future__ import annotations

import os
import re
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "coding-session.jsonl"


def cli(db: Path, *args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """`openclaw-ctx --db DB ARGS` as a user's shell runs it: stdout a pipe, no COLUMNS."""
    base = {k: v for k, v in os.environ.items() if k != "COLUMNS"}
    return subprocess.run(
        [sys.executable, "-m", "openclaw_ctx", "--db", str(db), *args],
        capture_output=True,
        text=True,
        env={**base, **(env or {})},
        timeout=300,
        check=False,
    )


@pytest.fixture(scope="module")
def demo(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    """The README's main job: the example replayed at a 16k budget."""
    db = tmp_path_factory.mktemp("demo") / "demo.db"
    done = cli(db, "replay", str(EXAMPLE), "--budget", "16000")
    assert done.returncode == 0, done.stderr
    with sqlite3.connect(db) as conn:
        (key,) = conn.execute("SELECT DISTINCT session_key FROM sessions").fetchone()
    return db, key


def test_compact_with_nothing_to_do_says_what_it_measured(demo: tuple[Path, str]) -> None:
    db, key = demo
    with sqlite3.connect(db) as conn:
        raw = conn.execute(
            "SELECT count(*), sum(c.token_count) FROM context_items c JOIN sessions s USING (session_id) "
            "WHERE s.status = 'active' AND c.item_type = 'message'"
        ).fetchone()
    result = cli(db, "compact", "--key", key, "--budget", "16000")
    assert result.returncode == 0, result.stderr
    out = " ".join(result.stdout.split())
    assert f"nothing to compact: the context's {raw[0]} raw messages ({raw[1]:,} tokens;" in out, out
    assert "keepRecentTokens" in out


def test_piped_tables_keep_whole_lines(demo: tuple[Path, str]) -> None:
    db, key = demo
    result = cli(db, "sessions")
    assert result.returncode == 0, result.stderr
    assert key in result.stdout, "a piped table squeezed the session key over several lines"
    narrow = cli(db, "sessions", env={"COLUMNS": "60"})
    assert key not in narrow.stdout and max(len(line) for line in narrow.stdout.splitlines()) <= 60


def test_export_of_a_key_into_a_jsonl_name_says_it_needs_a_directory(demo: tuple[Path, str], tmp_path: Path) -> None:
    db, key = demo
    out = tmp_path / "X.jsonl"
    result = cli(db, "export", "--key", key, "--out", str(out), env={"COLUMNS": "400"})
    assert result.returncode == 2
    assert "looks like a file name" in " ".join(result.stderr.split()) and "Traceback" not in result.stderr
    assert not out.exists(), "nothing was written"


def test_migrate_reports_the_summaries_its_dry_run_announced(demo: tuple[Path, str], tmp_path: Path) -> None:
    source, key = demo
    db = tmp_path / "m.db"
    with sqlite3.connect(source) as src, sqlite3.connect(db) as dst:
        src.backup(dst)
    args = ("migrate", "--to", "lossless-claw", "--key", key, "--budget", "16000")
    count = "SELECT count(*) FROM summaries"
    planned = " ".join(cli(db, *args, "--dry-run").stdout.split())
    with sqlite3.connect(db) as conn:
        before = conn.execute(count).fetchone()[0]
    done = cli(db, *args)
    assert done.returncode == 0, done.stderr
    reported = " ".join(done.stdout.split())
    adopt = re.search(r"adopt (\d+) summary", planned)
    adopted = re.search(r"(\d+) new summary\(ies\), (\d+) adopted", reported)
    assert adopt and adopted, (planned, reported)
    assert adopted.group(2) == adopt.group(1) == "1"
    with sqlite3.connect(db) as conn:
        assert conn.execute(count).fetchone()[0] - before == int(adopted.group(1))
