"""`assemble` and `compact` through the real CLI, on a session built by the real runtime."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from pathlib import Path

from typer.testing import Result

from openclaw_ctx.host.runtime import Runtime
from openclaw_ctx.messages import AssistantMessage, TextContent
from openclaw_ctx.store.store import Store
from openclaw_ctx.testing import ScriptedModel

KEY = "agent:main:cli"


async def _build(db: Path, turns: int = 20) -> None:
    store = await Store.open(db)
    model = ScriptedModel(context_window=1_000_000)
    runtime = await Runtime.create(store, model=model)
    for i in range(turns):
        model.extend([AssistantMessage(content=[TextContent(text=f"reply {i} " + "lorem ipsum " * 60)])])
        await runtime.run_turn(KEY, f"question {i} about src/billing/ledger_v2.py " + "dolor sit " * 60)
    await store.close()


def test_assemble_json_shows_the_pipeline(db_path: Path, cli_invoke: Callable[..., Result]) -> None:
    asyncio.run(_build(db_path))
    result = cli_invoke("--db", str(db_path), "assemble", "--key", KEY, "--json")
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert data["engine"] == "legacy"
    assert len(data["messages"]) == 40 and data["messages"][0]["role"] == "user"
    assert data["estimatedTokens"] > 0


def test_compact_rotates_and_reports(db_path: Path, cli_invoke: Callable[..., Result]) -> None:
    asyncio.run(_build(db_path))
    result = cli_invoke(
        "--db", str(db_path), "compact", "--key", KEY, "--budget", "4000", "--instructions", "keep paths", "--json"
    )
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert data["ok"] and data["compacted"]
    after = json.loads(cli_invoke("--db", str(db_path), "assemble", "--key", KEY, "--json").stdout)
    assert after["sessionId"] == data["result"]["sessionId"]
    assert after["messages"][0]["role"] == "compactionSummary"
    assert after["estimatedTokens"] < data["result"]["tokensBefore"]


def test_assemble_unknown_key_is_a_clear_error(db_path: Path, cli_invoke: Callable[..., Result]) -> None:
    result = cli_invoke("--db", str(db_path), "assemble", "--key", "nope")
    assert result.exit_code == 1
    assert "no session key 'nope'" in result.stderr
