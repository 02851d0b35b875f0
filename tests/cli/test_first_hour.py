"""A new user's first hour (#19): every command says what it measured and why, through the real CLI."""

from __future__ import annotations

import json
import os
import re
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "coding-session.jsonl"


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


README_CONFIG = """{
  plugins: {
    slots: { contextEngine: "lossless-claw" },          // default "legacy"
    entries: { "lossless-claw": { enabled: true, config: { freshTailCount: 32 } } },
  },
  agents: { defaults: { compaction: { reserveTokens: 16384, keepRecentTokens: 20000 } } },
}
"""


def test_replay_runs_the_configured_engine_and_warns_when_the_reserve_leaves_no_room(tmp_path: Path) -> None:
    config = tmp_path / "openclaw.json"
    config.write_text(README_CONFIG)
    db = tmp_path / "slot.db"
    slot = cli(db, "--config", str(config), "replay", str(EXAMPLE), "--budget", "16000", "--json")
    assert slot.returncode == 0, slot.stderr
    assert json.loads(slot.stdout)["engine"] == "lossless-claw"
    with sqlite3.connect(db) as conn:
        assert {e for (e,) in conn.execute("SELECT DISTINCT engine_id FROM sessions")} == {"lossless-claw"}
    assert "warning" not in slot.stderr, "lossless-claw budgets itself: nothing to warn about"

    legacy = cli(
        tmp_path / "legacy.db",
        "--config",
        str(config),
        "replay",
        str(EXAMPLE),
        "--budget",
        "16000",
        "--engine",
        "legacy",
        "--json",
        env={"COLUMNS": "400"},
    )
    assert legacy.returncode == 0, legacy.stderr
    assert "warning: agents.defaults.compaction reserves 20,000 tokens" in legacy.stderr
    assert "leaving 0 of the 16,000-token budget" in legacy.stderr
    assert json.loads(legacy.stdout)["failed_turns"] == 76, "the warning describes what then happens"


def test_a_broken_config_is_one_line_not_a_traceback(tmp_path: Path) -> None:
    config = tmp_path / "openclaw.json"
    config.write_text("{ plugins: ")
    result = cli(tmp_path / "x.db", "--config", str(config), "replay", str(EXAMPLE))
    assert result.returncode == 1
    assert "not valid JSON5" in result.stderr and "Traceback" not in result.stderr


@pytest.mark.parametrize("engine", ["legacy", "lossless-claw"])
def test_replaying_a_file_again_changes_nothing(tmp_path: Path, engine: str) -> None:
    db = tmp_path / "again.db"
    tables = ("messages", "sessions", "summaries", "compactions", "context_items")

    def counts() -> dict[str, int]:
        with sqlite3.connect(db) as conn:
            return {t: conn.execute(f"SELECT count(*) FROM {t}").fetchone()[0] for t in tables}

    args = ("replay", str(EXAMPLE), "--budget", "16000", "--engine", engine, "--json")
    first = cli(db, *args)
    assert first.returncode == 0, first.stderr
    before = counts()
    second = cli(db, *args)
    assert second.returncode == 0, second.stderr
    assert counts() == before
    report = json.loads(second.stdout)
    assert report["skipped_turns"] == report["turns"] == 76 and report["messages_stored"] == 737
