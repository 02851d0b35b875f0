"""#19 items 5 and 7 through the real CLI: one figure of "tokens the model was sent", stored usage kept exact.

The host records, per turn, the largest prompt its model calls were sent (`turns.prompt_tokens`);
`replay`'s report and `stats` both read it. A replay stores the transcript's assistant messages as the
transcript wrote them, `usage` included, as `import` does.
"""

from __future__ import annotations

import json
import os
import re
import sqlite3
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "coding-session.jsonl"
BUDGET = 16_000


def cli(db: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """`openclaw-ctx --db DB ARGS` as a user's shell runs it: stdout a pipe, no COLUMNS."""
    env = {k: v for k, v in os.environ.items() if k != "COLUMNS"}
    return subprocess.run(
        [sys.executable, "-m", "openclaw_ctx", "--db", str(db), *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
        check=False,
    )


def replay(db: Path, engine: str) -> dict[str, Any]:
    done = cli(db, "replay", str(EXAMPLE), "--budget", str(BUDGET), "--engine", engine, "--json")
    assert done.returncode == 0, done.stderr
    report: dict[str, Any] = json.loads(done.stdout)
    return report


def stats(db: Path, key: str) -> dict[str, Any]:
    done = cli(db, "stats", "--key", key, "--json")
    assert done.returncode == 0, done.stderr
    found: dict[str, Any] = json.loads(done.stdout)
    return found


@pytest.mark.parametrize("engine", ["legacy", "lossless-claw"])
def test_replay_and_stats_report_the_same_prompt_tokens_as_the_turns_table(tmp_path: Path, engine: str) -> None:
    db = tmp_path / "demo.db"
    report = replay(db, engine)
    key = report["session_key"]
    with sqlite3.connect(db) as conn:
        sent = [
            v for (v,) in conn.execute("SELECT prompt_tokens FROM turns WHERE session_key = ? ORDER BY turn", (key,))
        ]
    assert len(sent) == report["turns"] == 76 and None not in sent, "every turn of the replay reached the model"
    found = stats(db, key)
    assert found["series"] == sent and found["turnsWithoutPromptTokens"] == 0
    summary = report["context_tokens"]
    assert found["seriesSummary"] == {k: summary[k] for k in ("min", "median", "max")}
    assert summary["max"] == max(sent)
    # A prompt the model answered fitted its window: no turn claims to have sent more.
    assert max(sent) <= BUDGET
    # The human forms print the same figures.
    human = cli(db, "stats", "--key", key)
    figures = f"{summary['min']:,} / {summary['median']:,} / {summary['max']:,}"
    assert re.search(rf"prompt tokens sent per turn min / median / max\s+{figures}", human.stdout), human.stdout


def test_a_database_from_before_the_figure_keeps_its_turns_and_stats_counts_them(tmp_path: Path) -> None:
    db = tmp_path / "old.db"
    key = replay(db, "legacy")["session_key"]
    # The schema as it was (revision 0004, no turns.prompt_tokens), then upgraded as a user would.
    assert cli(db, "db", "downgrade", "0004", "--yes").returncode == 0
    assert cli(db, "db", "upgrade").returncode == 0
    with sqlite3.connect(db) as conn:
        rows = conn.execute("SELECT count(*), count(prompt_tokens) FROM turns WHERE session_key = ?", (key,))
        assert rows.fetchone() == (76, 0), "old rows are kept, with NULL"
    found = stats(db, key)
    assert found["turnsWithoutPromptTokens"] == 76 and found["series"] == []
    human = cli(db, "stats", "--key", key)
    assert human.returncode == 0, human.stderr
    assert "none recorded" in human.stdout and "76 of 76" in human.stdout


def transcript_usage() -> dict[str, Any]:
    """Entry id → `usage` of every assistant message of the example, as the file has it."""
    out: dict[str, Any] = {}
    for line in EXAMPLE.read_text(encoding="utf-8").splitlines():
        entry = json.loads(line)
        message = entry.get("message") if entry.get("type") == "message" else None
        if message and message.get("role") == "assistant":
            out[entry["id"]] = message.get("usage")
    return out


def stored_usage(db: Path) -> dict[str, Any]:
    with sqlite3.connect(db) as conn:
        rows = conn.execute("SELECT entry_id, message_json FROM messages WHERE role = 'assistant'").fetchall()
    return {entry_id: json.loads(message).get("usage") for entry_id, message in rows}


@pytest.mark.parametrize("engine", ["legacy", "lossless-claw"])
def test_replay_stores_the_transcripts_usage_exactly_as_import_does(tmp_path: Path, engine: str) -> None:
    expected = transcript_usage()
    assert len(expected) > 300 and all(expected.values())
    replayed = tmp_path / "replayed.db"
    replay(replayed, engine)
    assert stored_usage(replayed) == expected
    imported = tmp_path / "imported.db"
    done = cli(imported, "import", str(EXAMPLE))
    assert done.returncode == 0, done.stderr
    assert stored_usage(imported) == expected
