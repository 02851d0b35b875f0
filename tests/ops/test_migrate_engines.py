"""`openclaw-ctx migrate`: legacy ⇄ lossless-claw through the real CLI on imported OpenClaw history.

The database is the issue's "done when" fixture (an agent directory with several keys, branched
transcripts, compaction entries and rotated successors) plus the long example transcript, imported
through the CLI. After every switch each key's active context must still reach every message it
reached before (through summary edges), and no row may have been deleted.
"""

from __future__ import annotations

import asyncio
import json
import shutil
import sqlite3
from pathlib import Path
from typing import Any

import pytest
from fixtures.make_agent_dir import build_agent_dir
from store_queries import REACHABLE
from typer.testing import CliRunner, Result

import openclaw_ctx.cli.app as cli
from examples.make_example import OUTPUT as EXAMPLE
from openclaw_ctx.config import OpenClawConfig
from openclaw_ctx.errors import EngineContractError, EngineNotFoundError
from openclaw_ctx.host.runtime import Runtime
from openclaw_ctx.messages import AssistantMessage, TextContent
from openclaw_ctx.ops.adopters import adopter_for
from openclaw_ctx.store.store import Store
from openclaw_ctx.summarize import default_summarizer
from openclaw_ctx.testing import ScriptedModel

EXAMPLE_KEY = "file:9b2f64d1-5c3e-4a8f-b7d2-1e0c9a6f3b58"
MAIN_KEY = "agent:main:main"
BUDGET = "32000"
TABLES = ("sessions", "messages", "summaries", "summary_messages", "summary_parents", "context_items", "compactions")


def invoke(db: Path, *args: str) -> Result:
    if not any(c.name == "migrate" for c in cli.app.registered_commands):
        cli._load_commands()
    return CliRunner().invoke(cli.app, ["--db", str(db), *args], env={"COLUMNS": "200"})


@pytest.fixture(scope="module")
def imported(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("migrate")
    build_agent_dir(folder / "state")
    db = folder / "imported.db"
    assert invoke(db, "import", str(folder / "state" / "agents")).exit_code == 0
    assert invoke(db, "import", str(EXAMPLE)).exit_code == 0
    return db


@pytest.fixture
def db(imported: Path, tmp_path: Path) -> Path:
    target = tmp_path / "ctx.db"
    for suffix in ("", "-wal", "-shm"):
        if Path(f"{imported}{suffix}").exists():
            shutil.copy(f"{imported}{suffix}", f"{target}{suffix}")
    return target


def reachable(conn: sqlite3.Connection, key: str) -> set[int]:
    return {r[0] for r in conn.execute(REACHABLE, {"key": key})}


def counts(conn: sqlite3.Connection) -> dict[str, int]:
    return {t: conn.execute(f"SELECT count(*) FROM {t}").fetchone()[0] for t in TABLES}


def active(conn: sqlite3.Connection, key: str) -> sqlite3.Row:
    conn.row_factory = sqlite3.Row
    row = conn.execute(
        "SELECT session_id, parent_session_id, engine_id, rotation_reason FROM sessions "
        "WHERE session_key = ? AND status = 'active'",
        (key,),
    ).fetchone()
    conn.row_factory = None
    assert row is not None
    return row


def context_kinds(conn: sqlite3.Connection, key: str) -> list[str]:
    return [
        r[0]
        for r in conn.execute(
            "SELECT coalesce(s.kind, 'message') FROM context_items AS c "
            "JOIN sessions AS se ON se.session_id = c.session_id AND se.status = 'active' AND se.session_key = ? "
            "LEFT JOIN summaries AS s ON s.summary_id = c.summary_id ORDER BY c.ordinal",
            (key,),
        )
    ]


def as_json(result: Result) -> Any:
    assert result.exit_code == 0, result.output + result.stderr
    return json.loads(result.stdout)


def test_dry_run_reports_the_plan_and_writes_nothing(db: Path) -> None:
    before = db.read_bytes()
    plan = as_json(invoke(db, "migrate", "--all", "--to", "lossless-claw", "--dry-run", "--budget", BUDGET, "--json"))
    assert plan["dryRun"] and not plan["failed"]
    conn = sqlite3.connect(db)
    keys = {k["sessionKey"]: k for k in plan["keys"]}
    assert set(keys) == {r[0] for r in conn.execute("SELECT session_key FROM sessions WHERE status = 'active'")}
    example = keys[EXAMPLE_KEY]
    assert example["from"] == "legacy" and example["to"] == "lossless-claw" and example["changes"]
    assert (
        example["contextItems"]
        == conn.execute("SELECT count(*) FROM active_context WHERE session_key = ?", (EXAMPLE_KEY,)).fetchone()[0]
    )
    assert (
        example["summarizeMessages"] > 0
        and example["summarizeMessages"] + example["keptMessages"] == (example["contextMessages"])
    )
    assert keys[MAIN_KEY]["contextSummaries"] == 1 and "adopt 1 summary" in keys[MAIN_KEY]["action"]
    human = invoke(db, "migrate", "--key", MAIN_KEY, "--to", "lossless-claw", "--dry-run")
    assert human.exit_code == 0 and "dry run: nothing written" in human.stdout
    conn.close()
    assert db.read_bytes() == before


def test_switching_back_and_forth_keeps_every_message(db: Path) -> None:
    conn = sqlite3.connect(db)
    keys = [r[0] for r in conn.execute("SELECT session_key FROM sessions WHERE status = 'active' ORDER BY 1")]
    reach = {k: reachable(conn, k) for k in keys}
    on_branch = {
        r[0]
        for r in conn.execute(
            "SELECT message_id FROM messages WHERE session_key = ? AND on_active_branch = 1", (EXAMPLE_KEY,)
        )
    }
    assert reach[EXAMPLE_KEY] == on_branch
    messages = conn.execute("SELECT message_id, message_json FROM messages ORDER BY 1").fetchall()
    legacy_summary = conn.execute(
        "SELECT summary_id FROM active_context WHERE session_key = ? AND item_type = 'summary'", (MAIN_KEY,)
    ).fetchone()[0]

    previous = counts(conn)
    for target in ("lossless-claw", "legacy", "lossless-claw", "legacy"):
        old = {k: active(conn, k)["session_id"] for k in keys}
        out = as_json(invoke(db, "migrate", "--all", "--to", target, "--budget", BUDGET, "--json"))
        assert not out["failed"] and all(k["migrated"] for k in out["keys"])
        now = counts(conn)
        assert all(now[t] >= previous[t] for t in TABLES), "migration never deletes a row"
        assert now["sessions"] == previous["sessions"] + len(keys)
        previous = now
        for k in keys:
            row = active(conn, k)
            assert (row["engine_id"], row["rotation_reason"], row["parent_session_id"]) == (target, "migration", old[k])
            assert reachable(conn, k) == reach[k], f"{k} after migrating to {target}"
            kinds = context_kinds(conn, k)
            if target == "legacy":
                assert all(kind in ("legacy", "message") for kind in kinds) and kinds.count("legacy") <= 1, k
        if target == "lossless-claw":
            assert {"leaf", "condensed"} <= set(context_kinds(conn, EXAMPLE_KEY)) or any(
                r[0] == "condensed"
                for r in conn.execute("SELECT kind FROM summaries WHERE session_key = ?", (EXAMPLE_KEY,))
            )
            # The legacy summary of the imported chain is adopted as a node of the DAG, its edges intact.
            adopted = conn.execute(
                "SELECT count(*) FROM summary_tree WHERE session_key = ? AND (summary_id = ? OR source_id = ?)",
                (MAIN_KEY, legacy_summary, legacy_summary),
            ).fetchone()[0]
            assert adopted > 0
        else:
            assert context_kinds(conn, EXAMPLE_KEY)[0] == "legacy"
    assert conn.execute("SELECT message_id, message_json FROM messages ORDER BY 1").fetchall() == messages
    audit = conn.execute(
        "SELECT engine_id, compacted FROM compactions WHERE trigger = 'migration' AND session_key = ?", (EXAMPLE_KEY,)
    ).fetchall()
    assert ("legacy", 1) in audit and ("lossless-claw", 1) in audit


def test_migrating_to_the_current_engine_changes_nothing(db: Path) -> None:
    before = db.read_bytes()
    out = as_json(invoke(db, "migrate", "--key", MAIN_KEY, "--to", "legacy", "--json"))
    assert out["keys"][0]["migrated"] is False and "already on legacy" in out["keys"][0]["action"]
    assert db.read_bytes() == before


@pytest.mark.parametrize(
    ("args", "code", "needle"),
    [
        (["--key", MAIN_KEY, "--to", "nosuch"], 2, "--to must be one of legacy, lossless-claw"),
        (["--key", MAIN_KEY, "--all", "--to", "legacy"], 2, "exactly one of --key and --all"),
        (["--to", "legacy"], 2, "exactly one of --key and --all"),
        (["--key", "agent:nobody", "--to", "lossless-claw"], 1, "'agent:nobody' has no active session"),
    ],
)
def test_bad_input_fails_clearly(db: Path, args: list[str], code: int, needle: str) -> None:
    result = invoke(db, "migrate", *args)
    assert result.exit_code == code, result.output
    assert needle in " ".join((result.stdout + result.stderr).split())
    assert "Traceback" not in result.output


async def _turns(db: Path, engine: str, start: int, count: int) -> None:
    store = await Store.open(db)
    model = ScriptedModel(context_window=6_000)
    runtime = await Runtime.create(store, config=OpenClawConfig().with_engine(engine), model=model)
    try:
        for i in range(start, start + count):
            model.extend([AssistantMessage(content=[TextContent(text=f"reply {i} " + "lorem ipsum " * 90)])])
            await runtime.run_turn(RUN_KEY, f"question {i} about shard {i}: " + "dolor sit amet " * 90)
    finally:
        await runtime.dispose()
        await store.close()


RUN_KEY = "agent:main:running"


def test_a_migrated_key_keeps_running_on_its_new_engine(db_path: Path) -> None:
    asyncio.run(_turns(db_path, "legacy", 0, 12))
    conn = sqlite3.connect(db_path)
    assert conn.execute("SELECT count(*) FROM compactions WHERE session_key = ?", (RUN_KEY,)).fetchone()[0] > 0
    for target, start in (("lossless-claw", 12), ("legacy", 24), ("lossless-claw", 36)):
        moved = invoke(db_path, "migrate", "--key", RUN_KEY, "--to", target, "--budget", "6000")
        assert moved.exit_code == 0, moved.output
        # The default openclaw.json selects legacy: a move to lossless-claw says how to run on it.
        assert ("select 'lossless-claw' there" in moved.stderr) == (target == "lossless-claw")
        asyncio.run(_turns(db_path, target, start, 12))
        assert active(conn, RUN_KEY)["engine_id"] == target
        all_ids = {r[0] for r in conn.execute("SELECT message_id FROM messages WHERE session_key = ?", (RUN_KEY,))}
        assert len(all_ids) == 2 * (start + 12)
        assert reachable(conn, RUN_KEY) == all_ids, f"after running on {target}"
    # Turns are numbered across the whole chain, migrations included.
    numbers = [r[0] for r in conn.execute("SELECT turn FROM turns WHERE session_key = ? ORDER BY turn", (RUN_KEY,))]
    assert numbers == list(range(1, 49))


async def test_an_engine_that_is_not_installed_is_named_as_such(store: Store) -> None:
    config, summarizer = OpenClawConfig(), default_summarizer()
    with pytest.raises(EngineNotFoundError, match=r"no-such-engine is not installed; installed engines: .*legacy"):
        await adopter_for("no-such-engine", store=store, config=config, summarizer=summarizer)
    with pytest.raises(EngineContractError, match="cannot adopt"):
        await adopter_for("legacy", store=store, config=config, summarizer=summarizer)
    adopter = await adopter_for("lossless-claw", store=store, config=config, summarizer=summarizer)
    assert not await adopter.adoption_pending("agent:main:nobody")
