"""docs/sql.md: every documented query, run by the Debian `sqlite3` client read-only against a live database.

The demo database is built the way the document says (the agent-dir generator and the example
transcript, imported through the real CLI). While a Store commits to the same file, `sqlite3 -readonly
-box` must print exactly the documented output; the same queries in JSON mode must agree with what the
library computes through its own API.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import re
import shutil
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from fixtures.make_agent_dir import build_agent_dir
from typer.testing import CliRunner, Result

import openclaw_ctx.cli.app as cli
from examples.make_example import OUTPUT as EXAMPLE
from openclaw_ctx.messages import UserMessage
from openclaw_ctx.store import repo
from openclaw_ctx.store.store import Store
from openclaw_ctx.tokens import tokenizer_status
from openclaw_ctx.transcripts import legacy_summary_id, read_transcript

SQLITE = Path("/usr/bin/sqlite3")
DOC = Path(__file__).resolve().parents[2] / "docs" / "sql.md"
_EXAMPLE = re.compile(r"<!-- sql-example: (\S+) -->\n```sql\n(.*?)```\n\n```text\n(.*?)```", re.S)
EXAMPLES = {name: (sql, output) for name, sql, output in _EXAMPLE.findall(DOC.read_text(encoding="utf-8"))}

pytestmark = pytest.mark.skipif(not SQLITE.exists(), reason="the Debian sqlite3 client (/usr/bin/sqlite3) is missing")


def invoke(*args: str) -> Result:
    if not any(c.name == "import" for c in cli.app.registered_commands):
        cli._load_commands()
    return CliRunner().invoke(cli.app, list(args))


@pytest.fixture(scope="module")
def demo_db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The document's demo database, built with the document's commands."""
    folder = tmp_path_factory.mktemp("demo")
    build_agent_dir(folder / "demo", malformed=True)
    db = folder / "demo.db"
    first = invoke("--db", str(db), "import", str(folder / "demo" / "agents"))
    assert first.exit_code == 2, first.output
    second = invoke("--db", str(db), "import", str(EXAMPLE))
    assert second.exit_code == 0, second.output
    return db


@pytest.fixture
def live_db(demo_db: Path, tmp_path: Path) -> Path:
    """A private copy of the demo database for a test that writes."""
    target = tmp_path / "live.db"
    for suffix in ("", "-wal", "-shm"):
        if Path(f"{demo_db}{suffix}").exists():
            shutil.copy(f"{demo_db}{suffix}", f"{target}{suffix}")
    return target


async def sqlite3_cli(db: Path, sql: str, *mode: str) -> tuple[int, str, str]:
    """Run the sqlite3 client read-only on `db` with `sql` on stdin (without blocking the event loop)."""
    proc = await asyncio.create_subprocess_exec(
        str(SQLITE),
        "-readonly",
        *(mode or ("-box",)),
        str(db),
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await proc.communicate(sql.encode())
    assert proc.returncode is not None
    return proc.returncode, out.decode(), err.decode()


async def as_json(db: Path, name: str) -> list[dict[str, Any]]:
    code, out, err = await sqlite3_cli(db, EXAMPLES[name][0], "-json")
    assert code == 0 and not err, err
    rows: list[dict[str, Any]] = json.loads(out) if out.strip() else []
    return rows


def test_the_document_has_the_queries_it_promises() -> None:
    assert {"token-totals", "turn-n", "covering-summary", "search"} <= set(EXAMPLES)
    assert all(output.strip() for _, output in EXAMPLES.values())


class _Rollback(Exception):
    pass


@contextlib.asynccontextmanager
async def writing(path: Path) -> AsyncIterator[Store]:
    """The store open on `path` with a task committing small writes until the block ends (a live runtime)."""
    store = await Store.open(path)
    stop = asyncio.Event()
    commits = 0

    async def writer() -> None:
        nonlocal commits
        while not stop.is_set():
            async with store.transaction() as conn:
                await repo.set_engine_state(conn, "docs-writer", "live", "tick", commits)
            commits += 1
            await asyncio.sleep(0.001)

    task = asyncio.create_task(writer())
    try:
        yield store
    finally:
        stop.set()
        await task
        await store.close()
    assert commits > 0, "the writer committed while the readers read"


async def test_documented_queries_answer_as_documented_while_the_store_writes(live_db: Path) -> None:
    if not tokenizer_status().exact:
        pytest.skip("the documented token counts need the exact o200k_base tokenizer")
    async with writing(live_db) as store:
        for name, (sql, expected) in EXAMPLES.items():
            code, out, err = await sqlite3_cli(live_db, sql)
            assert (code, err) == (0, ""), name
            assert out == expected, f"{name}: the output differs from docs/sql.md"
        # An open write transaction neither blocks the reader nor shows it uncommitted rows.
        sql, expected = EXAMPLES["token-totals"]
        with pytest.raises(_Rollback):
            async with store.transaction() as conn:
                pending = await repo.ensure_session(conn, "live:uncommitted", sessions_dir=str(live_db.parent))
                await repo.append_messages(
                    conn, pending, [repo.NewMessage(UserMessage(content="pending"))], store.counter
                )
                assert (await sqlite3_cli(live_db, sql))[1] == expected
                raise _Rollback


async def test_the_client_cannot_write(live_db: Path) -> None:
    code, _, err = await sqlite3_cli(live_db, "DELETE FROM messages;")
    assert code != 0 and "readonly" in err
    _, out, _ = await sqlite3_cli(live_db, "SELECT count(*) FROM messages;", "-list")
    assert int(out) > 0


async def test_documented_answers_agree_with_the_library(demo_db: Path) -> None:
    store = await Store.open(demo_db)
    try:
        async with store.read() as conn:
            chain = await repo.session_chain(conn, "agent:main:main")
            assert [(r["session"], r["status"]) for r in await as_json(demo_db, "chain")] == [
                (s.session_id[:8], s.status) for s in chain
            ]
            totals = await as_json(demo_db, "token-totals")
            for row in totals:
                sessions = await repo.session_chain(conn, row["session_key"])
                session = next(s for s in sessions if s.session_id.startswith(row["session"]))
                assert row["context_tokens"] == await repo.context_tokens(conn, session.session_id)
            active = await repo.active_session(conn, "agent:main:telegram:42")
            assert active is not None
            items = await repo.load_context(conn, active.session_id)
            assert [r["tokens"] for r in await as_json(demo_db, "active-context")] == [i.token_count for i in items]
            example = await repo.active_session(conn, "file:9b2f64d1-5c3e-4a8f-b7d2-1e0c9a6f3b58")
            assert example is not None
            items = await repo.load_context(conn, example.session_id)
            users = [n for n, i in enumerate(items) if i.kind == "message" and i.message.role == "user"]
            turn = await as_json(demo_db, "turn-n")
            assert [r["tokens"] for r in turn] == [i.token_count for i in items[: users[2] + 1]]
    finally:
        await store.close()
    compactions: list[str] = []
    for session in chain:
        assert session.session_file is not None
        for entry in read_transcript(session.session_file).active_branch():
            if entry.type == "compaction" and entry.id not in compactions:
                compactions.append(entry.id)
    covering = await as_json(demo_db, "covering-summary")
    assert [r["summary_id"] for r in covering] == [legacy_summary_id("agent:main:main", c) for c in compactions]
    assert [r["in_context"] for r in covering] == [0] * (len(compactions) - 1) + [1]


async def test_documented_search_finds_what_a_scan_finds(demo_db: Path) -> None:
    hits = await as_json(demo_db, "search")
    code, out, _ = await sqlite3_cli(demo_db, "SELECT session_key, seq, text FROM messages;", "-json")
    scanned = {
        (r["session_key"], r["seq"])
        for r in json.loads(out)
        if "ERR_LEDGER_DRIFT_0042" in r["text"] or re.search(r"\bfinish", r["text"], re.I)
    }
    assert {(h["session_key"], h["at"]) for h in hits if h["kind"] == "message"} == scanned
    _, out, _ = await sqlite3_cli(demo_db, "SELECT summary_id, content FROM summaries;", "-json")
    summaries = {r["summary_id"] for r in json.loads(out) if re.search(r"\bfinish", r["content"], re.I)}
    assert {h["at"] for h in hits if h["kind"] == "summary"} == summaries
