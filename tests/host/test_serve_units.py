"""The serve package's parts in-process: framing, secret scrubbing, dispatch over HOOKS, per-key lanes."""

from __future__ import annotations

import asyncio
import json
import logging
from typing import Any

import pytest
from pydantic import BaseModel, ConfigDict
from pydantic.alias_generators import to_camel

from openclaw_ctx.contract import HOOKS, AbortSignal, AssembleResult, EngineInfo, Hook
from openclaw_ctx.host.serve import dispatch
from openclaw_ctx.host.serve.lanes import Job, Lanes
from openclaw_ctx.host.serve.protocol import RpcError, error_line, parse_line
from openclaw_ctx.host.serve.scrub import ScrubbingFormatter, drop_secrets, scrub


def test_parse_line_names_each_kind_of_bad_line() -> None:
    codes = []
    for line in [b"{nope", b"[1]", b'{"jsonrpc": "2.0", "id": true, "method": "x"}', b'{"jsonrpc": "2.0", "id": 1}']:
        with pytest.raises(RpcError) as caught:
            parse_line(line)
        codes.append(caught.value.code)
    assert codes == [-32700, -32600, -32600, -32600]
    note = parse_line(b'{"jsonrpc": "2.0", "method": "$/cancel", "params": {"id": 3}}')
    assert note.is_notification and note.params == {"id": 3}
    reply = parse_line(b'{"jsonrpc": "2.0", "id": "s1", "result": {"text": "t"}}')
    assert reply.is_response and reply.result == {"text": "t"}
    line = error_line(RpcError(-32601, "unknown method 'x'\nsecond line"), 5)
    assert line.count(b"\n") == 1 and json.loads(line)["error"]["code"] == -32601


def test_runtime_context_config_is_dropped_and_logs_are_scrubbed() -> None:
    params = {"sessionId": "s", "runtimeContext": {"config": {"apiKey": "sk-1"}, "trigger": "manual"}}
    assert drop_secrets(params) == {"sessionId": "s", "runtimeContext": {"trigger": "manual"}}
    assert params["runtimeContext"]["config"] == {"apiKey": "sk-1"}  # the caller's dict is not mutated
    text = """{"apiKey": "sk-a"} {'openaiApiKey': 'sk-b'} token=sk-c Authorization: Bearer sk-d password=hunter2"""
    cleaned = scrub(text)
    assert not any(secret in cleaned for secret in ("sk-a", "sk-b", "sk-c", "sk-d", "hunter2")), cleaned
    assert scrub("tokenBudget=4000 estimatedTokens: 12") == "tokenBudget=4000 estimatedTokens: 12"
    record = logging.LogRecord("x", logging.WARNING, __file__, 1, "failed with %s", ({"api_key": "sk-e"},), None)
    assert "sk-e" not in ScrubbingFormatter("%(message)s").format(record)


def test_every_hook_with_a_params_model_is_served_by_its_wire_name() -> None:
    assert set(dispatch.SERVED_HOOKS) == {h.wire for h in HOOKS if h.params is not None}
    assert "dispose" not in dispatch.SERVED_HOOKS and "afterTurn" in dispatch.SERVED_HOOKS
    assert dispatch.session_lane({"sessionTarget": {"sessionKey": "t"}, "sessionId": "i"}) == "t"
    assert dispatch.session_lane({"parentSessionKey": "p", "childSessionKey": "c"}) == "p"


class _CommitParams(BaseModel):
    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True, extra="forbid")
    session_id: str
    advancement_key: str


class _Engine:
    info = EngineInfo(id="fake", name="Fake")

    async def assemble(self, params: Any) -> AssembleResult:
        raise RuntimeError("the engine broke")

    async def commit_turn(self, params: _CommitParams) -> dict[str, str]:
        return {"status": "committed", "key": params.advancement_key}


async def test_a_hook_added_to_the_table_is_served_and_engine_errors_are_32000(monkeypatch: Any) -> None:
    added = Hook("commit_turn", "commitTurn", params=_CommitParams)
    monkeypatch.setitem(dispatch.SERVED_HOOKS, "commitTurn", added)
    raw = {"sessionId": "s", "advancementKey": "a1", "sessionTarget": {"x": 1}}
    answer = await dispatch.call_hook(_Engine(), "commitTurn", raw, AbortSignal())  # type: ignore[arg-type]
    assert answer == {"status": "committed", "key": "a1"}
    with pytest.raises(RpcError) as caught:
        await dispatch.call_hook(_Engine(), "assemble", {"sessionId": "s", "messages": []}, AbortSignal())  # type: ignore[arg-type]
    assert (caught.value.code, caught.value.message) == (-32000, "the engine broke")
    assert caught.value.data == {"hook": "assemble", "kind": "RuntimeError"}
    with pytest.raises(RpcError) as missing:
        await dispatch.call_hook(_Engine(), "bootstrap", {"sessionId": "s"}, AbortSignal())  # type: ignore[arg-type]
    assert missing.value.code == -32601


async def test_one_key_runs_in_order_even_when_a_call_is_cancelled_and_keys_run_in_parallel() -> None:
    lanes, events, gate = Lanes(), [], asyncio.Event()

    def job(name: str, wait: bool = False) -> Job:
        async def work(_job: Job) -> None:
            events.append(f"start {name}")
            if wait:
                await gate.wait()
            events.append(f"end {name}")

        return Job(work, lambda _job: events.append(f"cancelled {name}"))

    first, second, third = job("a1", wait=True), job("a2", wait=True), job("a3")
    for j in (first, second, third):
        lanes.submit("a", j)
    lanes.submit("b", job("b1"))
    await asyncio.sleep(0.01)
    assert "end b1" in events and "start a2" not in events  # b ran beside a; a2 waits for a1
    second.cancel()  # cancelled before it started: skipped, and a3 still waits for a1
    await asyncio.sleep(0.01)
    assert "start a3" not in events
    gate.set()
    await lanes.drain()
    on_a = [e for e in events if e.endswith(("a1", "a2", "a3"))]
    assert on_a == ["start a1", "end a1", "cancelled a2", "start a3", "end a3"]
