"""`openclaw-ctx db upgrade|current|downgrade|check` through the real CLI, including bad files."""

from __future__ import annotations

import json
import os
import sqlite3
from pathlib import Path

import pytest
from alembic.script import ScriptDirectory
from typer.testing import CliRunner, Result

import openclaw_ctx.cli.app as cli
from openclaw_ctx.store.store import alembic_config

HEAD = ScriptDirectory.from_config(alembic_config()).get_current_head()
NAMED_TABLES = {
    "sessions",
    "messages",
    "summaries",
    "summary_messages",
    "summary_parents",
    "context_items",
    "compactions",
    "messages_fts",
    "summaries_fts",
}


def invoke(*args: str, input: str | None = None) -> Result:
    """Run the real CLI app in-process (commands loaded once, as `main()` does)."""
    if not any(c.name == "doctor" for c in cli.app.registered_commands):
        cli._load_commands()
    return CliRunner().invoke(cli.app, list(args), input=input)


def tables(path: Path) -> set[str]:
    with sqlite3.connect(path) as db:
        found = {r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type IN ('table', 'view')")}
    db.close()
    return found


def unwrapped(output: str) -> str:
    """Output without whitespace: Rich wraps long lines at 80 columns when there is no terminal."""
    return "".join(output.split())


def assert_clean_failure(result: Result, *needles: str) -> None:
    """Exit status 1, a message on stderr, and no traceback."""
    assert result.exit_code == 1, result.output
    assert isinstance(result.exception, SystemExit), repr(result.exception)
    assert "Traceback" not in result.output + result.stderr
    for needle in needles:
        assert unwrapped(needle) in unwrapped(result.stderr), result.stderr


def test_upgrade_creates_the_named_tables(db_path: Path) -> None:
    result = invoke("--db", str(db_path), "db", "upgrade")
    assert result.exit_code == 0, result.output
    assert f"upgraded empty → {HEAD} (head)" in result.stdout
    assert NAMED_TABLES | {"transcript", "active_context", "summary_tree"} <= tables(db_path)
    again = invoke("--db", str(db_path), "db", "upgrade")
    assert again.exit_code == 0 and "already at" in again.stdout


def test_db_option_comes_from_the_environment(db_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENCLAW_CTX_DB", str(db_path))
    assert invoke("db", "upgrade").exit_code == 0
    assert NAMED_TABLES <= tables(db_path)


def test_current_reports_revision_and_head(db_path: Path) -> None:
    invoke("--db", str(db_path), "db", "upgrade")
    result = invoke("--db", str(db_path), "db", "current", "--json")
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert data == {"database": str(db_path), "current": HEAD, "head": HEAD, "known": True, "up_to_date": True}


def test_current_on_a_missing_file_fails_and_creates_nothing(db_path: Path) -> None:
    result = invoke("--db", str(db_path), "db", "current")
    assert_clean_failure(result, str(db_path), "no database file")
    assert not db_path.exists()


def test_downgrade_to_base_and_back(db_path: Path) -> None:
    invoke("--db", str(db_path), "db", "upgrade")
    down = invoke("--db", str(db_path), "db", "downgrade", "base", "--yes")
    assert down.exit_code == 0, down.output
    assert f"downgraded {HEAD} → empty" in down.stdout
    assert tables(db_path) == {"alembic_version"}
    current = invoke("--db", str(db_path), "db", "current")
    assert current.exit_code == 1 and "empty" in current.stdout
    up = invoke("--db", str(db_path), "db", "upgrade")
    assert up.exit_code == 0
    assert NAMED_TABLES <= tables(db_path)


def test_downgrade_asks_first_and_no_means_no(db_path: Path) -> None:
    invoke("--db", str(db_path), "db", "upgrade")
    result = invoke("--db", str(db_path), "db", "downgrade", "base", input="n\n")
    assert result.exit_code == 1
    assert "Aborted" in result.output
    assert NAMED_TABLES <= tables(db_path)


def test_downgrade_needs_a_revision(db_path: Path) -> None:
    result = invoke("--db", str(db_path), "db", "downgrade")
    assert result.exit_code == 2
    assert "Missing argument" in result.output


def test_unknown_revision_is_a_clear_error(db_path: Path) -> None:
    result = invoke("--db", str(db_path), "db", "upgrade", "nope")
    assert_clean_failure(result, "Can't locate revision", "nope")


def test_check_passes_at_head_and_names_drift(db_path: Path) -> None:
    invoke("--db", str(db_path), "db", "upgrade")
    ok = invoke("--db", str(db_path), "db", "check", "--json")
    assert ok.exit_code == 0, ok.output
    assert json.loads(ok.stdout)["ok"] is True
    with sqlite3.connect(db_path) as db:
        db.execute("ALTER TABLE messages ADD COLUMN stray_column TEXT")
    db.close()
    drift = invoke("--db", str(db_path), "db", "check")
    assert drift.exit_code == 1
    assert unwrapped("remove_column messages stray_column") in unwrapped(drift.stderr)


def test_check_on_an_old_schema_says_upgrade(db_path: Path) -> None:
    invoke("--db", str(db_path), "db", "upgrade")
    invoke("--db", str(db_path), "db", "downgrade", "base", "--yes")
    assert_clean_failure(invoke("--db", str(db_path), "db", "check"), "db upgrade")


@pytest.mark.parametrize(
    "args", [("db", "upgrade"), ("db", "current"), ("db", "downgrade", "base", "--yes"), ("db", "check")]
)
def test_newer_schema_is_refused_untouched(db_path: Path, args: tuple[str, ...]) -> None:
    invoke("--db", str(db_path), "db", "upgrade")
    with sqlite3.connect(db_path) as db:
        db.execute("UPDATE alembic_version SET version_num = 'ffff_future'")
    db.close()
    before = db_path.read_bytes()
    result = invoke("--db", str(db_path), *args)
    assert_clean_failure(result, "ffff_future", "newer than this openclaw-ctx", str(db_path))
    assert db_path.read_bytes() == before


def _good_db_bytes(tmp_path: Path) -> bytes:
    good = tmp_path / "good.db"
    assert invoke("--db", str(good), "db", "upgrade").exit_code == 0
    return good.read_bytes()


@pytest.mark.parametrize("kind", ["text", "garbage_pages", "truncated"])
@pytest.mark.parametrize("args", [("db", "upgrade"), ("db", "current"), ("db", "check")])
def test_not_a_database_is_a_clear_error(tmp_path: Path, kind: str, args: tuple[str, ...]) -> None:
    path = tmp_path / "victim.db"
    if kind == "text":
        data = b"these are my notes, not a database\n"
    else:
        good = _good_db_bytes(tmp_path)
        data = good[:100] + os.urandom(len(good) - 100) if kind == "garbage_pages" else good[:1500]
    path.write_bytes(data)
    result = invoke("--db", str(path), *args)
    assert_clean_failure(result, "victim.db")
    assert "notSQLite" in unwrapped(result.stderr) or "notanSQLitedatabase" in unwrapped(result.stderr)
    assert path.read_bytes() == data


_LCM_TABLES = """
CREATE TABLE conversations (conversation_id INTEGER PRIMARY KEY, session_id TEXT NOT NULL, session_key TEXT);
CREATE TABLE messages (message_id INTEGER PRIMARY KEY, conversation_id INTEGER, seq INTEGER, role TEXT, content TEXT);
CREATE TABLE summaries (summary_id TEXT PRIMARY KEY, conversation_id INTEGER, kind TEXT, content TEXT);
CREATE TABLE summary_parents (summary_id TEXT, parent_summary_id TEXT, ordinal INTEGER);
CREATE TABLE lcm_migration_state (name TEXT PRIMARY KEY, version INTEGER);
INSERT INTO conversations VALUES (1, 'sess-1', 'agent:main:main');
INSERT INTO messages VALUES (1, 1, 0, 'user', 'hello');
"""


@pytest.mark.parametrize(
    ("kind", "says"),
    [
        ("lcm", "lossless-claw's lcm.db"),
        ("agent-store", "OpenClaw's agent store"),
        ("other", "tables notes, tags"),
    ],
)
@pytest.mark.parametrize(
    "args",
    [("db", "upgrade"), ("db", "current"), ("db", "check"), ("sessions",), ("import", "{fixture}"), ("doctor",)],
)
def test_another_programs_database_is_refused_untouched(
    tmp_path: Path, kind: str, says: str, args: tuple[str, ...]
) -> None:
    from host_agent_store import FIXTURE, create_store

    (tmp_path / "theirs").mkdir()
    path = tmp_path / "theirs" / "theirs.db"
    if kind == "agent-store":
        create_store(path)
    else:
        with sqlite3.connect(path) as db:
            db.executescript(_LCM_TABLES if kind == "lcm" else "CREATE TABLE notes (t TEXT); CREATE TABLE tags (t);")
        db.close()
    before = path.read_bytes()
    result = invoke("--db", str(path), *(a.format(fixture=FIXTURE) for a in args))
    if args == ("doctor",):
        result = invoke("--db", str(path), "doctor", "--json")
        checks = {c["name"]: c for c in json.loads(result.stdout)["checks"]}
        assert result.exit_code == 1 and checks["database"]["status"] == "fail"
        assert "not an openclaw-ctx database" in checks["database"]["detail"]
    else:
        assert_clean_failure(result, "not an openclaw-ctx database", says, "Nothing was changed")
    assert path.read_bytes() == before
    beside = sorted(p.name for p in path.parent.iterdir())
    # Nothing beside it; a store the host keeps in WAL mode is read as one (SQLite's reader files, left empty).
    wal_reader = ["theirs.db", "theirs.db-shm", "theirs.db-wal"] if kind == "agent-store" else None
    assert beside == ["theirs.db"] or (beside == wal_reader and not path.with_name("theirs.db-wal").stat().st_size)
