"""`turns` rows written by the runtime, and `openclaw-ctx stats` reading them (or the compactions)."""

from __future__ import annotations

import json
import re
import sqlite3
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from fixtures.make_agent_dir import build_agent_dir
from typer.testing import CliRunner, Result

import openclaw_ctx.cli.app as cli
from openclaw_ctx.inspect.pictures import SPARK_BARS, sparkline

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "coding-session.jsonl"
SQLITE = Path("/usr/bin/sqlite3")
DOC = ROOT / "docs" / "sql.md"
# Compaction triggers that run before a turn's reply is stored. lossless-claw records the runtime's
# forced overflow recovery as `manual` (it keys the trigger on force, not on the runtime's trigger);
# a replay makes no other manual compaction.
BEFORE_REPLY = {"overflow", "assemble-pressure", "manual"}


def invoke(db: Path, *args: str) -> Result:
    if not any(c.name == "stats" for c in cli.app.registered_commands):
        cli._load_commands()
    return CliRunner().invoke(cli.app, ["--db", str(db), *args], env={"COLUMNS": "120"})


def replay(db: Path, engine: str) -> str:
    result = invoke(db, "replay", str(EXAMPLE), "--budget", "16000", "--engine", engine, "--json")
    assert result.exit_code == 0, result.output
    key: str = json.loads(result.stdout)["session_key"]
    return key


@pytest.fixture(scope="module")
def replayed(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    db = tmp_path_factory.mktemp("stats") / "replay.db"
    return db, replay(db, "legacy")


@pytest.fixture(scope="module", params=["legacy", "lossless-claw"])
def replayed_by(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    if request.param == "legacy":
        found: tuple[Path, str] = request.getfixturevalue("replayed")
        return found
    db = tmp_path_factory.mktemp("stats-lossless") / "replay.db"
    return db, replay(db, request.param)


def turn_rows(db: Path, key: str) -> list[tuple[Any, ...]]:
    conn = sqlite3.connect(db)
    return conn.execute(
        "SELECT turn, session_id, prompt_tokens, budget, compacted FROM turns WHERE session_key = ? ORDER BY turn",
        (key,),
    ).fetchall()


def test_the_runtime_writes_one_row_per_turn_numbered_across_the_chain(replayed_by: tuple[Path, str]) -> None:
    db, key = replayed_by
    rows = turn_rows(db, key)
    conn = sqlite3.connect(db)
    users = conn.execute(
        "SELECT session_id FROM messages WHERE session_key = ? AND role = 'user' ORDER BY seq", (key,)
    ).fetchall()
    # Each turn persisted exactly one user message, in the session its row names.
    assert [r[0] for r in rows] == list(range(1, len(users) + 1))
    assert [r[1] for r in rows] == [u[0] for u in users]
    assert len({r[1] for r in rows}) > 3, "the turns span the rotation chain"
    assert all(0 < r[2] and r[3] == rows[0][3] for r in rows)
    # A turn is flagged exactly when a compaction rotated the session during it: before the reply
    # (overflow recovery, or lossless-claw paying its debt in assemble: the turn is then stored in
    # the successor), or after it (auto or deferred compaction, starting from the turn's session).
    audit_rows = conn.execute(
        "SELECT trigger, before_session_id, after_session_id FROM compactions WHERE session_key = ? AND compacted = 1",
        (key,),
    ).fetchall()
    recovered = {after for trigger, _, after in audit_rows if trigger in BEFORE_REPLY}
    compacted_after = {before for trigger, before, _ in audit_rows if trigger not in BEFORE_REPLY}
    first_turn = {r[1]: r[0] for r in reversed(rows)}
    last_turn = {r[1]: r[0] for r in rows}
    for number, session, _, _, compacted in rows:
        expected = (session in recovered and first_turn[session] == number) or (
            session in compacted_after and last_turn[session] == number
        )
        assert bool(compacted) == expected, f"turn {number}"
    assert compacted_after, "the replay compacts"
    audit = conn.execute("SELECT count(*) FROM compactions WHERE session_key = ? AND compacted = 1", (key,))
    assert 0 < sum(r[4] for r in rows) <= audit.fetchone()[0]


def test_replaying_again_adds_no_turn(replayed: tuple[Path, str], tmp_path: Path) -> None:
    db, key = replayed
    copy = tmp_path / "again.db"
    src = sqlite3.connect(db)
    src.execute(f"VACUUM INTO '{copy}'")
    before = turn_rows(copy, key)
    again = invoke(copy, "replay", str(EXAMPLE), "--budget", "16000", "--json")
    assert again.exit_code == 0, again.output
    assert turn_rows(copy, key) == before


def test_stats_shows_the_turns_as_a_table_and_sparklines(replayed: tuple[Path, str]) -> None:
    db, key = replayed
    rows = turn_rows(db, key)
    data = json.loads(invoke(db, "stats", "--key", key, "--json").stdout)
    assert data["source"] == "turns" and data["series"] == [r[2] for r in rows]
    assert [t["compacted"] for t in data["turns"]] == [bool(r[4]) for r in rows]
    assert data["seriesSummary"]["max"] == max(r[2] for r in rows)
    human = invoke(db, "stats", "--key", key)
    assert human.exit_code == 0, human.output
    assert f"{len(rows)}" in human.stdout and "tokens per turn" in human.stdout
    bars = next(line for line in human.stdout.splitlines() if line.startswith("tokens per turn"))
    ticks = next(line for line in human.stdout.splitlines() if line.startswith("compactions "))
    drawn = bars.removeprefix("tokens per turn").strip()
    assert drawn and set(drawn) <= set(SPARK_BARS) and "▲" in ticks


def test_imported_history_falls_back_to_the_compactions(tmp_path: Path) -> None:
    build_agent_dir(tmp_path / "state")
    db = tmp_path / "imported.db"
    assert invoke(db, "import", str(tmp_path / "state" / "agents")).exit_code == 0
    data = json.loads(invoke(db, "stats", "--key", "agent:main:main", "--json").stdout)
    conn = sqlite3.connect(db)
    audit = conn.execute(
        "SELECT tokens_before FROM compactions WHERE session_key = 'agent:main:main' ORDER BY started_at"
    ).fetchall()
    now = conn.execute("SELECT sum(token_count) FROM active_context WHERE session_key = 'agent:main:main'").fetchone()
    assert data["source"] == "compactions" and data["turns"] == []
    assert data["series"] == [a[0] for a in audit] + [now[0]]
    human = invoke(db, "stats", "--key", "agent:main:main")
    assert "none (imported history)" in human.stdout and "tokens at compactions" in human.stdout


def test_stats_of_an_unknown_key_fails_clearly(replayed: tuple[Path, str]) -> None:
    db, _ = replayed
    result = invoke(db, "stats", "--key", "agent:nobody")
    assert result.exit_code == 1 and "'agent:nobody' has no sessions" in result.output


@pytest.mark.skipif(not SQLITE.exists(), reason="the Debian sqlite3 client (/usr/bin/sqlite3) is missing")
def test_the_documented_turns_query_agrees_with_stats(replayed: tuple[Path, str]) -> None:
    db, key = replayed
    found = re.search(r"<!-- sql-query: turns -->\n```sql\n(.*?)```", DOC.read_text(encoding="utf-8"), re.S)
    assert found is not None
    sql = re.sub(r'\.parameter set @key "\'.*?\'"', f""".parameter set @key "'{key}'\"""", found.group(1))
    proc = subprocess.run(
        [str(SQLITE), "-readonly", "-json", str(db)], input=sql, capture_output=True, text=True, check=False
    )
    assert proc.returncode == 0 and not proc.stderr, proc.stderr
    rows = json.loads(proc.stdout)
    data = json.loads(invoke(db, "stats", "--key", key, "--json").stdout)
    assert [r["tokens"] for r in rows] == data["series"]
    assert [bool(r["compacted"]) for r in rows] == [t["compacted"] for t in data["turns"]]
    assert rows[-1]["compactions_so_far"] == sum(t["compacted"] for t in data["turns"])


def test_stats_and_migrate_never_create_a_database(tmp_path: Path) -> None:
    missing = tmp_path / "none.db"
    for args in (["stats", "--key", "k"], ["migrate", "--key", "k", "--to", "legacy"], ["backfill", "--all"]):
        result = invoke(missing, *args)
        assert result.exit_code == 1 and "no database file" in result.output, args
    assert not missing.exists()


def test_sparkline_scales_and_keeps_peaks() -> None:
    assert sparkline([0, 4, 8]) == SPARK_BARS[0] + SPARK_BARS[4] + SPARK_BARS[-1]
    assert sparkline([1, 1, 9, 1, 1, 1], width=3) == SPARK_BARS[1] + SPARK_BARS[-1] + SPARK_BARS[1]
    assert sparkline([]) == "" and sparkline([0, 0]) == SPARK_BARS[0] * 2


def test_console_script_has_stats_help() -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "openclaw_ctx", "stats", "--help"], capture_output=True, text=True, check=False
    )
    assert proc.returncode == 0 and "--key" in proc.stdout
