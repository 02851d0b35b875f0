"""`openclaw-ctx backfill`: the lossless DAG over a long raw history, in batches, resumable.

A key with a long raw history (no summaries yet) is backfilled once straight through and once with
interruptions (``--stop-after``, and a killed process); both must end in the same DAG, the same
context and a lossless-claw session from which every message is reachable.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from store_queries import REACHABLE
from typer.testing import CliRunner, Result

import openclaw_ctx.cli.app as cli
from openclaw_ctx.messages import AssistantMessage, TextContent, ToolCall, ToolResultMessage, UserMessage
from openclaw_ctx.store import repo
from openclaw_ctx.store.store import Store

KEY = "agent:bulk:main"
TURNS = 1200
TOTAL = TURNS * 4 // 3  # a third of the turns is a tool call with its result
BASE_MS = 1_780_000_000_000
# Small windows so that a modest history builds a DAG of several levels.
CONFIG = {
    "plugins": {
        "entries": {
            "lossless-claw": {
                "enabled": True,
                "config": {"freshTailCount": 16, "leafChunkTokens": 1500, "leafMinFanout": 4, "condensedMinFanout": 3},
            }
        }
    }
}
ARGS = ("backfill", "--key", KEY, "--batch", "150", "--budget", "8000")


def invoke(db: Path, config: Path, *args: str) -> Result:
    if not any(c.name == "backfill" for c in cli.app.registered_commands):
        cli._load_commands()
    return CliRunner().invoke(cli.app, ["--db", str(db), "--config", str(config), *args], env={"COLUMNS": "200"})


def _turn(i: int) -> list[Any]:
    ts = BASE_MS + i * 60_000
    if i % 3 == 0:
        return [UserMessage(content=f"step {i}: check the ledger shard {i % 17} for drift", timestamp=ts)]
    if i % 3 == 1:
        call = ToolCall(id=f"call_{i}", name="read", arguments={"path": f"src/shard_{i % 17}.py"})
        return [
            AssistantMessage(content=[TextContent(text=f"reading shard {i % 17}"), call], timestamp=ts),
            ToolResultMessage(
                tool_call_id=f"call_{i}",
                tool_name="read",
                content=[TextContent(text=f"def shard_{i}():\n    return {i} * 17  # total {i * 31}")],
                timestamp=ts + 1,
            ),
        ]
    return [AssistantMessage(content=[TextContent(text=f"shard {i % 17} balances at {i * 31} cents")], timestamp=ts)]


async def _build(db: Path) -> None:
    async with await Store.open(db) as store:
        items = [repo.NewMessage(m, entry_id=f"e{i}-{j}") for i in range(TURNS) for j, m in enumerate(_turn(i))]
        async with store.transaction() as conn:
            session = await repo.ensure_session(conn, KEY, engine_id="legacy", sessions_dir=str(db.parent))
            await repo.append_messages(conn, session, items, store.counter)


@pytest.fixture(scope="module")
def history(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    folder = tmp_path_factory.mktemp("backfill")
    db = folder / "history.db"
    asyncio.run(_build(db))
    config = folder / "openclaw.json"
    config.write_text(json.dumps(CONFIG), encoding="utf-8")
    return db, config


def copy_of(db: Path, target: Path) -> Path:
    for suffix in ("", "-wal", "-shm"):
        if Path(f"{db}{suffix}").exists():
            shutil.copy(f"{db}{suffix}", f"{target}{suffix}")
    return target


def signature(conn: sqlite3.Connection) -> list[Any]:
    """The key's active context with every summary expanded recursively (ids left out: they are random)."""

    def node(summary_id: str) -> Any:
        kind, depth, content, earliest, latest = conn.execute(
            "SELECT kind, depth, content, earliest_at, latest_at FROM summaries WHERE summary_id = ?", (summary_id,)
        ).fetchone()
        covered = [
            r[0]
            for r in conn.execute(
                "SELECT m.entry_id FROM summary_messages AS sm JOIN messages AS m ON m.message_id = sm.message_id "
                "WHERE sm.summary_id = ? ORDER BY sm.ordinal",
                (summary_id,),
            )
        ]
        parents = [
            node(r[0])
            for r in conn.execute(
                "SELECT source_summary_id FROM summary_parents WHERE summary_id = ? ORDER BY ordinal", (summary_id,)
            )
        ]
        return (kind, depth, content, earliest, latest, covered, parents)

    rows = conn.execute(
        "SELECT c.item_type, c.summary_id, m.entry_id, c.token_count FROM context_items AS c "
        "JOIN sessions AS s ON s.session_id = c.session_id AND s.status = 'active' AND s.session_key = ? "
        "LEFT JOIN messages AS m ON m.message_id = c.message_id ORDER BY c.ordinal",
        (KEY,),
    ).fetchall()
    # A summary item's tokens are those of its rendered XML, which includes its (random) id: left out too.
    return [(t, node(s)) if s else (t, e, tokens) for t, s, e, tokens in rows]


def state_row(conn: sqlite3.Connection) -> dict[str, Any] | None:
    row = conn.execute(
        "SELECT value_json FROM engine_state "
        "WHERE engine_id = 'openclaw-ctx' AND session_key = ? AND name = 'backfill'",
        (KEY,),
    ).fetchone()
    return json.loads(row[0]) if row else None


def report(result: Result, code: int = 0) -> dict[str, Any]:
    assert result.exit_code == code, result.output
    keys: list[dict[str, Any]] = json.loads(result.stdout)["keys"]
    assert len(keys) == 1
    return keys[0]


@pytest.fixture(scope="module")
def straight(history: tuple[Path, Path], tmp_path_factory: pytest.TempPathFactory) -> Path:
    db, config = history
    target = copy_of(db, tmp_path_factory.mktemp("straight") / "ctx.db")
    done = report(invoke(target, config, *ARGS, "--json"))
    assert done["finished"] and not done["resumed"] and done["batches"] == -(-TOTAL // 150)
    return target


def test_uninterrupted_backfill_builds_a_deep_dag_and_keeps_every_message(
    straight: Path, history: tuple[Path, Path]
) -> None:
    conn = sqlite3.connect(straight)
    session_id, engine, reason, parent = conn.execute(
        "SELECT session_id, engine_id, rotation_reason, parent_session_id FROM sessions "
        "WHERE session_key = ? AND status = 'active'",
        (KEY,),
    ).fetchone()
    assert (engine, reason) == ("lossless-claw", "backfill") and parent is not None
    all_ids = {r[0] for r in conn.execute("SELECT message_id FROM messages WHERE session_key = ?", (KEY,))}
    assert len(all_ids) == TOTAL
    assert {r[0] for r in conn.execute(REACHABLE, {"key": KEY})} == all_ids
    assert conn.execute("SELECT max(depth) FROM summaries WHERE session_key = ?", (KEY,)).fetchone()[0] >= 2
    items = conn.execute("SELECT count(*) FROM context_items WHERE session_id = ?", (session_id,)).fetchone()[0]
    assert items < len(all_ids) // 10
    trigger, created = conn.execute(
        "SELECT trigger, summaries_created FROM compactions WHERE after_session_id = ?", (session_id,)
    ).fetchone()
    assert trigger == "backfill"
    assert created == conn.execute("SELECT count(*) FROM summaries WHERE session_key = ?", (KEY,)).fetchone()[0]
    assert state_row(conn) is None
    _, config = history
    doctor = invoke(straight, config, "doctor", "--deep", "--json")
    checks = {c["name"]: c for c in json.loads(doctor.stdout)["checks"]}
    assert checks["deep check"]["status"] == "ok", checks["deep check"]


def test_stop_after_and_resume_end_where_an_uninterrupted_run_ends(
    history: tuple[Path, Path], straight: Path, tmp_path: Path
) -> None:
    db, config = history
    target = copy_of(db, tmp_path / "ctx.db")
    conn = sqlite3.connect(target)
    before = conn.execute("SELECT session_id FROM sessions WHERE session_key = ?", (KEY,)).fetchall()

    first = report(invoke(target, config, *ARGS, "--stop-after", "3", "--json"), code=3)
    assert (first["finished"], first["resumed"], first["batches"]) == (False, False, 3)
    progress = state_row(conn)
    assert progress is not None and progress["batches"] == 3 and len(progress["created"]) > 0
    # Nothing visible changed yet: same single session, same context; the nodes wait outside any context.
    assert conn.execute("SELECT session_id FROM sessions WHERE session_key = ?", (KEY,)).fetchall() == before
    assert conn.execute("SELECT count(*) FROM active_context WHERE item_type = 'summary'").fetchone()[0] == 0

    second = report(invoke(target, config, *ARGS, "--stop-after", "2", "--json"), code=3)
    assert (second["resumed"], second["batches"]) == (True, 5)
    # A resumed run keeps the batch size and budget it started with, whatever this run asks for.
    last = report(invoke(target, config, "backfill", "--key", KEY, "--batch", "7", "--json"))
    assert last["finished"] and last["resumed"] and last["batches"] == report_batches(straight)

    assert signature(conn) == signature(sqlite3.connect(straight))
    assert state_row(conn) is None


def report_batches(db: Path) -> int:
    conn = sqlite3.connect(db)
    details = conn.execute("SELECT details_json FROM compactions WHERE trigger = 'backfill'").fetchone()[0]
    return int(json.loads(details)["batches"])


@pytest.mark.parametrize("sig", [signal.SIGKILL, signal.SIGINT], ids=["killed", "ctrl-c"])
def test_an_interrupted_backfill_resumes_to_the_same_end(
    history: tuple[Path, Path], straight: Path, tmp_path: Path, sig: signal.Signals
) -> None:
    db, config = history
    target = copy_of(db, tmp_path / "ctx.db")
    proc = subprocess.Popen(
        [sys.executable, "-m", "openclaw_ctx", "--db", str(target), "--config", str(config), *ARGS],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ},
    )
    conn = sqlite3.connect(target, timeout=30)
    try:
        while proc.poll() is None:
            progress = state_row(conn)
            if progress is not None and progress.get("batches", 0) >= 2:
                proc.send_signal(sig)
                break
            time.sleep(0.005)
    finally:
        _, stderr = proc.communicate(timeout=600)
    if proc.returncode == 0:
        pytest.skip("the backfill finished before it could be interrupted")
    if sig == signal.SIGKILL:
        assert proc.returncode == -signal.SIGKILL
    else:
        assert proc.returncode == 130 and "run the same command to resume" in stderr
        assert "Traceback" not in stderr
    assert state_row(conn) is not None
    resumed = report(invoke(target, config, *ARGS, "--json"))
    assert resumed["finished"] and resumed["resumed"]
    assert signature(conn) == signature(sqlite3.connect(straight))


def test_backfill_of_an_unknown_key_fails_clearly(history: tuple[Path, Path], tmp_path: Path) -> None:
    db, config = history
    target = copy_of(db, tmp_path / "ctx.db")
    result = invoke(target, config, "backfill", "--key", "agent:nobody")
    assert result.exit_code == 1 and "'agent:nobody' has no active session" in result.output
    assert "Traceback" not in result.output


def test_a_backfill_whose_session_rotated_meanwhile_starts_over_cleanly(
    history: tuple[Path, Path], straight: Path, tmp_path: Path
) -> None:
    db, config = history
    target = copy_of(db, tmp_path / "ctx.db")
    report(invoke(target, config, *ARGS, "--stop-after", "2", "--json"), code=3)
    conn = sqlite3.connect(target)
    progress = state_row(conn)
    assert progress is not None
    abandoned = progress["created"]
    # A running agent compacts the key in between (legacy /compact rotates the session).
    compacted = invoke(target, config, "compact", "--key", KEY, "--budget", "8000", "--json")
    assert compacted.exit_code == 0 and json.loads(compacted.stdout)["compacted"], compacted.output
    done = report(invoke(target, config, *ARGS, "--json"))
    assert done["finished"] and not done["resumed"]
    assert any(f"dropped its {len(abandoned)} unpublished" in note for note in done["notes"])
    marks = ",".join("?" * len(abandoned))
    left = conn.execute(f"SELECT count(*) FROM summaries WHERE summary_id IN ({marks})", abandoned).fetchone()[0]
    assert left == 0
    all_ids = {r[0] for r in conn.execute("SELECT message_id FROM messages WHERE session_key = ?", (KEY,))}
    assert {r[0] for r in conn.execute(REACHABLE, {"key": KEY})} == all_ids
    doctor = invoke(target, config, "doctor", "--deep", "--json")
    checks = {c["name"]: c for c in json.loads(doctor.stdout)["checks"]}
    assert checks["deep check"]["status"] == "ok", checks["deep check"]


def test_the_dry_run_plan_matches_what_the_backfill_did(
    history: tuple[Path, Path], straight: Path, tmp_path: Path
) -> None:
    db, config = history
    target = copy_of(db, tmp_path / "ctx.db")
    before = target.read_bytes()
    result = invoke(target, config, "migrate", "--key", KEY, "--to", "lossless-claw", "--dry-run", "--budget", "8000")
    assert result.exit_code == 0, result.output
    plan = report(invoke(target, config, "migrate", "--key", KEY, "--to", "lossless-claw", "--dry-run", "--json"))
    assert plan["contextMessages"] == TOTAL and plan["summarizeMessages"] + plan["keptMessages"] == TOTAL
    assert target.read_bytes() == before
    kept = report(
        invoke(
            target, config, "migrate", "--key", KEY, "--to", "lossless-claw", "--dry-run", "--budget", "8000", "--json"
        )
    )["keptMessages"]
    raw_after = (
        sqlite3.connect(straight)
        .execute("SELECT count(*) FROM active_context WHERE session_key = ? AND item_type = 'message'", (KEY,))
        .fetchone()[0]
    )
    assert kept == raw_after


def test_a_finished_backfill_run_again_says_why_it_did_nothing(
    straight: Path, history: tuple[Path, Path], tmp_path: Path
) -> None:
    _db, config = history
    target = copy_of(straight, tmp_path / "ctx.db")
    again = invoke(target, config, *ARGS)
    assert again.exit_code == 0, again.output
    said = " ".join(again.output.split())
    assert said.count("nothing to do: already on lossless-claw, nothing to summarise; not rotated") == 1, said
    assert "done: session" not in said
