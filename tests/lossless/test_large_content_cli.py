"""Externalised large content read back through `openclaw-ctx describe file_… --expand-file` (real CLI, real db)."""

from __future__ import annotations

import asyncio
import json
import os
import re
import subprocess
import sys
from pathlib import Path

from lcm_helpers import active_id, assistant, host_persist, make_engine, tool_result, user
from sqlalchemy import text
from typer.testing import CliRunner, Result

import openclaw_ctx.cli.app as cli
from openclaw_ctx.contract import AfterTurnParams
from openclaw_ctx.store.store import Store

KEY = "agent:main:files"
# ~45 KB of log lines: over the 32 KB the describe command prints.
BIG_LOG = "\n".join(
    f"2026-03-14T09:{i // 60:02d}:{i % 60:02d}Z worker-{i % 7} processed batch {i} ok" for i in range(900)
)


def invoke(db: Path, *args: str) -> Result:
    if not any(c.name == "describe" for c in cli.app.registered_commands):
        cli._load_commands()
    return CliRunner().invoke(cli.app, ["--db", str(db), *args], env={"COLUMNS": "200"})


def externalised_file_id(db: Path) -> str:
    async def build() -> str:
        store = await Store.open(db)
        try:
            pairs = [
                (user("tail the worker log", 0), "f0"),
                (assistant("reading", 1, calls=[("c1", "read_file")]), "f1"),
                (tool_result("c1", BIG_LOG, 2), "f2"),
                (assistant("all batches ok", 3), "f3"),
            ]
            await host_persist(store, KEY, pairs)
            engine = make_engine(store, largeFileTokenThreshold=1000)
            sid = await active_id(store, KEY)
            turn = [m for m, _ in pairs]
            await engine.after_turn(
                AfterTurnParams(session_id=sid, session_key=KEY, messages=turn, pre_prompt_message_count=0)
            )
            async with store.read() as conn:
                return str((await conn.execute(text("SELECT file_id FROM large_content"))).scalar_one())
        finally:
            await store.close()

    return asyncio.run(build())


def test_describe_a_file_id_and_expand_it(db_path: Path) -> None:
    file_id = externalised_file_id(db_path)
    assert re.fullmatch(r"file_[0-9a-f]{16}", file_id)

    brief = invoke(db_path, "describe", file_id, "--json")
    assert brief.exit_code == 0, brief.output
    out = json.loads(brief.stdout)
    assert out["kind"] == "file" and out["content"] is None
    assert out["row"]["byte_size"] == len(BIG_LOG.encode()) and out["row"]["kind"] == "tool_output"
    assert out["stub"].startswith(f"[LCM Tool Output: {file_id} | tool=read_file")

    full = json.loads(invoke(db_path, "describe", file_id, "--expand-file", "--json").stdout)
    assert full["truncated"] is True and BIG_LOG.startswith(full["content"])
    assert len(full["content"].encode()) == 32_768

    shown = invoke(db_path, "describe", file_id, "--expand-file")
    assert (
        shown.exit_code == 0 and "worker-0 processed batch 0 ok" in shown.stdout and "first 32768 bytes" in shown.stdout
    )


def test_unknown_file_id_is_a_clear_error(db_path: Path) -> None:
    externalised_file_id(db_path)
    missing = invoke(db_path, "describe", "file_0000000000000000")
    assert missing.exit_code != 0 and "no large content with id 'file_0000000000000000'" in missing.output


def without_lossless(db: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """The real CLI in a fresh process with only core's engine loaded (lossless-claw not installed)."""
    env = {**os.environ, "OPENCLAW_CTX_ENGINES": "legacy", "COLUMNS": "200"}
    command = [sys.executable, "-m", "openclaw_ctx", "--db", str(db), *args]
    return subprocess.run(command, capture_output=True, text=True, env=env, timeout=120, check=False)


def test_describe_a_file_id_without_the_plugin_names_it(db_path: Path) -> None:
    file_id = externalised_file_id(db_path)
    shown = without_lossless(db_path, "describe", file_id)
    assert shown.returncode == 1 and "Traceback" not in shown.stderr
    assert "lossless-claw" in shown.stderr and "not installed" in shown.stderr
    # Core recall still answers for the message the file came from.
    message = without_lossless(db_path, "describe", "msg_3", "--json")
    assert message.returncode == 0, message.stderr
    assert json.loads(message.stdout)["kind"] == "message"


def test_doctor_without_the_plugin_names_it_and_still_checks_deep(db_path: Path) -> None:
    externalised_file_id(db_path)
    result = without_lossless(db_path, "doctor", "--deep", "--json")
    report = json.loads(result.stdout)
    checks = {c["name"]: c for c in report["checks"]}
    assert "lossless-claw" not in [e["id"] for e in report["engines"]]
    assert checks["plugin lossless-claw"]["status"] == "ok"  # no session here was written by it
    assert "not installed" in checks["plugin lossless-claw"]["detail"]
    assert checks["deep check"]["status"] == "ok", checks["deep check"]
