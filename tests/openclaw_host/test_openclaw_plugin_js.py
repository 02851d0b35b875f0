"""The plugin's index.js against a stand-in serve (fake_serve.py): conversions, errors, cancel, restart.

Runs in seconds with any Node >= 20, no OpenClaw host needed; the real host test is
test_openclaw_host_e2e.py.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from openclaw_host.gateway import PLUGIN_DIR

HERE = Path(__file__).parent
FAKE_SERVE = HERE / "fake_serve.py"

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def observed(node_bin: str, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    log = tmp_path_factory.mktemp("fake-serve") / "serve.log"
    res = subprocess.run(
        [node_bin, str(HERE / "drive_plugin.mjs"), str(PLUGIN_DIR / "index.js"), sys.executable, str(FAKE_SERVE)],
        env={**os.environ, "FAKE_SERVE_LOG": str(log)},
        capture_output=True,
        text=True,
        timeout=120,
        stdin=subprocess.DEVNULL,
    )
    assert res.returncode == 0, res.stderr
    out: dict[str, Any] = json.loads(res.stdout.strip().splitlines()[-1])
    out["wire"] = [json.loads(line) for line in log.read_text().splitlines() if line.startswith("{")]
    return out


def test_registers_an_engine_whose_id_is_the_plugin_id(observed: dict[str, Any]) -> None:
    manifest = json.loads((PLUGIN_DIR / "openclaw.plugin.json").read_text())
    assert manifest["kind"] == "context-engine"
    assert observed["registeredId"] == observed["pluginId"] == manifest["id"] == observed["info"]["id"]
    # The server's info reaches the host: without transcriptSemantics the host degrades to legacy.
    assert observed["info"]["transcriptSemantics"]["turnAdvancementIdempotency"] == "atomic-idempotent-v1"
    assert observed["info"]["ownsCompaction"] is True
    assert {"bootstrap", "maintain", "assemble", "commitTurn", "compact", "dispose"} <= set(observed["hooks"])


def test_initialize_comes_first_and_names_the_engine(observed: dict[str, Any]) -> None:
    first = observed["wire"][0]
    assert first["method"] == "initialize"
    assert first["params"] == {"protocolVersion": 1, "engine": "lossless-claw", "hostLlm": True}


def test_what_cannot_cross_json_is_converted(observed: dict[str, Any]) -> None:
    params = observed["assemble"]["params"]
    assert params["availableTools"] == ["read", "exec"]  # a Set becomes a list
    assert "abortSignal" not in params
    assert params["when"] == "1970-01-01T00:00:00.000Z" and params["big"] == "10"
    rc = params["runtimeContext"]
    assert "rewriteTranscriptEntries" not in rc and rc["llm"] == {}  # functions dropped
    assert "config" not in rc  # the provider keys never leave the host process
    assert "sk-planted" not in json.dumps(observed["wire"])


def test_a_spawn_rollback_is_a_function_that_calls_serve(observed: dict[str, Any]) -> None:
    assert observed["spawnKeys"] == ["prepared", "rollback"]  # rollbackId stays between plugin and serve
    [call] = [w for w in observed["wire"] if w.get("method") == "rollbackSubagentSpawn"]
    assert call["params"] == {"rollbackId": "spawn-7", "childSessionKey": "agent:main:sub"}


def test_assemble_error_falls_back_to_the_hosts_messages(observed: dict[str, Any]) -> None:
    assert observed["assembleFallback"]["messages"] == [{"role": "user", "content": "keep me"}]
    assert observed["assembleFallback"]["estimatedTokens"] > 0


def test_other_hook_errors_surface(observed: dict[str, Any]) -> None:
    assert observed["maintainError"]["code"] == -32000
    assert "boom" in observed["maintainError"]["message"]


def test_host_llm_complete_answers_the_server(observed: dict[str, Any]) -> None:
    assert observed["compact"]["summary"] == "host says hi"
    assert observed["llmCalls"][0]["messages"] == [{"role": "user", "content": "summarise"}]
    assert observed["llmCalls"][0]["maxTokens"] == 50
    answer = next(m for m in observed["wire"] if m.get("id") == "s5")
    assert answer["result"] == {"text": "host says hi"}


def test_an_aborted_signal_sends_cancel(observed: dict[str, Any]) -> None:
    assert observed["abort"] == {"name": "AbortError", "code": -32800}
    hung = next(m for m in observed["wire"] if m.get("params", {}).get("prompt") == "hang")
    cancels = [m for m in observed["wire"] if m.get("method") == "$/cancel"]
    assert {"jsonrpc": "2.0", "method": "$/cancel", "params": {"id": hung["id"]}} in cancels


def test_a_call_times_out_and_is_cancelled(observed: dict[str, Any]) -> None:
    assert observed["timeout"]["code"] == -32800 and "timed out" in observed["timeout"]["message"]
    assert len([m for m in observed["wire"] if m.get("method") == "$/cancel"]) == 2


def test_serve_is_restarted_after_it_dies(observed: dict[str, Any]) -> None:
    assert observed["childAfterKill"] is True
    assert observed["afterKill"] == "bootstrap"
    assert observed["pidAfter"] not in (None, observed["pidBefore"])
    assert observed["stats"]["restarts"] == 1
    inits = [m for m in observed["wire"] if m.get("method") == "initialize"]
    assert len(inits) == 2  # initialize again on the new process
