"""The harness itself against the real host, without `openclaw-ctx serve`.

1. The host's built-in legacy engine runs a turn with a tool call against the loopback fake model:
   proves the fake model (SSE, tool calls, request log) and the gateway harness.
2. The plugin, with the stand-in serve (fake_serve.py) as its Python command, runs a turn: proves the
   real gateway loads the plugin, uses its engine (not degraded to legacy) and sends our assembled
   context to the model.
"""

from __future__ import annotations

import json
import os
import signal
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from openclaw_host.fake_model import TOOL_MARKER, FakeModel
from openclaw_host.gateway import PLUGIN_DIR, Gateway, HostInstall, record

HERE = Path(__file__).parent
DEGRADED = "current-turn transcript fencing is not declared"

pytestmark = [pytest.mark.slow, pytest.mark.openclaw_host]


def _messages_text(req: dict[str, Any]) -> str:
    return json.dumps(req["body"].get("messages", []))


@pytest.fixture
def model(tmp_path: Path) -> Iterator[FakeModel]:
    with FakeModel(tmp_path / "model-requests.jsonl") as m:
        yield m


def _stand_in_pids(db: Path) -> list[int]:
    pids = []
    for d in Path("/proc").iterdir():
        try:
            args = (d / "cmdline").read_bytes().decode(errors="replace").split("\0") if d.name.isdigit() else []
        except OSError:
            continue
        if "serve" in args and str(db) in args:
            pids.append(int(d.name))
    return pids


def _start(gw: Gateway, label: str) -> None:
    seconds = gw.start()
    record(f"{label}: gateway start (s)", f"{seconds:.1f}")


def test_legacy_turn_with_a_tool_call_reaches_the_fake_model(
    host_install: HostInstall, model: FakeModel, tmp_path: Path
) -> None:
    gw = Gateway(host=host_install, root=tmp_path / "gw", model_base_url=model.base_url)
    gw.write_config()
    try:
        _start(gw, "legacy")
        turn = gw.agent_turn("agent:main:harness", f"please look around {TOOL_MARKER}")
        record("legacy: turn with a tool call (s)", f"{turn.seconds:.1f}")
        assert turn.returncode == 0, f"{turn.stdout[-3000:]}\n{turn.stderr[-3000:]}\n{gw.log_tail()}"
    finally:
        gw.stop()
    # The host may send requests of its own (a system-only probe) around the turn; the turn's
    # requests are the ones that carry the user's words.
    reqs = [r for r in model.requests() if TOOL_MARKER in _messages_text(r)]
    assert len(reqs) >= 2, f"the fake model got {len(reqs)} request(s) for the turn"
    first, last = reqs[0]["body"], reqs[-1]["body"]
    assert first["stream"] is True and first["model"] == "fake-1"
    assert any(t["function"]["name"] == "read" for t in first["tools"])
    # The host ran the tool and sent its result back in the next request.
    assert any(m.get("role") == "tool" for m in last["messages"]), _messages_text(reqs[-1])[-2000:]
    assert any(m.get("tool_calls") for m in last["messages"] if m.get("role") == "assistant")
    assert "fake reply" in turn.stdout
    # The planted key went only where it belongs: the Authorization header (logged as present).
    assert all(r["auth"] for r in model.requests())
    assert gw.api_key not in model.log_path.read_text()


def test_the_plugin_runs_a_real_gateway_turn_through_a_stand_in_serve(
    host_install: HostInstall, model: FakeModel, tmp_path: Path
) -> None:
    root = tmp_path / "gw"
    serve_log = tmp_path / "fake-serve.jsonl"
    gw = Gateway(
        host=host_install,
        root=root,
        model_base_url=model.base_url,
        extra_env={"FAKE_SERVE_LOG": str(serve_log)},
    )
    gw.write_config()
    plugin_id = gw.install_plugin(
        PLUGIN_DIR,
        {
            "engine": "lossless-claw",
            "pythonCommand": [sys.executable, str(HERE / "fake_serve.py")],
            "dbPath": str(tmp_path / "unused.db"),
            "traceFile": str(tmp_path / "trace.jsonl"),
        },
    )
    cfg = gw.read_config()
    assert cfg["plugins"]["slots"]["contextEngine"] == plugin_id
    key = "agent:main:plugin-smoke"
    try:
        _start(gw, "plugin+stand-in serve")
        turn = gw.agent_turn(key, "hello through the plugin")
        record("plugin+stand-in serve: turn 1 (s)", f"{turn.seconds:.1f}")
        assert turn.returncode == 0, f"{turn.stdout[-3000:]}\n{turn.stderr[-3000:]}\n{gw.log_tail()}"
        # Kill the stand-in between two turns: the plugin starts it again and the turn succeeds.
        killed = _stand_in_pids(tmp_path / "unused.db")
        assert killed
        for pid in killed:
            os.kill(pid, signal.SIGKILL)
        time.sleep(1)
        turn2 = gw.agent_turn(key, "second turn after the kill")
        record("plugin+stand-in serve: turn 2, serve restarted (s)", f"{turn2.seconds:.1f}")
        assert turn2.returncode == 0, f"{turn2.stdout[-3000:]}\n{turn2.stderr[-3000:]}\n{gw.log_tail()}"
        # The stand-in's compact asks host/llmComplete: the host's own llm.complete answers it.
        before = len(model.requests())
        compact = gw.compact(key)
        record("plugin+stand-in serve: sessions compact (s)", f"{compact.seconds:.1f}")
        assert compact.returncode == 0, f"{compact.stdout[-3000:]}\n{compact.stderr[-3000:]}"
        logs = gw.host_logs()
    finally:
        gw.stop()
    summarise = [r for r in model.requests()[before:] if "summarise" in json.dumps(r["body"].get("messages"))]
    assert summarise, "host/llmComplete did not reach the model through the host's llm.complete"
    assert DEGRADED not in logs
    wire = [json.loads(line) for line in serve_log.read_text().splitlines() if line.startswith("{")]
    methods = [m["method"] for m in wire if m.get("method")]
    assert methods[0] == "initialize"
    record("plugin+stand-in serve: calls the host made", " ".join(methods))
    # A first turn on a new key: assemble (per tool-loop step), commitTurn, maintain (bootstrap only
    # when the host has a session to import).
    for hook in ("assemble", "commitTurn", "maintain"):
        assert hook in methods, methods
    commit = next(m for m in wire if m.get("method") == "commitTurn")["params"]
    assert commit["advancementKey"] and commit["messages"]
    assert "config" not in (commit.get("runtimeContext") or {})
    # The model saw what our engine assembled (the stand-in adds a marker to the system prompt).
    reqs = model.requests()
    assert reqs and any("FAKE-SERVE-ASSEMBLED-THIS" in json.dumps(r["body"]) for r in reqs)
    assert gw.api_key not in serve_log.read_text()
    trace = [json.loads(line) for line in (tmp_path / "trace.jsonl").read_text().splitlines()]
    assert all(t["ok"] for t in trace), trace
    starts = [t for t in trace if t["method"] == "initialize"]
    assert len({t["pid"] for t in starts}) == 2 and killed[0] == starts[0]["pid"]
    record("plugin+stand-in serve: calls", " ".join(f"{t['method']}={t['rpcMs']:.0f}ms" for t in trace))
