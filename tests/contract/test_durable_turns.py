"""OpenClaw 2026.9's durable turns: commitTurn through both engines onto a real SQLite file.

The params are the host's own wire JSON (camelCase, with keys this contract does not declare).
"""

from __future__ import annotations

from typing import Any

import pytest
from sqlalchemy import text

from engines.legacy import LegacyContextEngine
from engines.lossless.engine import create_engine
from openclaw_ctx.contract import (
    DURABLE_TURNS,
    AssembleParams,
    AssembleResult,
    BootstrapParams,
    CommitTurnParams,
    CompactParams,
    EngineContext,
    EngineInfo,
    IngestParams,
    IngestResult,
)
from openclaw_ctx.errors import TurnConflictError
from openclaw_ctx.registry.wrappers import wrap_compat
from openclaw_ctx.store.store import Store

KEY = "agent:main:durable"


def anchor(entry_id: str, seq: int, **extra: Any) -> dict[str, Any]:
    return {
        "agentId": "main",
        "sessionId": "s-1",
        "sessionKey": KEY,
        "storePath": "/state/agents/main/agent/openclaw-agent.sqlite",
        "generation": "84ff3fcf35fb48999317ccdb450185f9",
        "entryId": entry_id,
        "rawSeq": seq,
        "effectiveParentId": None,
        "activeMessagePosition": seq,
        **extra,
    }


def host_turn(n: int, advancement_key: str | None = None) -> dict[str, Any]:
    """One turn as the 2026.9 host commits it: user, assistant with a tool call, tool result, reply."""
    call = f"call_{n}"
    return {
        "advancementKey": advancement_key or f"turn-{n}",
        "admission": {**anchor(f"u{n}", 4 * n), "logicalTurnId": f"lt-{n}", "role": "user"},
        "terminal": anchor(f"a{n}", 4 * n + 3),
        "sessionId": "s-1",
        "sessionKey": KEY,
        "sessionTarget": {"agentId": "main", "sessionKey": KEY, "expectedLifecycleRevision": 3},
        "runtimeContext": {"transcriptStorage": {"kind": "sqlite"}, "config": {"apiKey": "sk-planted"}},
        "someFutureKey": {"x": 1},
        "messages": [
            {"role": "user", "content": f"question {n}", "timestamp": 1_760_000_000_000 + n, "idempotencyKey": f"i{n}"},
            {
                "role": "assistant",
                "content": [{"type": "toolCall", "id": call, "name": "read", "arguments": {"path": f"f{n}.py"}}],
                "stopReason": "toolUse",
                "timestamp": 1_760_000_000_100 + n,
                "__openclaw": {"entryId": f"t{n}"},
            },
            {
                "role": "toolResult",
                "toolCallId": call,
                "toolName": "read",
                "content": [{"type": "text", "text": f"contents of f{n}.py"}],
                "isError": False,
                "timestamp": 1_760_000_000_200 + n,
                "__openclaw": {"entryId": f"r{n}"},
            },
            {
                "role": "assistant",
                "content": [{"type": "text", "text": f"answer {n}"}],
                "stopReason": "stop",
                "timestamp": 1_760_000_000_300 + n,
            },
        ],
    }


async def rows(store: Store, sql: str) -> list[tuple[Any, ...]]:
    async with store.read() as conn:
        return [tuple(r) for r in (await conn.execute(text(sql))).all()]


ENGINES = {
    "legacy": lambda store: LegacyContextEngine(EngineContext(store=store)),
    "lossless-claw": lambda store: create_engine(EngineContext(store=store)),
}


@pytest.mark.parametrize("engine_id", list(ENGINES))
async def test_both_engines_declare_durable_turns(store: Store, engine_id: str) -> None:
    info = ENGINES[engine_id](store).info
    assert info.transcript_semantics == DURABLE_TURNS
    wire = info.model_dump(by_alias=True, exclude_none=True)
    assert wire["transcriptSemantics"] == {
        "currentTurnFence": "before-current-turn-entry-v1",
        "turnAdvancementIdempotency": "atomic-idempotent-v1",
    }


@pytest.mark.parametrize("engine_id", list(ENGINES))
async def test_a_turn_is_committed_once_and_a_retry_is_a_duplicate(store: Store, engine_id: str) -> None:
    engine = wrap_compat(ENGINES[engine_id](store))
    first = await engine.commit_turn(CommitTurnParams.model_validate(host_turn(1)))
    again = await engine.commit_turn(CommitTurnParams.model_validate(host_turn(1)))
    second = await engine.commit_turn(CommitTurnParams.model_validate(host_turn(2)))
    assert (first.status, again.status, second.status) == ("committed", "duplicate", "committed")
    stored = await rows(store, f"SELECT role, entry_id FROM messages WHERE session_key = '{KEY}' ORDER BY seq")
    assert stored == [
        ("user", "u1"), ("assistant", "t1"), ("toolResult", "r1"), ("assistant", "a1"),
        ("user", "u2"), ("assistant", "t2"), ("toolResult", "r2"), ("assistant", "a2"),
    ]  # fmt: skip
    turns = await rows(store, "SELECT advancement_key, message_count, admission_json FROM turn_advancements")
    assert [t[:2] for t in turns] == [("turn-1", 4), ("turn-2", 4)]
    assert '"logicalTurnId":"lt-1"' in turns[0][2]


async def test_the_same_turn_under_a_new_advancement_key_stores_no_message_twice(store: Store) -> None:
    engine = create_engine(EngineContext(store=store))
    await engine.commit_turn(CommitTurnParams.model_validate(host_turn(1)))
    repeat = await engine.commit_turn(CommitTurnParams.model_validate(host_turn(1, advancement_key="other")))
    assert repeat.status == "committed"
    assert await rows(store, "SELECT count(*) FROM messages") == [(4,)]


def contradicting(case: str) -> dict[str, Any]:
    turn = host_turn(2)
    if case == "advancement key of another turn":
        turn = {**host_turn(2, advancement_key="turn-1")}
    elif case == "entry id of another role":
        turn["messages"][0]["__openclaw"] = {"entryId": "a1"}
    elif case == "anchor of another key":
        turn["terminal"] = anchor("a2", 11, sessionKey="agent:main:other")
    elif case == "anchor of another session":
        turn["admission"] = {**turn["admission"], "sessionId": "s-9"}
    return turn


CONTRADICTIONS = {
    "advancement key of another turn": "committed with admission entry 'u1', this call names 'u2'",
    "entry id of another role": (
        "entry 'a1' is stored on 'agent:main:durable' with role 'assistant', this turn sends it with role 'user'"
    ),
    "anchor of another key": "the terminal anchor names session key 'agent:main:other'",
    "anchor of another session": "the admission anchor names session 's-9', the commit is for 's-1'",
}


@pytest.mark.parametrize("engine_id", list(ENGINES))
@pytest.mark.parametrize("case", list(CONTRADICTIONS))
async def test_a_commit_that_contradicts_what_is_stored_is_refused_and_writes_nothing(
    store: Store, engine_id: str, case: str
) -> None:
    engine = wrap_compat(ENGINES[engine_id](store))
    await engine.commit_turn(CommitTurnParams.model_validate(host_turn(1)))
    before = await rows(store, "SELECT message_id, entry_id, message_json FROM messages ORDER BY seq")
    with pytest.raises(TurnConflictError, match=CONTRADICTIONS[case]) as raised:
        await engine.commit_turn(CommitTurnParams.model_validate(contradicting(case)))
    assert "nothing was written" in str(raised.value)
    assert await rows(store, "SELECT message_id, entry_id, message_json FROM messages ORDER BY seq") == before
    assert await rows(store, "SELECT advancement_key FROM turn_advancements") == [("turn-1",)]
    # The turn itself, sent as the host sends it, still goes in.
    assert (await engine.commit_turn(CommitTurnParams.model_validate(host_turn(2)))).status == "committed"


async def test_a_commit_and_its_advancement_key_are_one_transaction(store: Store) -> None:
    from openclaw_ctx.store import repo

    params = CommitTurnParams.model_validate(host_turn(1))
    with pytest.raises(RuntimeError):
        async with store.transaction() as conn:
            await repo.commit_host_turn(conn, params, store.counter, engine_id="legacy")
            raise RuntimeError("the host died mid-commit")
    assert await rows(store, "SELECT count(*) FROM messages") == [(0,)]
    assert await rows(store, "SELECT count(*) FROM turn_advancements") == [(0,)]
    retried = await LegacyContextEngine(EngineContext(store=store)).commit_turn(params)
    assert retried.status == "committed"
    assert await rows(store, "SELECT count(*) FROM messages") == [(4,)]


async def test_no_secret_from_the_runtime_context_is_stored(store: Store, db_path: Any) -> None:
    await create_engine(EngineContext(store=store)).commit_turn(CommitTurnParams.model_validate(host_turn(1)))
    await store.close()
    assert b"sk-planted" not in db_path.read_bytes()


def test_keys_the_contract_does_not_declare_are_ignored_and_named() -> None:
    bootstrap = BootstrapParams.model_validate(
        {"sessionId": "s", "sessionKey": KEY, "sessionTarget": {"sessionKey": KEY, "threadId": "t"}, "brandNew": 1}
    )
    assert bootstrap.session_target is not None and bootstrap.session_target.thread_id == "t"
    assert bootstrap.ignored_keys == ("brandNew",)
    compact = CompactParams.model_validate(
        {"sessionId": "s", "sessionKey": KEY, "agentId": "main", "sessionTarget": {"agentId": "main"}}
    )
    assert (compact.agent_id, compact.ignored_keys) == ("main", ())
    assemble = AssembleParams.model_validate(
        {"sessionId": "s", "messages": [], "runtimeContext": {"llm": None}, "newHostHint": True}
    )
    assert assemble.runtime_context == {"llm": None}
    assert assemble.ignored_keys == ("newHostHint",)
    turn = CommitTurnParams.model_validate(host_turn(1))
    assert turn.ignored_keys == ("someFutureKey",)
    assert turn.session_target is not None
    assert turn.session_target.model_dump(by_alias=True, exclude_none=True)["expectedLifecycleRevision"] == 3


def test_a_commit_without_an_advancement_key_is_refused_with_the_field_named() -> None:
    bad = host_turn(1)
    del bad["advancementKey"]
    with pytest.raises(ValueError, match="advancementKey|advancement_key"):
        CommitTurnParams.model_validate(bad)


class _Declares:
    """An engine that lists the host params it accepts (it gets only those, as the 2026.9 host filters)."""

    def __init__(self) -> None:
        self.seen: list[set[str]] = []
        self.info = EngineInfo(id="declares", name="Declares", accepted_host_params=["sessionKey"])

    async def ingest(self, params: IngestParams) -> IngestResult:
        return IngestResult(ingested=False)

    async def assemble(self, params: AssembleParams) -> AssembleResult:
        self.seen.append(set(params.model_fields_set))
        return AssembleResult(messages=params.messages, estimated_tokens=0)

    async def compact(self, params: CompactParams) -> Any:
        raise NotImplementedError


async def test_host_params_an_engine_does_not_accept_are_withheld() -> None:
    inner = _Declares()
    engine = wrap_compat(inner)
    await engine.assemble(
        AssembleParams(session_id="s", session_key=KEY, messages=[], prompt="p", runtime_context={"config": {}})
    )
    assert inner.seen == [{"session_id", "session_key", "messages"}]


@pytest.mark.parametrize("engine_id", list(ENGINES))
async def test_the_runtime_drives_both_engines_through_commit_turn(store: Store, engine_id: str) -> None:
    from openclaw_ctx.config import OpenClawConfig
    from openclaw_ctx.host.runtime import Runtime
    from openclaw_ctx.testing import ScriptedModel, reply

    config = OpenClawConfig.model_validate({"plugins": {"slots": {"contextEngine": engine_id}}})
    runtime = await Runtime.create(store, config=config, model=ScriptedModel([reply("one"), reply("two")]))
    try:
        ids = iter(["entry-u1", "entry-a1", "entry-u2", "entry-a2"])
        for prompt in ("first", "second"):
            await runtime.run_turn(KEY, prompt, entry_ids=lambda _m: next(ids))
    finally:
        await runtime.dispose()
    turns = await rows(
        store, "SELECT advancement_key, message_count FROM turn_advancements ORDER BY at, advancement_key"
    )
    assert turns == [("turn:entry-u1", 2), ("turn:entry-u2", 2)]
    assert await rows(store, "SELECT count(*) FROM messages") == [(4,)]


def test_the_model_setting_openclaw_writes_as_an_object_is_read() -> None:
    from openclaw_ctx.config import OpenClawConfig

    config = OpenClawConfig.model_validate(
        {"agents": {"defaults": {"model": {"primary": "fake/m1", "fallbacks": ["other/m2"]}}}}
    )
    assert config.agents.defaults.model == "fake/m1"


async def test_a_compaction_served_to_the_2026_9_host_keeps_the_hosts_session_binding(store: Store) -> None:
    from openclaw_ctx.contract import AbortSignal
    from openclaw_ctx.host.serve import dispatch
    from openclaw_ctx.store import repo

    engine = create_engine(EngineContext(store=store, config={"freshTailCount": 2}))
    for n in (1, 2, 3):
        await dispatch.call_hook(engine, "commitTurn", host_turn(n), AbortSignal())
    target = {"agentId": "main", "sessionId": "s-1", "sessionKey": KEY, "storePath": "/state/a.sqlite"}
    manual = {
        "sessionId": "s-1",
        "sessionKey": KEY,
        "agentId": "main",
        "sessionTarget": target,
        "force": True,
        "compactionTarget": "threshold",
        "runtimeContext": {"forceReason": "manual"},
    }
    answer = await dispatch.call_hook(engine, "compact", manual, AbortSignal())
    assert answer["ok"] and answer["compacted"], answer
    detail = answer["result"]
    # The host adopts whatever successor it is told of; ours lives in our store, so it hears its own.
    assert "sessionId" not in detail and "sessionFile" not in detail
    assert detail["sessionTarget"] == target
    async with store.read() as conn:
        active = await repo.active_session(conn, KEY)
    assert active is not None and detail["details"]["storeSessionId"] == active.session_id
    maintained = await dispatch.call_hook(engine, "maintain", {"sessionId": "s-1", "sessionKey": KEY}, AbortSignal())
    assert maintained == {
        "changed": False,
        "bytesFreed": 0,
        "rewrittenEntries": 0,
        "reason": "nothing to do: deferred compaction not allowed in this run",
    }
