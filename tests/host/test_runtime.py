"""The host runtime: turn lifecycle, persistence, prechecks, overflow recovery, sub-agents, host requirements.

Third-party engines here are test plugins registered through the real registry; the store, the
runtime and the legacy engine are the real ones.
"""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest
from sqlalchemy import func, select

from openclaw_ctx.config import OpenClawConfig
from openclaw_ctx.contract import (
    AfterTurnParams,
    AssembleParams,
    AssembleResult,
    BootstrapParams,
    BootstrapResult,
    CompactParams,
    CompactResult,
    CompactResultDetail,
    EngineInfo,
    HostRequirements,
    IngestBatchParams,
    IngestBatchResult,
    IngestParams,
    IngestResult,
    PrepareSubagentSpawnParams,
    SubagentEndedParams,
    SubagentSpawnPreparation,
)
from openclaw_ctx.contract.host import cli_host
from openclaw_ctx.contract.settings import RuntimeSettings
from openclaw_ctx.errors import ContextOverflowError, HostRequirementError, NotFoundError, ProviderError
from openclaw_ctx.host.runtime import OVERFLOW_MESSAGE, Runtime
from openclaw_ctx.messages import AssistantMessage, TextContent, ToolCall, ToolResultMessage, UserMessage
from openclaw_ctx.registry import clear_context_engines_for_owner, register_context_engine_for_owner
from openclaw_ctx.store import repo
from openclaw_ctx.store.models import Compaction, Message, Session
from openclaw_ctx.store.store import Store
from openclaw_ctx.testing import ScriptedModel, ScriptedTools, reply

_ids = itertools.count()


class RecordingEngine:
    """A plugin engine that records every hook call (a stand-in for a third-party plugin)."""

    def __init__(self, *, owns: bool = False, authority: str = "assembled", requirements: Any = None) -> None:
        self.calls: list[tuple[str, Any]] = []
        self.owns = owns
        self.authority = authority
        self._info = EngineInfo(
            id="recorder", name="Recorder", owns_compaction=owns or None, host_requirements=requirements
        )

    @property
    def info(self) -> EngineInfo:
        return self._info

    async def bootstrap(self, params: BootstrapParams) -> BootstrapResult:
        self.calls.append(("bootstrap", params))
        return BootstrapResult(bootstrapped=True)

    async def ingest(self, params: IngestParams) -> IngestResult:
        self.calls.append(("ingest", params))
        return IngestResult(ingested=False)

    async def assemble(self, params: AssembleParams) -> AssembleResult:
        self.calls.append(("assemble", params))
        return AssembleResult(
            messages=params.messages[-2:],
            estimated_tokens=10,
            prompt_authority=self.authority,  # type: ignore[arg-type]
        )

    async def compact(self, params: CompactParams) -> CompactResult:
        self.calls.append(("compact", params))
        return CompactResult(ok=True, compacted=False, reason="recorder does not compact")

    async def after_turn(self, params: AfterTurnParams) -> None:
        self.calls.append(("after_turn", params))

    async def prepare_subagent_spawn(self, params: PrepareSubagentSpawnParams) -> SubagentSpawnPreparation:
        self.calls.append(("prepare_subagent_spawn", params))

        async def rollback() -> None:
            self.calls.append(("rollback", params.child_session_key))

        return SubagentSpawnPreparation(rollback)

    async def on_subagent_ended(self, params: SubagentEndedParams) -> None:
        self.calls.append(("on_subagent_ended", params))

    def names(self) -> list[str]:
        return [name for name, _ in self.calls]


@pytest.fixture
def plugin() -> Callable[..., tuple[str, RecordingEngine]]:
    """Register a RecordingEngine under a fresh id; unregistered after the test."""
    owners: list[str] = []

    def make(**kwargs: Any) -> tuple[str, RecordingEngine]:
        engine = RecordingEngine(**kwargs)
        engine_id = f"recorder-{next(_ids)}"
        owner = f"plugin:{engine_id}"
        owners.append(owner)
        assert register_context_engine_for_owner(engine_id, lambda _ctx: engine, owner).ok
        return engine_id, engine

    yield make  # type: ignore[misc]
    for owner in owners:
        clear_context_engines_for_owner(owner)


def config_for(engine_id: str) -> OpenClawConfig:
    return OpenClawConfig.model_validate({"plugins": {"slots": {"contextEngine": engine_id}}})


async def message_count(store: Store, key: str) -> int:
    async with store.read() as conn:
        return int(await conn.scalar(select(func.count()).select_from(Message).where(Message.session_key == key)) or 0)


@pytest.fixture
async def legacy_runtime(store: Store) -> AsyncIterator[tuple[Runtime, ScriptedModel, ScriptedTools]]:
    model = ScriptedModel(context_window=200_000)
    tools = ScriptedTools()
    runtime = await Runtime.create(store, model=model, tools=tools)
    yield runtime, model, tools
    await runtime.dispose()


async def test_legacy_turn_persists_prompt_and_reply(store: Store, legacy_runtime: Any) -> None:
    runtime, model, _ = legacy_runtime
    model.extend([reply("hello back")])
    result = await runtime.run_turn("agent:main:t1", "hello")
    assert result.engine_id == "legacy"
    assert [m.role for m in result.new_messages] == ["user", "assistant"]
    assert await message_count(store, "agent:main:t1") == 2
    async with store.read() as conn:
        session = await repo.active_session(conn, "agent:main:t1")
        assert session is not None
        entries = await repo.load_context(conn, session.session_id)
    assert [e.message.role for e in entries if e.kind == "message"] == ["user", "assistant"]
    # The second turn's model call sees the first turn: legacy passes the pipeline through.
    model.extend([reply("again")])
    await runtime.run_turn("agent:main:t1", "second")
    assert [m.role for m in model.calls[-1].messages] == ["user", "assistant", "user"]


async def test_tool_loop_runs_tools_and_keeps_pairs_in_order(store: Store, legacy_runtime: Any) -> None:
    runtime, model, tools = legacy_runtime
    call = ToolCall(id="call_1", name="read", arguments={"path": "src/app.py"})
    model.extend([AssistantMessage(content=[call], stop_reason="toolUse"), reply("the file defines main()")])
    tools.results["call_1"] = ToolResultMessage(
        tool_call_id="call_1", tool_name="read", content=[TextContent(text="def main(): ...")]
    )
    result = await runtime.run_turn("agent:main:tools", "what is in src/app.py?")
    assert [m.role for m in result.new_messages] == ["user", "assistant", "toolResult", "assistant"]
    async with store.read() as conn:
        rows = (await conn.execute(select(Message.role, Message.tool_call_id).order_by(Message.seq))).all()
    assert [r.role for r in rows] == ["user", "assistant", "toolResult", "assistant"]
    assert rows[1].tool_call_id == rows[2].tool_call_id == "call_1"


async def test_replayed_entry_ids_are_stored_once(store: Store, legacy_runtime: Any) -> None:
    runtime, model, _ = legacy_runtime
    user = UserMessage(content="same turn")
    answer = reply("same answer")
    ids = {id(user): "e1", id(answer): "e2"}
    model.extend([answer])
    await runtime.run_turn("agent:main:idem", user, entry_ids=lambda m: ids.get(id(m)))
    model.extend([answer])
    await runtime.run_turn("agent:main:idem", user, entry_ids=lambda m: ids.get(id(m)))
    assert await message_count(store, "agent:main:idem") == 2


async def test_hooks_in_order_and_runtime_settings_only_where_due(store: Store, plugin: Any) -> None:
    engine_id, engine = plugin()
    model = ScriptedModel([reply("one"), reply("two")])
    runtime = await Runtime.create(store, config=config_for(engine_id), model=model)
    await runtime.run_turn("agent:main:hooks", "first")
    await runtime.run_turn("agent:main:hooks", "second")
    assert engine.names() == ["bootstrap", "assemble", "after_turn", "assemble", "after_turn"]
    for name, params in engine.calls:
        assert isinstance(params.runtime_settings, RuntimeSettings), name
        assert params.runtime_settings.context_engine_selection.selected_id == engine_id
        assert params.runtime_settings.context_engine_selection.source == "configured"
    after = engine.calls[2][1]
    assert after.pre_prompt_message_count == 0 and [m.role for m in after.messages] == ["user", "assistant"]
    assert engine.calls[4][1].pre_prompt_message_count == 2


async def test_ingest_batch_then_ingest_when_no_after_turn(store: Store) -> None:
    seen: list[str] = []

    class BatchOnly:
        info = EngineInfo(id="batch-only", name="Batch only")

        async def ingest(self, params: IngestParams) -> IngestResult:
            seen.append("ingest")
            assert "runtime_settings" not in type(params).model_fields  # never offered to ingest
            return IngestResult(ingested=True)

        async def ingest_batch(self, params: IngestBatchParams) -> IngestBatchResult:
            seen.append(f"batch:{len(params.messages)}")
            return IngestBatchResult(ingested_count=len(params.messages))

        async def assemble(self, params: AssembleParams) -> AssembleResult:
            return AssembleResult(messages=params.messages, estimated_tokens=0)

        async def compact(self, params: CompactParams) -> CompactResult:
            return CompactResult(ok=True, compacted=False)

    register_context_engine_for_owner("batch-only", lambda: BatchOnly(), "plugin:batch-only")
    try:
        runtime = await Runtime.create(store, config=config_for("batch-only"), model=ScriptedModel([reply("x")]))
        await runtime.run_turn("agent:main:batch", "hi")
        assert seen == ["batch:2"]
        del BatchOnly.ingest_batch  # type: ignore[attr-defined]
        runtime2 = await Runtime.create(store, config=config_for("batch-only"), model=ScriptedModel([reply("y")]))
        await runtime2.run_turn("agent:main:batch", "again")
        assert seen == ["batch:2", "ingest", "ingest"]
    finally:
        clear_context_engines_for_owner("plugin:batch-only")


async def test_owning_engine_skips_precheck_unless_preassembly_may_overflow(store: Store, plugin: Any) -> None:
    big = "word " * 4000  # ~5k tokens of history, far above the 2k window minus reserve
    async with store.transaction() as conn:
        session = await repo.ensure_session(conn, "agent:main:own")
        await repo.append_messages(conn, session, [repo.NewMessage(UserMessage(content=big))], store.counter)

    owning_id, owning = plugin(owns=True)
    runtime = await Runtime.create(store, config=config_for(owning_id), model=ScriptedModel([reply("ok")]))
    runtime.context_window = 2_000
    await runtime.run_turn("agent:main:own", "go")  # assembled view is small: no precheck, no compaction
    assert "compact" not in owning.names()

    strict_id, strict = plugin(owns=True, authority="preassembly_may_overflow")
    runtime = await Runtime.create(store, config=config_for(strict_id), model=ScriptedModel([reply("ok")]))
    runtime.context_window = 2_000
    with pytest.raises(ContextOverflowError) as info:
        await runtime.run_turn("agent:main:own", "go again")
    assert info.value.detail == OVERFLOW_MESSAGE
    compacts = [p for n, p in strict.calls if n == "compact"]
    assert compacts and all(p.compaction_target == "budget" and p.force for p in compacts)
    assert isinstance(compacts[0].runtime_settings, RuntimeSettings)  # owning engines get it in compact


async def test_assembly_budget_leaves_room_for_the_in_flight_turn(store: Store, plugin: Any) -> None:
    """The engine fits history into what the prompt (and, after an overflow, the turn so far) leaves."""
    async with store.transaction() as conn:
        session = await repo.ensure_session(conn, "agent:main:inflight")
        history = [UserMessage(content="word " * 480), reply("word " * 480)]  # ~600 tokens each
        await repo.append_messages(conn, session, [repo.NewMessage(m) for m in history], store.counter)
    engine_id, engine = plugin(owns=True)  # assembles the last two messages: all of the history
    call = ToolCall(id="call_big", name="read", arguments={"path": "big.log"})
    big = ToolResultMessage(tool_call_id="call_big", tool_name="read", content=[TextContent(text="line " * 480)])
    # History + the tool output overflow the window on the second model call.
    model = ScriptedModel(
        [AssistantMessage(content=[call], stop_reason="toolUse"), reply("done")], context_window=1_800
    )
    tools = ScriptedTools({"call_big": big})
    runtime = await Runtime.create(store, config=config_for(engine_id), model=model, tools=tools)
    with pytest.raises(ContextOverflowError):  # this engine ignores the budget, so the retries overflow too
        await runtime.run_turn("agent:main:inflight", "read big.log")
    budgets = [p.token_budget for n, p in engine.calls if n == "assemble"]
    assert 0 < runtime.prompt_budget - budgets[0] < 50, "the first assembly leaves room for the prompt only"
    assert budgets[0] - budgets[1] > 550, "a retry after the overflow leaves room for the tool output too"


async def test_overflow_gives_up_after_compaction_and_truncation_but_keeps_the_prompt(store: Store) -> None:
    model = ScriptedModel([reply("never")], context_window=50)
    runtime = await Runtime.create(store, model=model)
    with pytest.raises(ContextOverflowError) as info:
        await runtime.run_turn("agent:main:overflow", "x" * 2_000)
    assert "Try /reset" in info.value.detail
    assert await message_count(store, "agent:main:overflow") == 1  # the user's words are never lost


async def test_a_failed_model_call_keeps_the_prompt_and_raises(store: Store) -> None:
    class Down(ScriptedModel):
        async def complete(self, request: Any) -> AssistantMessage:
            raise ProviderError("connection failed: refused", kind="connection", provider="openai")

    runtime = await Runtime.create(store, model=Down())
    with pytest.raises(ProviderError, match="connection failed"):
        await runtime.run_turn("agent:main:down", "are you there?")
    async with store.read() as conn:
        rows = (await conn.execute(select(Message.role, Message.text).order_by(Message.seq))).all()
    assert [(r.role, r.text) for r in rows] == [("user", "are you there?")]


async def test_assemble_failure_falls_back_to_pipeline_and_quarantines(store: Store) -> None:
    class Broken(RecordingEngine):
        async def assemble(self, params: AssembleParams) -> AssembleResult:
            raise RuntimeError("boom in assemble")

    register_context_engine_for_owner("broken", lambda: Broken(), "plugin:broken")
    try:
        model = ScriptedModel([reply("fine")])
        runtime = await Runtime.create(store, config=config_for("broken"), model=model)
        result = await runtime.run_turn("agent:main:broken", "hello")
        assert [m.role for m in result.new_messages] == ["user", "assistant"]
        assert runtime.engine.info.id == "legacy"
    finally:
        clear_context_engines_for_owner("plugin:broken")


async def test_host_requirements_fail_closed_before_any_write(store: Store, plugin: Any) -> None:
    requirement = {
        "agent-run": HostRequirements(required_capabilities=["assemble-before-prompt"], unsupported_message="x")
    }
    engine_id, _ = plugin(requirements=requirement)
    with pytest.raises(HostRequirementError, match='cannot run operation "agent-run"'):
        await Runtime.create(store, config=config_for(engine_id), model=ScriptedModel(), host=cli_host("claude-cli"))
    async with store.read() as conn:
        assert await conn.scalar(select(func.count()).select_from(Session)) == 0


async def test_manual_compact_passes_instructions_and_threshold_target(store: Store, plugin: Any) -> None:
    engine_id, engine = plugin()
    runtime = await Runtime.create(store, config=config_for(engine_id), model=ScriptedModel([reply("hi")]))
    await runtime.run_turn("agent:main:manual", "hello")
    result = await runtime.compact("agent:main:manual", instructions="keep the API names")
    assert result.ok
    params = engine.calls[-1][1]
    assert params.custom_instructions == "keep the API names"
    assert params.compaction_target == "threshold" and params.force and params.force_reason == "manual"
    assert params.runtime_settings is None  # non-owning engines do not get runtimeSettings in compact


async def test_manual_compact_of_a_key_never_stored_creates_nothing(store: Store, plugin: Any) -> None:
    engine_id, engine = plugin()
    runtime = await Runtime.create(store, config=config_for(engine_id), model=ScriptedModel())
    with pytest.raises(NotFoundError, match="no session key 'agent:main:typo'"):
        await runtime.compact("agent:main:typo")
    assert not [name for name, _ in engine.calls if name == "compact"]
    async with store.read() as conn:
        assert await conn.scalar(select(func.count()).select_from(Session)) == 0


async def test_compaction_safety_timeout(store: Store, plugin: Any) -> None:
    engine_id, engine = plugin()

    async def hang(params: CompactParams) -> CompactResult:
        await asyncio.Event().wait()
        raise AssertionError("unreachable")

    engine.compact = hang  # type: ignore[method-assign]
    runtime = await Runtime.create(
        store, config=config_for(engine_id), model=ScriptedModel([reply("hi")]), compaction_timeout_s=0.05
    )
    await runtime.run_turn("agent:main:hang", "hello")
    result = await runtime.compact("agent:main:hang")
    assert not result.ok and "timed out" in (result.reason or "")


async def test_subagent_prepare_rollback_and_end(store: Store, plugin: Any) -> None:
    engine_id, engine = plugin()
    runtime = await Runtime.create(store, config=config_for(engine_id), model=ScriptedModel())

    async def started() -> str:
        return "child running"

    assert await runtime.spawn_subagent("agent:main:p", "agent:main:subagent:c1", started, context_mode="fork") == (
        "child running"
    )
    await runtime.end_subagent("agent:main:subagent:c1", "completed")

    async def failing() -> str:
        raise RuntimeError("spawn failed")

    with pytest.raises(RuntimeError):
        await runtime.spawn_subagent("agent:main:p", "agent:main:subagent:c2", failing)
    await runtime.spawn_subagent("agent:main:p", "agent:main:subagent:c3", started, light_context=True)
    assert engine.names() == [
        "prepare_subagent_spawn",
        "on_subagent_ended",
        "prepare_subagent_spawn",
        "rollback",
    ]
    ended = engine.calls[1][1]
    assert ended.reason == "completed" and ended.child_session_key == "agent:main:subagent:c1"


async def test_turns_on_one_key_are_serialised_and_keys_run_concurrently(store: Store) -> None:
    active = {"now": 0, "max": 0}

    class SlowModel(ScriptedModel):
        async def complete(self, request: Any) -> AssistantMessage:
            active["now"] += 1
            active["max"] = max(active["max"], active["now"])
            await asyncio.sleep(0.1)
            active["now"] -= 1
            return reply(f"answer for {request.session_key}")

    runtime = await Runtime.create(store, model=SlowModel())
    await asyncio.gather(*(runtime.run_turn("agent:main:same", f"q{i}") for i in range(4)))
    assert active["max"] == 1
    async with store.read() as conn:
        seqs = list((await conn.execute(select(Message.seq).where(Message.session_key == "agent:main:same"))).scalars())
    assert sorted(seqs) == list(range(1, 9))
    active["max"] = 0
    await asyncio.gather(*(runtime.run_turn(f"agent:main:k{i}", "q") for i in range(4)))
    assert active["max"] > 1


async def test_compactions_are_audited_through_the_engine(store: Store) -> None:
    """Legacy auto-compaction rotates the session and writes one audit row per compaction."""
    model = ScriptedModel(context_window=8_000)
    runtime = await Runtime.create(store, model=model)
    for i in range(12):
        model.extend([reply(f"answer {i}: " + "detail " * 300)])
        await runtime.run_turn("agent:main:auto", f"question {i}: " + "context " * 300)
    async with store.read() as conn:
        chain = await repo.session_chain(conn, "agent:main:auto")
        audited = await conn.scalar(
            select(func.count()).select_from(Compaction).where(Compaction.session_key == "agent:main:auto")
        )
        active = await repo.active_session(conn, "agent:main:auto")
        assert active is not None
        tokens = await repo.context_tokens(conn, active.session_id)
    assert len(chain) >= 2 and audited == len(chain) - 1
    assert [s.status for s in chain[:-1]] == ["rotated"] * (len(chain) - 1)
    assert tokens <= runtime.context_window
    assert await message_count(store, "agent:main:auto") == 24


def test_detail_shape() -> None:
    detail = CompactResultDetail(tokens_before=10, tokens_after=5, session_id="s2")
    assert detail.model_dump(by_alias=True, exclude_none=True) == {
        "tokensBefore": 10,
        "tokensAfter": 5,
        "sessionId": "s2",
    }


async def test_engine_tools_are_offered_and_executed_by_the_runtime(store: Store, plugin: Any) -> None:
    from openclaw_ctx.contract.model import ToolSpec

    engine_id, engine = plugin()
    seen: list[dict[str, Any]] = []

    async def grep(args: dict[str, Any]) -> str:
        seen.append(args)
        return f"1 hit for {args['pattern']}"

    engine.tools = lambda key: [ToolSpec("lcm_grep", "search history", {"type": "object"}, grep)]  # type: ignore[attr-defined]
    call = ToolCall(id="g1", name="lcm_grep", arguments={"pattern": "port 54329"})
    model = ScriptedModel([AssistantMessage(content=[call], stop_reason="toolUse"), reply("found it")])
    runtime = await Runtime.create(store, config=config_for(engine_id), model=model)  # no host tool executor
    result = await runtime.run_turn("agent:main:tools2", "what port?")
    assert seen == [{"pattern": "port 54329"}]
    assert [t.name for t in model.calls[0].tools] == ["lcm_grep"]
    tool_result = result.new_messages[2]
    assert isinstance(tool_result, ToolResultMessage) and tool_result.content[0].text == "1 hit for port 54329"  # type: ignore[union-attr]
