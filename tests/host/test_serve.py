"""`openclaw-ctx serve` end to end: the real process, JSON-RPC over its pipes (docs/serve.md)."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from serve_client import ServeProcess

pytestmark = pytest.mark.slow

ENGINES = ["legacy", "lossless-claw"]
KEY = "agent:main:serve"


def user(i: int, words: int = 20) -> dict[str, Any]:
    text = f"message {i} about the harbour at dusk, ship number {i}. " * words
    return {"role": "user", "content": text, "timestamp": i}


@pytest.fixture
def spawn(tmp_path: Path) -> Iterator[Any]:
    started: list[ServeProcess] = []

    def start(*args: str, **kwargs: Any) -> ServeProcess:
        server = ServeProcess(tmp_path, *args, **kwargs)
        started.append(server)
        return server

    yield start
    for server in started:
        server.kill()


def ingest_history(server: ServeProcess, key: str, session_id: str, count: int) -> list[dict[str, Any]]:
    messages = [user(i) for i in range(count)]
    for i, message in enumerate(messages):
        params = {"sessionId": session_id, "sessionKey": key, "message": message, "entryId": f"{key}-e{i}"}
        assert set(server.result("ingest", params)) == {"ingested"}  # legacy answers False: the host stores
    return messages


@pytest.mark.parametrize("engine", ENGINES)
def test_a_session_lifecycle_through_the_real_process(spawn: Any, engine: str) -> None:
    server = spawn()
    info = server.initialize(engine)
    assert info["protocolVersion"] == 1 and info["engine"]["id"] == engine and info["pid"] == server.proc.pid
    assert {"ingest", "assemble", "compact"} <= set(info["hooks"])
    if "bootstrap" in info["hooks"]:
        boot = server.result("bootstrap", {"sessionId": "s1", "sessionKey": KEY, "sessionFile": KEY})
        assert boot["bootstrapped"] is True
    messages = ingest_history(server, KEY, "s1", 30)
    session = {"sessionId": "s1", "sessionKey": KEY}
    assembled = server.result("assemble", {**session, "messages": messages, "tokenBudget": 50_000})
    assert assembled["messages"] and "estimatedTokens" in assembled
    compacted = server.result("compact", {**session, "force": True, "tokenBudget": 2_000, "currentTokenCount": 9_000})
    assert compacted["ok"] is True
    if engine == "legacy":  # the server kept the transcript, the runtime's compaction summarised it
        assert compacted["compacted"] is True and compacted["result"]["sessionId"] != "s1"
    assert server.shutdown() == 0


def test_bad_lines_get_their_error_codes_and_the_process_keeps_answering(spawn: Any) -> None:
    server = spawn()
    early = server.call("assemble", {"sessionId": "s", "messages": []})
    assert early["error"]["code"] == -32002
    server.initialize("lossless-claw")
    server.send_raw(b"{this is not json")
    server.send_raw(b"[1, 2, 3]")
    server.send_raw(b'{"jsonrpc": "1.0", "id": 900, "method": "assemble"}')
    assert server.response(None)["error"]["code"] == -32700
    assert server.response(None)["error"]["code"] == -32600
    assert server.response(900)["error"]["code"] == -32600
    unknown = server.call("commitTurnish", {"sessionId": "s"})
    assert unknown["error"]["code"] == -32601
    bad = server.call("assemble", {"sessionId": 7, "messages": "not a list"})
    assert bad["error"]["code"] == -32602
    assert any(e.startswith("sessionId") for e in bad["error"]["data"]["errors"])
    raised = server.call(
        "ingestBatch", {"sessionId": "s", "sessionKey": "k", "messages": [user(1)], "entryIds": ["a", "b", "c"]}
    )
    assert raised["error"]["code"] == -32000
    assert raised["error"]["data"] == {"hook": "ingestBatch", "kind": "ValueError"}
    assert "traceback" not in json.dumps(raised).lower()
    turn = {
        "advancementKey": "turn-1",
        "sessionId": "s",
        "sessionKey": "k",
        "admission": {"sessionKey": "k", "entryId": "u1", "role": "user"},
        "terminal": {"sessionKey": "k", "entryId": "a1"},
        "messages": [user(1), {"role": "assistant", "content": [{"type": "text", "text": "ok"}], "timestamp": 2}],
    }
    assert server.result("commitTurn", turn) == {"status": "committed"}
    contradicting = server.call("commitTurn", {**turn, "terminal": {"sessionKey": "k", "entryId": "a9"}})
    assert contradicting["error"]["code"] == -32000
    assert contradicting["error"]["data"] == {"hook": "commitTurn", "kind": "TurnConflictError"}
    assert "'a1'" in contradicting["error"]["message"] and "'a9'" in contradicting["error"]["message"]
    # Still alive, and the engine is not downgraded by the failure.
    assert len(server.result("assemble", {"sessionId": "s", "sessionKey": "k", "messages": []})["messages"]) == 2
    assert server.result("initialize", {"protocolVersion": 1})["engine"]["id"] == "lossless-claw"
    assert server.shutdown() == 0
    assert all(json.loads(line)["jsonrpc"] == "2.0" for line in server.raw_stdout)


def test_two_keys_run_concurrently_and_one_key_in_order_while_the_host_model_summarises(spawn: Any) -> None:
    server = spawn("--summarizer", "host")
    assert server.initialize("legacy", hostLlm=True)["summarizer"] == "host"
    ingest_history(server, "key-a", "sa", 30)
    ingest_history(server, "key-b", "sb", 3)
    compact = server.request("compact", {"sessionId": "sa", "sessionKey": "key-a", "force": True, "tokenBudget": 2_000})
    ask = server.server_request()
    assert ask["method"] == "host/llmComplete" and isinstance(ask["id"], str) and ask["params"]["prompt"]
    behind = server.request("assemble", {"sessionId": "sa", "sessionKey": "key-a", "messages": []})
    other = server.result("assemble", {"sessionId": "sb", "sessionKey": "key-b", "messages": [user(1)]})
    assert other["messages"] == [user(1)]
    assert not server.answered(compact) and not server.answered(behind)
    server.server_requests.put(ask)
    done = server.answer_server_requests(compact, lambda _ask: {"text": "SUMMARY FROM THE HOST MODEL"})
    assert done["result"]["compacted"] is True
    assert "SUMMARY FROM THE HOST MODEL" in done["result"]["result"]["summary"]
    assert "result" in server.response(behind)
    assert server.shutdown() == 0


def test_cancel_answers_the_call_with_32800(spawn: Any) -> None:
    server = spawn("--summarizer", "host")
    server.initialize("legacy", hostLlm=True)
    ingest_history(server, "key-c", "sc", 30)
    compact = server.request("compact", {"sessionId": "sc", "sessionKey": "key-c", "force": True, "tokenBudget": 2_000})
    ask = server.server_request()
    server.notify("$/cancel", {"id": compact})
    assert server.response(compact)["error"]["code"] == -32800
    server.send({"jsonrpc": "2.0", "id": ask["id"], "result": {"text": "too late"}})  # ignored, logged
    assert "result" in server.call("assemble", {"sessionId": "sc", "sessionKey": "key-c", "messages": []})
    assert server.shutdown() == 0


@pytest.mark.parametrize("engine", ENGINES)
def test_a_planted_api_key_reaches_neither_the_database_nor_stderr(spawn: Any, tmp_path: Path, engine: str) -> None:
    planted = "sk-PLANTED-0123456789abcdef"
    context = {"config": {"models": {"providers": {"openai": {"apiKey": planted}}}}, "trigger": "manual"}
    server = spawn(env={"OPENCLAW_CTX_LOG_LEVEL": "DEBUG"})
    server.initialize(engine)
    common = {"sessionId": "s1", "sessionKey": KEY, "runtimeContext": context}
    server.call("bootstrap", {**common, "sessionFile": KEY})
    server.call("maintain", {**common, "sessionFile": KEY})
    server.result("ingest", {"sessionId": "s1", "sessionKey": KEY, "message": user(1, 400)})
    server.result("assemble", {**common, "messages": [user(1)], "tokenBudget": 1_000})
    server.result("compact", {**common, "force": True, "tokenBudget": 500})
    server.call("assemble", {**common, "messages": "bad"})  # a validation error must not echo it either
    assert server.shutdown() == 0
    for path in tmp_path.iterdir():
        if path.is_file() and path.name.startswith(server.db.name):
            assert planted.encode() not in path.read_bytes(), path
    assert planted not in server.stderr()
    assert all(planted.encode() not in line for line in server.raw_stdout)


def test_eof_on_stdin_finishes_and_exits_zero(spawn: Any) -> None:
    server = spawn()
    server.initialize("legacy")
    pending = server.request("assemble", {"sessionId": "s", "sessionKey": "k", "messages": [user(2)]})
    assert server.proc.stdin is not None
    server.proc.stdin.close()
    assert server.response(pending)["result"]["messages"] == [user(2)]
    assert server.wait() == 0


def test_a_spawn_rollback_crosses_the_wire_and_revokes_the_childs_grant(spawn: Any) -> None:
    server = spawn()
    server.initialize("lossless-claw")

    def grant(child: str) -> dict[str, Any]:
        con = sqlite3.connect(server.db)
        try:
            sql = "SELECT value_json FROM engine_state WHERE session_key = ? AND name = 'grant'"
            [(raw,)] = con.execute(sql, (child,)).fetchall()
        finally:
            con.close()
        return dict(json.loads(raw))

    spawn_params = {"parentSessionKey": KEY, "childSessionKey": "agent:main:subagent:a", "contextMode": "isolated"}
    prepared = server.result("prepareSubagentSpawn", spawn_params)
    assert prepared["prepared"] is True and isinstance(prepared["rollbackId"], str)
    assert grant("agent:main:subagent:a").get("revoked_at_ms") is None
    rollback = {"rollbackId": prepared["rollbackId"], "childSessionKey": "agent:main:subagent:a"}
    assert server.result("rollbackSubagentSpawn", rollback) == {"rolledBack": True}
    assert grant("agent:main:subagent:a")["revoked_reason"] == "spawn-rollback"
    assert server.result("rollbackSubagentSpawn", rollback) == {"rolledBack": False}  # once only
    # A child that ended can no longer be rolled back; its grant stays as the end left it.
    again = server.result("prepareSubagentSpawn", {**spawn_params, "childSessionKey": "agent:main:subagent:b"})
    server.result("onSubagentEnded", {"childSessionKey": "agent:main:subagent:b", "reason": "completed"})
    late = {"rollbackId": again["rollbackId"], "childSessionKey": "agent:main:subagent:b"}
    assert server.result("rollbackSubagentSpawn", late) == {"rolledBack": False}
    bad = server.call("rollbackSubagentSpawn", {"childSessionKey": "agent:main:subagent:b"})
    assert bad["error"]["code"] == -32602 and bad["error"]["data"]["errors"] == ["rollbackId: a string is required"]
    assert server.shutdown() == 0
