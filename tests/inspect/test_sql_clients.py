"""docs/sql.md's clients, each run for real on the README's demo database while a writer commits (#21).

The database is the README's main job (a replay of examples/coding-session.jsonl at 16k, through the
real CLI). sqlite-utils and datasette (started by `openclaw-ctx datasette`, and plain `datasette serve`)
must find the same messages and summaries as `openclaw-ctx grep` for the same words; the DuckDB and
pandas examples are executed as the document writes them and must agree with `openclaw-ctx sql`; a
database from before migration 0007 upgrades in place and searches the same.
"""

from __future__ import annotations

import asyncio
import contextlib
import csv
import io
import json
import os
import re
import shlex
import sqlite3
import subprocess
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from crash_harness import copy_database
from test_sql_datasette import as_datasette
from test_sql_docs import writing

from examples.make_example import OUTPUT as EXAMPLE
from openclaw_ctx.inspect.datasette import METADATA_DATABASE, metadata_for

pytestmark = pytest.mark.slow

BIN = Path(sys.executable).parent
CLI = str(BIN / "openclaw-ctx")
DOC = Path(__file__).resolve().parents[2] / "docs" / "sql.md"
_CLIENT = re.compile(r"<!-- client-example: (\S+) -->\n```(?:console|python)\n(.*?)```", re.S)
CLIENTS = dict(_CLIENT.findall(DOC.read_text(encoding="utf-8")))
_DOC_QUERY = re.compile(r"<!-- sql-(?:example|query): (\S+) -->\n```sql\n(.*?)```", re.S)
_LISTENING = re.compile(r"Uvicorn running on http://127\.0\.0\.1:(\d+)")
# Words with fewer hits than grep's --limit cap, so both sides are whole answers.
WORDS = ["ledger drift", "reconcile", "migration", "test"]


def cli(*args: str, cwd: Path, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([CLI, *args], cwd=cwd, capture_output=True, text=True, timeout=300, env=env)


@pytest.fixture(scope="module")
def readme_db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The README's main job, run as the README gives it."""
    folder = tmp_path_factory.mktemp("readme")
    done = cli("--db", "demo.db", "replay", str(EXAMPLE), "--budget", "16000", cwd=folder)
    assert done.returncode == 0, done.stderr
    return folder / "demo.db"


@pytest.fixture
def demo(readme_db: Path, tmp_path: Path) -> Path:
    """A private copy named demo.db (the name the document's commands use), in its own folder."""
    (tmp_path / "live").mkdir()
    copy_database(readme_db, tmp_path / "live" / "demo.db")
    return tmp_path / "live" / "demo.db"


def grep(db: Path, words: str, scope: str) -> set[tuple[str, ...]]:
    """What `openclaw-ctx grep --all` finds: (session key, seq) per message, (summary id,) per summary."""
    done = cli("--db", str(db), "grep", words, "--all", "--scope", scope, "--limit", "200", "--json", cwd=db.parent)
    assert done.returncode == 0, done.stderr
    found = json.loads(done.stdout)
    assert found["complete"] and len(found["hits"]) < 200, words
    if scope == "messages":
        return {(h["sessionKey"], str(h["seq"])) for h in found["hits"]}
    return {(h["id"],) for h in found["hits"]}


def sql_rows(db: Path, statement: str) -> list[dict[str, Any]]:
    done = cli("--db", str(db), "sql", statement, "--json", cwd=db.parent)
    assert done.returncode == 0, done.stderr
    rows: list[dict[str, Any]] = json.loads(done.stdout)
    return rows


def _commands(name: str) -> list[list[str]]:
    return [shlex.split(line.removeprefix("$ ").split("  #")[0]) for line in CLIENTS[name].splitlines()]


def _sqlite_utils(db: Path, command: list[str]) -> set[tuple[str, ...]]:
    assert command[0] == "sqlite-utils", command
    done = subprocess.run([str(BIN / "sqlite-utils"), *command[1:]], cwd=db.parent, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    rows = list(csv.reader(io.StringIO(done.stdout)))[1:]
    return {tuple(row[:2]) if command[3] == "messages" else (row[0],) for row in rows}


async def test_sqlite_utils_search_finds_what_grep_finds(demo: Path) -> None:
    messages, summaries = _commands("sqlite-utils")

    def check() -> None:
        for words in WORDS:
            expected_messages, expected_summaries = grep(demo, words, "messages"), grep(demo, words, "summaries")
            assert expected_messages, words
            assert _sqlite_utils(demo, [*messages[:4], words, *messages[5:]]) == expected_messages, words
            assert _sqlite_utils(demo, [*summaries[:4], words, *summaries[5:]]) == expected_summaries, words

    async with writing(demo):
        # In a thread: the clients are processes waited for, and the writer keeps committing meanwhile.
        await asyncio.to_thread(check)


@contextlib.asynccontextmanager
async def serving(command: list[str], cwd: Path) -> AsyncIterator[str]:
    """Run a datasette server command (port 0) until it listens; yields its base URL."""
    proc = await asyncio.create_subprocess_exec(
        *command, cwd=cwd, stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.PIPE
    )
    assert proc.stderr is not None
    try:
        seen: list[str] = []
        port = None
        while port is None:
            line = (await asyncio.wait_for(proc.stderr.readline(), timeout=120)).decode()
            if not line:
                raise AssertionError("datasette exited before listening:\n" + "".join(seen))
            seen.append(line)
            if found := _LISTENING.search(line):
                port = found.group(1)
        yield f"http://127.0.0.1:{port}"
    finally:
        proc.terminate()
        await proc.wait()


async def _search(client: httpx.AsyncClient, url: str, table: str, words: str) -> set[tuple[str, ...]]:
    columns = ["session_key", "seq"] if table == "messages" else ["summary_id"]
    response = await client.get(
        f"{url}/{table}.json",
        params=[("_search", words), ("_shape", "array"), ("_size", "max"), *(("_col", c) for c in columns)],
    )
    assert response.status_code == 200, response.text
    return {tuple(str(row[c]) for c in columns) for row in response.json()}


def _documented_urls(base: str) -> list[str]:
    return [command[-1].replace("http://127.0.0.1:8001", base) for command in _commands("datasette")[1:]]


async def test_openclaw_ctx_datasette_searches_like_grep_and_has_the_documented_queries(demo: Path) -> None:
    serve = _commands("datasette")[0]
    assert serve[:4] == ["openclaw-ctx", "--db", "demo.db", "datasette"], serve
    async with writing(demo), httpx.AsyncClient(timeout=60) as client:
        async with serving([CLI, *serve[1:4], "--port", "0"], demo.parent) as base:
            search_url, canned_url = _documented_urls(base)
            documented = await client.get(search_url)
            assert documented.status_code == 200
            assert {(r["session_key"], str(r["seq"])) for r in documented.json()} == await asyncio.to_thread(
                grep, demo, "ledger drift", "messages"
            )
            for words in WORDS:
                for table in ("messages", "summaries"):
                    expected = await asyncio.to_thread(grep, demo, words, table)
                    assert await _search(client, f"{base}/demo", table, words) == expected, words
            canned = await client.get(canned_url)
            assert canned.status_code == 200
            body, _ = as_datasette(
                re.findall(r"<!-- sql-example: token-totals -->\n```sql\n(.*?)```", DOC.read_text(), re.S)[0]
            )
            assert canned.json() == await asyncio.to_thread(sql_rows, demo, body)
            # Read-only: datasette refuses a write, the canned or any other.
            write = await client.get(f"{base}/demo.json", params={"sql": "DELETE FROM messages"})
            assert write.status_code == 400
            facets = (await client.get(f"{base}/demo/messages.json", params={"_size": "0"})).json()["facet_results"]
            assert {"role", "session_key", "tool_name"} <= set(facets)


async def test_plain_datasette_finds_the_full_text_tables_without_metadata(demo: Path) -> None:
    async with serving(
        [str(BIN / "datasette"), "serve", "demo.db", "--host", "127.0.0.1", "--port", "0"], demo.parent
    ) as base:
        async with httpx.AsyncClient(timeout=60) as client:
            for table in ("messages", "summaries"):
                assert await _search(client, f"{base}/demo", table, "reconcile") == grep(demo, "reconcile", table)


def test_the_canned_queries_are_the_documents_queries(tmp_path: Path) -> None:
    documented = {name: as_datasette(sql)[0] for name, sql in _DOC_QUERY.findall(DOC.read_text(encoding="utf-8"))}
    metadata = metadata_for(tmp_path / "my store.db")
    assert set(metadata["databases"]) == {"my store"}
    canned = {name: query["sql"] for name, query in metadata["databases"]["my store"]["queries"].items()}
    assert canned == documented
    assert metadata_for(tmp_path / f"{METADATA_DATABASE}.db")["databases"].keys() == {METADATA_DATABASE}


def test_print_metadata_is_the_metadata_for_that_file(demo: Path) -> None:
    done = cli("--db", str(demo), "datasette", "--print-metadata", cwd=demo.parent)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == metadata_for(demo)


def _environment_without_datasette(tmp_path: Path) -> dict[str, str]:
    """Site-packages as installed, less datasette, on a PATH without it: as a user without the extra has it."""
    site = Path(next(p for p in sys.path if p.endswith("site-packages")))
    packages = tmp_path / "site"
    packages.mkdir()
    for entry in site.iterdir():
        if not entry.name.lower().startswith("datasette"):
            (packages / entry.name).symlink_to(entry)
    root = Path(__file__).resolve().parents[2]
    return {"PYTHONPATH": f"{packages}{os.pathsep}{root}", "PATH": "/usr/bin:/bin", "HOME": str(tmp_path)}


def test_without_datasette_it_says_how_to_install_it(demo: Path, tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-S", "-m", "openclaw_ctx", "--db", str(demo), "datasette"],
        capture_output=True,
        text=True,
        env=_environment_without_datasette(tmp_path),
        timeout=120,
    )
    assert done.returncode == 1
    assert "datasette is not installed" in done.stderr and "openclaw-ctx[datasette]" in done.stderr


def test_datasette_on_a_missing_or_foreign_file_is_refused(tmp_path: Path) -> None:
    missing = cli("--db", "nope.db", "datasette", cwd=tmp_path)
    assert missing.returncode == 1 and "no database file" in missing.stderr
    foreign = tmp_path / "other.db"
    with contextlib.closing(sqlite3.connect(foreign)) as db:
        db.execute("CREATE TABLE notes (x)")
    before = foreign.read_bytes()
    refused = cli("--db", str(foreign), "datasette", cwd=tmp_path)
    assert refused.returncode == 1 and "Traceback" not in refused.stderr
    assert foreign.read_bytes() == before


def _run_example(name: str, cwd: Path, report: str) -> Any:
    """The document's example as a script of its own (as a user runs it), ending with `report` printed as JSON.

    A process of its own matters for DuckDB: its bundled copy of SQLite, in the process that writes the
    store through Python's, would break SQLite's locking (POSIX locks are per process); docs/sql.md says so.
    """
    script = cwd / f"{name}_example.py"
    script.write_text(f"{CLIENTS[name]}\nimport json\nprint(json.dumps({report}, default=str))\n", encoding="utf-8")
    done = subprocess.run([sys.executable, str(script)], cwd=cwd, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.splitlines()[-1])


async def test_the_duckdb_example_reads_the_views_and_writes_parquet(demo: Path) -> None:
    report = "{'by_role': by_role, 'parquet': con.sql(\"SELECT count(*) FROM 'transcript.parquet'\").fetchone()[0]}"
    async with writing(demo):
        ran = await asyncio.to_thread(_run_example, "duckdb", demo.parent, report)
        expected = await asyncio.to_thread(
            sql_rows,
            demo,
            "SELECT role, count(*) AS n, sum(token_count) AS tokens FROM transcript GROUP BY role ORDER BY role",
        )
        assert [dict(zip(("role", "n", "tokens"), row, strict=True)) for row in ran["by_role"]] == expected
        assert ran["parquet"] == sum(row["n"] for row in expected) > 0


async def test_the_pandas_example_reads_the_transcript_view(demo: Path) -> None:
    async with writing(demo):
        ran = await asyncio.to_thread(_run_example, "pandas", demo.parent, "per_session.to_dict('records')")
        expected = await asyncio.to_thread(
            sql_rows,
            demo,
            "SELECT session_key, session_status, count(*) AS n, sum(token_count) AS tokens FROM transcript "
            "GROUP BY session_key, session_status ORDER BY session_key, session_status",
        )
        assert ran == expected


def _declaration(db: Path, table: str) -> str:
    with contextlib.closing(sqlite3.connect(f"file:{db}?mode=ro", uri=True)) as conn:
        (sql,) = conn.execute("SELECT sql FROM sqlite_master WHERE name = ?", (table,)).fetchone()
    return str(sql)


def _grow(db: Path, copies: int) -> int:
    """More messages under other keys (copies of the replayed ones, raw SQL): a store worth a progress bar."""
    with contextlib.closing(sqlite3.connect(db)) as conn:
        for n in range(copies):
            conn.execute(
                "INSERT INTO messages(session_id, session_key, seq, role, message_json, text, token_count) "
                "SELECT session_id, session_key || ':copy' || ?, seq, role, message_json, text, token_count "
                "FROM messages WHERE session_key NOT LIKE '%:copy%'",
                (n,),
            )
        conn.commit()
        (total,) = conn.execute("SELECT count(*) FROM messages").fetchone()
    return int(total)


def _fts_match(db: Path, table: str, words: str) -> set[tuple[str, ...]]:
    query = " ".join(f'"{word}"' for word in words.split())
    key = "t.session_key, t.seq" if table == "messages" else "t.summary_id"
    join = "t.message_id" if table == "messages" else "t.rowid"
    with contextlib.closing(sqlite3.connect(f"file:{db}?mode=ro", uri=True)) as conn:
        rows = conn.execute(
            f"SELECT {key} FROM {table}_fts JOIN {table} AS t ON {join} = {table}_fts.rowid WHERE {table}_fts MATCH ?",
            (query,),
        ).fetchall()
    return {tuple(str(v) for v in row) for row in rows}


def test_an_older_database_upgrades_in_place_and_searches_the_same(demo: Path) -> None:
    total = _grow(demo, 8)
    down = cli("--db", "demo.db", "db", "downgrade", "0006", "--yes", cwd=demo.parent)
    assert down.returncode == 0, down.stderr
    assert "content='messages'" in _declaration(demo, "messages_fts")
    # grep refuses a schema behind head, so the old index is asked directly, as grep would ask it.
    # "migration" stays under grep's cap with the copies; the copies hold no summaries.
    before = {("migration", "messages"): _fts_match(demo, "messages", "migration")}
    before |= {(words, "summaries"): _fts_match(demo, "summaries", words) for words in WORDS}
    old = subprocess.run(
        [str(BIN / "sqlite-utils"), "search", "demo.db", "messages", "reconcile"], cwd=demo.parent, capture_output=True
    )
    assert old.returncode != 0  # what users hit before 0007: sqlite-utils does not see the index

    up = cli("--db", "demo.db", "db", "upgrade", cwd=demo.parent)
    assert up.returncode == 0, up.stderr
    assert "rebuilding the full-text index of messages" in up.stderr and f"{total}/{total}" in up.stderr
    assert 'content="messages"' in _declaration(demo, "messages_fts")
    assert 'content="summaries"' in _declaration(demo, "summaries_fts")
    with contextlib.closing(sqlite3.connect(demo)) as conn:
        conn.execute("INSERT INTO messages_fts(messages_fts) VALUES ('integrity-check')")
        conn.execute("INSERT INTO summaries_fts(summaries_fts) VALUES ('integrity-check')")
    for (words, scope), found in before.items():
        assert found, words
        assert _fts_match(demo, scope, words) == found == grep(demo, words, scope), (words, scope)
        table = "messages" if scope == "messages" else "summaries"
        columns = ["-c", "session_key", "-c", "seq"] if table == "messages" else ["-c", "summary_id"]
        assert _sqlite_utils(demo, ["sqlite-utils", "search", "demo.db", table, words, *columns, "--csv"]) == found
