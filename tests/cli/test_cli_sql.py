"""`sql` through the real CLI: read-only by construction, bounded in rows, time and functions, Ctrl-C honoured."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import pytest
from test_cli_db import assert_clean_failure, invoke, unwrapped
from test_cli_inspect import _seed, json_of


@pytest.fixture
def seeded(db_path: Path) -> dict[str, Any]:
    """The two keys of test_cli_inspect (`alpha` compacted once, `beta` with CJK text)."""
    return asyncio.run(_seed(db_path))


# --- sql -----------------------------------------------------------------------------------------


def test_sql_json_csv_and_table(seeded: dict[str, Any], db_path: Path) -> None:
    statement = "SELECT session_key, role, text FROM transcript WHERE session_key = 'beta'"
    assert json_of(invoke("--db", str(db_path), "sql", statement, "--json")) == [
        {"session_key": "beta", "role": "user", "text": "上下文 hello"}
    ]
    csv_out = invoke("--db", str(db_path), "sql", statement, "--csv")
    assert csv_out.exit_code == 0
    assert csv_out.stdout.splitlines() == ["session_key,role,text", "beta,user,上下文 hello"]
    table = invoke("--db", str(db_path), "sql", statement)
    assert table.exit_code == 0 and "1 row(s)" in table.stdout and "上下文" in table.stdout


def test_sql_views_and_fts(seeded: dict[str, Any], db_path: Path) -> None:
    found = json_of(
        invoke("--db", str(db_path), "sql", "SELECT rowid FROM messages_fts WHERE messages_fts MATCH 'files'", "--json")
    )
    assert [r["rowid"] for r in found] == [seeded["first"][0].message_id]
    tree = json_of(invoke("--db", str(db_path), "sql", "SELECT source_type, source_id FROM summary_tree", "--json"))
    assert sorted(r["source_id"] for r in tree) == sorted(str(r.message_id) for r in seeded["first"][:2])
    active = json_of(invoke("--db", str(db_path), "sql", "SELECT count(*) AS n FROM active_context", "--json"))
    assert active == [{"n": 4}]


def test_sql_explain(seeded: dict[str, Any], db_path: Path) -> None:
    statement = "SELECT * FROM messages WHERE session_key = 'alpha' ORDER BY seq"
    result = invoke("--db", str(db_path), "sql", statement, "--explain")
    assert result.exit_code == 0, result.output
    assert "QUERY PLAN" in result.stdout and "ux_messages_key_seq" in result.stdout
    rows = json_of(invoke("--db", str(db_path), "sql", statement, "--explain", "--json"))
    assert any("SEARCH messages" in r["detail"] for r in rows)


WRITES = [
    "INSERT INTO sessions(session_id, session_key) VALUES ('x', 'y')",
    "UPDATE messages SET text = 'gone'",
    "DELETE FROM context_items",
    "REPLACE INTO engine_state VALUES ('e', 'k', 'n', '1', 'now')",
    "CREATE TABLE t (x)",
    "DROP VIEW transcript",
    "ALTER TABLE messages ADD COLUMN y",
    "ATTACH DATABASE '{dir}/other.db' AS other",
    "PRAGMA journal_mode = DELETE",
    "PRAGMA query_only = OFF",
    "VACUUM",
    "VACUUM INTO '{dir}/copy.db'",
    "WITH doomed AS (SELECT 1) DELETE FROM messages",
    "  -- a comment first\n  delete from messages",
    "EXPLAIN DELETE FROM messages",
    "BEGIN IMMEDIATE",
    "REINDEX",
    "ANALYZE",
]


@pytest.mark.parametrize("statement", WRITES)
def test_sql_refuses_writes_before_running_them(seeded: dict[str, Any], db_path: Path, statement: str) -> None:
    before = db_path.read_bytes()
    result = invoke("--db", str(db_path), "sql", statement.replace("{dir}", str(db_path.parent)))
    assert_clean_failure(result, "read-only")
    assert db_path.read_bytes() == before
    assert not (db_path.parent / "copy.db").exists() and not (db_path.parent / "other.db").exists()


def test_sql_refuses_several_statements(seeded: dict[str, Any], db_path: Path) -> None:
    result = invoke("--db", str(db_path), "sql", "SELECT 1; DELETE FROM messages")
    assert_clean_failure(result, "exactly one statement")
    # a semicolon inside a string is not a statement boundary
    assert json_of(invoke("--db", str(db_path), "sql", "SELECT 'a;b' AS v;", "--json")) == [{"v": "a;b"}]


@pytest.mark.parametrize(
    ("statement", "needle"),
    [
        ("SELECT * FROM", "SQL error: incomplete input"),
        ("SELECT * FROM nowhere", "SQL error: no such table: nowhere"),
        ("SELECT nope FROM messages", "SQL error: no such column: nope"),
        ("SELEC 1", "refused: SELEC"),
        ("", "no SQL statement"),
    ],
)
def test_sql_errors_are_clear(seeded: dict[str, Any], db_path: Path, statement: str, needle: str) -> None:
    assert_clean_failure(invoke("--db", str(db_path), "sql", statement), needle)


def test_sql_reading_pragmas_work(seeded: dict[str, Any], db_path: Path) -> None:
    cols = json_of(invoke("--db", str(db_path), "sql", "PRAGMA table_info(sessions)", "--json"))
    assert "session_key" in [c["name"] for c in cols]
    assert json_of(invoke("--db", str(db_path), "sql", "PRAGMA journal_mode", "--json")) == [{"journal_mode": "wal"}]


def test_sql_options_conflict(seeded: dict[str, Any], db_path: Path) -> None:
    result = invoke("--db", str(db_path), "sql", "SELECT 1", "--json", "--csv")
    assert result.exit_code == 2


def test_sql_limit_truncates_table_output(seeded: dict[str, Any], db_path: Path) -> None:
    result = invoke("--db", str(db_path), "sql", "SELECT message_id FROM messages", "--limit", "2")
    assert result.exit_code == 0
    assert unwrapped("2 row(s) (more not shown)") in unwrapped(result.stdout)
    assert len(json_of(invoke("--db", str(db_path), "sql", "SELECT * FROM messages", "--json", "--limit", "3"))) == 3


def test_sql_on_missing_and_foreign_files(tmp_path: Path) -> None:
    missing = tmp_path / "missing.db"
    assert_clean_failure(invoke("--db", str(missing), "sql", "SELECT 1"), "missing.db", "no database file")
    assert not missing.exists()
    text_file = tmp_path / "notes.db"
    text_file.write_text("hello, not sqlite")
    assert_clean_failure(invoke("--db", str(text_file), "sql", "SELECT * FROM sqlite_master"), "notes.db", "not SQLite")
    assert text_file.read_text() == "hello, not sqlite"


# --- sql bounds (issue #13) -----------------------------------------------------------------------

ENDLESS = "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c) SELECT {what} FROM c"


@pytest.mark.parametrize(
    "statement",
    ["SELECT fts3_tokenizer('simple')", "SELECT hex(fts3_tokenizer('porter'))", "SELECT load_extension('x')"],
)
def test_sql_allows_only_listed_functions(seeded: dict[str, Any], db_path: Path, statement: str) -> None:
    result = invoke("--db", str(db_path), "sql", statement, "--json")
    assert_clean_failure(result, "is not on the list of functions `sql` allows")
    assert result.stdout == ""


def test_sql_listed_functions_still_answer(seeded: dict[str, Any], db_path: Path) -> None:
    statement = (
        "SELECT count(*) AS n, max(length(text)) > 0 AS long, json_extract('{\"a\": 2}', '$.a') AS a, "
        "upper('x') || printf('%d', 7) AS s, date('2026-01-31') AS d FROM messages"
    )
    assert json_of(invoke("--db", str(db_path), "sql", statement, "--json")) == [
        {"n": 5, "long": 1, "a": 2, "s": "X7", "d": "2026-01-31"}
    ]
    ranked = "SELECT bm25(messages_fts) < 0 AS b FROM messages_fts WHERE messages_fts MATCH 'files'"
    assert json_of(invoke("--db", str(db_path), "sql", ranked, "--json")) == [{"b": 1}]


def test_sql_json_and_csv_stop_at_the_row_cap(seeded: dict[str, Any], db_path: Path) -> None:
    for fmt in ("--json", "--csv"):
        result = invoke("--db", str(db_path), "sql", ENDLESS.format(what="x"), fmt, "--max-rows", "50")
        assert_clean_failure(result, "more than 50 rows", "--max-rows N", "--limit N")
        assert result.stdout == ""
    first = json_of(invoke("--db", str(db_path), "sql", ENDLESS.format(what="x"), "--json", "--limit", "3"))
    assert first == [{"x": 1}, {"x": 2}, {"x": 3}]
    small = json_of(invoke("--db", str(db_path), "sql", "SELECT message_id FROM messages", "--json", "--max-rows", "5"))
    assert len(small) == 5


def test_sql_stops_at_its_timeout(seeded: dict[str, Any], db_path: Path) -> None:
    result = invoke("--db", str(db_path), "sql", ENDLESS.format(what="count(*)"), "--json", "--timeout", "0.2")
    assert_clean_failure(result, "ran longer than 0.2 s", "--timeout SECONDS")


@pytest.mark.skipif(not Path("/proc/self/task").is_dir(), reason="needs /proc to see the query's worker thread")
def test_sql_ctrl_c_stops_a_running_query(seeded: dict[str, Any], db_path: Path) -> None:
    command = [sys.executable, "-m", "openclaw_ctx", "--db", str(db_path), "sql", ENDLESS.format(what="count(*)")]
    proc = subprocess.Popen([*command, "--json", "--timeout", "3600"], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        # The statement runs in a worker thread: once it exists, the query is under way.
        while proc.poll() is None and len(os.listdir(f"/proc/{proc.pid}/task")) < 2:
            threading.Event().wait(0.05)
        assert proc.poll() is None, proc.stderr.read() if proc.stderr else ""
        proc.send_signal(signal.SIGINT)
        _out, err = proc.communicate(timeout=120)  # a guard against a hang, not a measurement
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode != 0 and b"Traceback" not in err
