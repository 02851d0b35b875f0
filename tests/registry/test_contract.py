"""The engine contract and failure isolation: result shapes, contract validation, quarantine, fallback.

Mirrors OpenClaw's "Contract / registry" result-shape item and the whole "Failure isolation" checklist.
"""

from __future__ import annotations

import asyncio
import logging
from importlib.metadata import entry_points
from typing import Any

import pytest
from test_registry import CountingFactory, FakeEngine, make_registry, slot, user

from engines.legacy import LegacyContextEngine
from openclaw_ctx.contract import (
    AbortSignal,
    AfterTurnParams,
    AssembleParams,
    AssembleResult,
    BootstrapParams,
    BootstrapResult,
    CompactParams,
    CompactResult,
    ContextEngine,
    EngineContext,
    EngineInfo,
    IngestBatchParams,
    IngestBatchResult,
    IngestParams,
    IngestResult,
    MaintainResult,
    PrepareSubagentSpawnParams,
    SubagentEndedParams,
    supports,
)
from openclaw_ctx.errors import AbortError, EngineContractError, EngineNotFoundError
from openclaw_ctx.registry import CORE_OWNER, ENTRY_POINT_GROUP, EngineRegistry, contract_error
from openclaw_ctx.store import repo
from openclaw_ctx.store.store import Store
from openclaw_ctx.summarize.extractive import ExtractiveSummarizer

QUARANTINE_TEXT = (
    '[context-engine] Context engine "{id}"{owner} failed during {op}: {reason}; '
    'quarantining it for this process and falling back to default engine "legacy".'
)


def errors_logged(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR]


async def resolve_fake(**kwargs: Any) -> tuple[EngineRegistry, Any, CountingFactory]:
    """A registry with legacy and a `fake` plugin, and the resolved (wrapped) fake engine."""
    reg = make_registry()
    factory = CountingFactory(lambda: FakeEngine("fake", **kwargs))
    reg.register_for_owner("fake", factory, "plugin:fake")
    return reg, (await reg.resolve(slot("fake"))).engine, factory


# --- result shapes -------------------------------------------------------------------------------


async def test_hook_results_have_the_contract_shapes() -> None:
    reg = make_registry()
    reg.register_for_owner("fake", lambda: FakeEngine("fake"), "plugin:fake")
    engine = (await reg.resolve(slot("fake"))).engine
    assert isinstance(engine, ContextEngine)
    ingested = await engine.ingest(IngestParams(session_id="s", message=user("a")))
    assert isinstance(ingested, IngestResult) and isinstance(ingested.ingested, bool)
    assembled = await engine.assemble(AssembleParams(session_id="s", messages=[user("a"), user("b"), user("c")]))
    assert isinstance(assembled, AssembleResult)
    assert isinstance(assembled.messages, list) and [m.content for m in assembled.messages] == ["b", "c"]
    wire = assembled.model_dump(by_alias=True, mode="json", exclude={"messages"})
    assert isinstance(wire["estimatedTokens"], int) and wire["systemPromptAddition"] == "fake recall"
    compacted = await engine.compact(CompactParams(session_id="s"))
    wire = compacted.model_dump(by_alias=True, mode="json")
    assert {"ok", "compacted", "reason", "result"} <= wire.keys()
    assert {"summary", "tokensBefore", "tokensAfter"} <= wire["result"].keys()
    assert await engine.dispose() is None


async def test_optional_hooks_exist_on_the_wrapped_engine_only_when_the_engine_has_them() -> None:
    class Minimal(FakeEngine):
        bootstrap = None  # type: ignore[assignment]

    reg = make_registry()
    reg.register_for_owner("min", lambda: Minimal("min"), "plugin:min")
    engine = (await reg.resolve(slot("min"))).engine
    assert not supports(engine, "bootstrap")
    assert supports(engine, "after_turn") and supports(engine, "dispose")
    legacy = (await reg.resolve(None)).engine
    assert supports(legacy, "after_turn") and not supports(legacy, "bootstrap")


def test_contract_error_lists_every_missing_member() -> None:
    class NoMethods:
        info = EngineInfo(id="x", name="X")

    class BlankInfo(FakeEngine):
        @property
        def info(self) -> Any:
            return {"id": "  ", "name": ""}

    assert contract_error("x", FakeEngine()) is None
    assert contract_error("x", NoMethods()) == (
        'Context engine "x" factory returned an invalid ContextEngine: '
        "missing ingest(), missing assemble(), missing compact()."
    )
    assert contract_error("x", BlankInfo()) == (
        'Context engine "x" factory returned an invalid ContextEngine: missing info.id, missing info.name.'
    )
    assert contract_error("x", None) == 'Context engine "x" factory returned None instead of a ContextEngine object.'


# --- quarantine at resolution ----------------------------------------------------------------------


class _NoAssembleCompact:
    info = EngineInfo(id="broken", name="Broken")

    async def ingest(self, params: IngestParams) -> IngestResult:
        return IngestResult(ingested=True)


class _NoInfo(FakeEngine):
    info = None  # type: ignore[assignment]


class _InfoRaises(FakeEngine):
    @property
    def info(self) -> EngineInfo:
        raise RuntimeError("info exploded")


def _raise(exc: BaseException) -> Any:
    raise exc


_INVALID = 'Context engine "broken" factory returned an invalid ContextEngine: '
_DOWNGRADED = "context engine downgraded to legacy"


@pytest.mark.parametrize(
    ("factory", "operation", "reason", "owner"),
    [
        (None, "resolve", "not registered", None),
        (lambda: _raise(RuntimeError("factory exploded")), "factory", "factory exploded", "plugin:broken"),
        (lambda: _NoInfo(), "contract-validation", _INVALID + "missing info.", "plugin:broken"),
        (
            _NoAssembleCompact,
            "contract-validation",
            _INVALID + "missing assemble(), missing compact().",
            "plugin:broken",
        ),
        (lambda: _InfoRaises(), "contract-validation", "info exploded", "plugin:broken"),
        (lambda: "not an engine", "contract-validation", "factory returned str instead of", "plugin:broken"),
    ],
    ids=["missing", "factory-throws", "missing-info", "missing-methods", "validation-throws", "not-an-object"],
)
async def test_broken_engine_falls_back_to_legacy_with_exact_log_and_quarantine(
    factory: Any, operation: str, reason: str, owner: str | None, caplog: pytest.LogCaptureFixture
) -> None:
    reg = make_registry()
    if factory is not None:
        reg.register_for_owner("broken", factory, "plugin:broken")
    resolved = await reg.resolve(slot("broken"))
    assert resolved.engine.info.id == "legacy" and resolved.engine_id == "broken"
    assert resolved.owner == CORE_OWNER and resolved.fallback_reason == "quarantined"
    (record,) = reg.list_quarantines()
    assert (record.engine_id, record.owner, record.operation) == ("broken", owner, operation)
    assert reason in record.reason
    expected = QUARANTINE_TEXT.format(
        id="broken", owner=f" owner={owner}" if owner else "", op=operation, reason=record.reason
    )
    assert errors_logged(caplog) == [expected]


async def test_missing_engine_log_text_is_exactly_openclaws(caplog: pytest.LogCaptureFixture) -> None:
    reg = make_registry()
    await reg.resolve(slot("ghost"))
    assert errors_logged(caplog) == [
        '[context-engine] Context engine "ghost" failed during resolve: not registered; '
        'quarantining it for this process and falling back to default engine "legacy".'
    ]


async def test_quarantined_engine_is_not_resolved_again_and_first_failure_wins() -> None:
    reg = make_registry()
    factory = CountingFactory(lambda: _raise(RuntimeError("first")))
    reg.register_for_owner("broken", factory, "plugin:broken")
    await reg.resolve(slot("broken"))
    await reg.resolve(slot("broken"))
    assert factory.calls == 1
    reg.quarantine("broken", "plugin:broken", "assemble", "second")
    assert [q.reason for q in reg.list_quarantines()] == ["first"]


# --- quarantine during lifecycle calls ---------------------------------------------------------------


async def test_assemble_throws_same_call_returns_legacy_pass_through_and_quarantines() -> None:
    reg = make_registry()
    factory = CountingFactory(lambda: FakeEngine("fake"))
    reg.register_for_owner("fake", factory, "plugin:fake")
    factory_engine = await reg.resolve(slot("fake"))
    factory.built[0].fail["assemble"] = RuntimeError("assemble exploded")
    messages = [user("a"), user("b"), user("c")]
    result = await factory_engine.engine.assemble(AssembleParams(session_id="s", messages=messages))
    assert result.messages is messages and result.estimated_tokens == 0
    assert result.system_prompt_addition is None
    (record,) = reg.list_quarantines()
    assert (record.engine_id, record.owner, record.operation, record.reason) == (
        "fake",
        "plugin:fake",
        "assemble",
        "assemble exploded",
    )
    again = await reg.resolve(slot("fake"))
    assert again.engine.info.id == "legacy" and factory.calls == 1


def _params_for(hook: str) -> Any:
    msgs = [user("a")]
    return {
        "ingest": IngestParams(session_id="s", message=msgs[0]),
        "ingest_batch": IngestBatchParams(session_id="s", messages=msgs),
        "bootstrap": BootstrapParams(session_id="s"),
        "maintain": BootstrapParams(session_id="s"),
        "after_turn": AfterTurnParams(session_id="s", messages=msgs, pre_prompt_message_count=0),
        "on_subagent_ended": SubagentEndedParams(child_session_key="c", reason="completed"),
    }[hook]


@pytest.mark.parametrize(
    ("hook", "expected"),
    [
        ("ingest", IngestResult(ingested=False)),
        ("ingest_batch", IngestBatchResult(ingested_count=0)),
        ("bootstrap", BootstrapResult(bootstrapped=False, reason=_DOWNGRADED)),
        ("maintain", MaintainResult(reason=_DOWNGRADED)),
        ("after_turn", None),
        ("on_subagent_ended", None),
    ],
)
async def test_other_hooks_that_throw_fall_back_to_legacy_in_the_same_call(hook: str, expected: Any) -> None:
    reg, engine, factory = await resolve_fake()
    factory.built[0].fail[hook] = ValueError(f"{hook} exploded")
    assert await getattr(engine, hook)(_params_for(hook)) == expected
    (record,) = reg.list_quarantines()
    assert record.reason == f"{hook} exploded"
    # Later calls go straight to legacy: the plugin is not called again.
    assert await getattr(engine, hook)(_params_for(hook)) == expected
    assert factory.built[0].count(hook) == 1


async def test_after_quarantine_the_same_proxy_reports_legacy_info_and_no_owner() -> None:
    reg, engine, factory = await resolve_fake(owns_compaction=True)
    assert engine.info.owns_compaction is True and getattr(engine, "owner", None) == "plugin:fake"
    factory.built[0].fail["ingest"] = RuntimeError("nope")
    await engine.ingest(IngestParams(session_id="s", message=user("a")))
    assert engine.info.id == "legacy" and engine.info.owns_compaction is None
    assert getattr(engine, "owner", "unset") is None


async def test_compact_throws_propagates_but_quarantines() -> None:
    reg, engine, factory = await resolve_fake()
    boom = RuntimeError("compact exploded")
    factory.built[0].fail["compact"] = boom
    with pytest.raises(RuntimeError) as caught:
        await engine.compact(CompactParams(session_id="s"))
    assert caught.value is boom
    assert [(q.operation, q.reason) for q in reg.list_quarantines()] == [("compact", "compact exploded")]


async def test_prepare_subagent_spawn_throws_propagates_but_quarantines() -> None:
    reg, engine, factory = await resolve_fake()
    factory.built[0].fail["prepare_subagent_spawn"] = RuntimeError("spawn prep exploded")
    with pytest.raises(RuntimeError, match="spawn prep exploded"):
        await engine.prepare_subagent_spawn(PrepareSubagentSpawnParams(parent_session_key="p", child_session_key="c"))
    assert [q.operation for q in reg.list_quarantines()] == ["prepareSubagentSpawn"]


@pytest.mark.parametrize(
    "error",
    [AbortError("aborted by user"), RuntimeError("request was cancelled"), asyncio.CancelledError()],
    ids=["AbortError", "abort-looking-while-aborted", "CancelledError"],
)
async def test_abort_rejection_propagates_without_quarantine_or_error_log(
    error: BaseException, caplog: pytest.LogCaptureFixture
) -> None:
    reg, engine, factory = await resolve_fake()
    signal = AbortSignal()

    async def compact_then_abort(params: CompactParams) -> CompactResult:
        signal.abort("user pressed stop")
        raise error

    factory.built[0].compact = compact_then_abort  # type: ignore[method-assign]
    with pytest.raises(type(error)):
        await engine.compact(CompactParams(session_id="s", abort_signal=signal))
    assert reg.list_quarantines() == [] and errors_logged(caplog) == []


async def test_already_aborted_signal_raises_its_reason_without_calling_the_engine() -> None:
    reg, engine, factory = await resolve_fake()
    signal = AbortSignal()
    signal.abort("stop")
    with pytest.raises(AbortError, match="stop"):
        await engine.compact(CompactParams(session_id="s", abort_signal=signal))
    assert factory.built[0].count("compact") == 0 and reg.list_quarantines() == []


async def test_non_abort_error_while_signal_is_live_still_quarantines() -> None:
    reg, engine, factory = await resolve_fake()
    factory.built[0].fail["compact"] = RuntimeError("request was cancelled upstream")
    with pytest.raises(RuntimeError):
        await engine.compact(CompactParams(session_id="s", abort_signal=AbortSignal()))
    assert [q.operation for q in reg.list_quarantines()] == ["compact"]


async def test_later_registration_of_a_missing_engine_clears_its_quarantine() -> None:
    reg = make_registry()
    assert (await reg.resolve(slot("late"))).engine.info.id == "legacy"
    assert [q.engine_id for q in reg.list_quarantines()] == ["late"]
    reg.register_for_owner("late", lambda: FakeEngine("late"), "plugin:late")
    assert reg.list_quarantines() == []
    assert (await reg.resolve(slot("late"))).engine.info.id == "late"


# --- the default engine fails loudly ---------------------------------------------------------------


async def test_default_engine_missing_throws_not_registered() -> None:
    reg = EngineRegistry(autoload=False)
    reg.register_for_owner("other", FakeEngine, "plugin:other")
    with pytest.raises(EngineNotFoundError) as caught:
        await reg.resolve(None)
    assert str(caught.value) == 'Context engine "legacy" is not registered. Available engines: other'
    with pytest.raises(EngineNotFoundError, match='fallback failed: default engine "legacy" is not registered'):
        await reg.resolve(slot("ghost"))


async def test_default_factory_throw_and_invalid_default_propagate() -> None:
    reg = EngineRegistry(autoload=False)
    reg.register_for_owner("legacy", lambda: _raise(RuntimeError("legacy factory exploded")), CORE_OWNER)
    with pytest.raises(RuntimeError, match="legacy factory exploded"):
        await reg.resolve(None)
    invalid = EngineRegistry(autoload=False)
    invalid.register_for_owner("legacy", lambda: _NoAssembleCompact(), CORE_OWNER)
    with pytest.raises(EngineContractError, match='Context engine "legacy" factory returned an invalid ContextEngine'):
        await invalid.resolve(None)
    assert reg.list_quarantines() == [] and invalid.list_quarantines() == []


async def test_info_id_may_differ_from_the_registered_slot_id() -> None:
    reg = make_registry()
    reg.register_for_owner("lossless-claw", lambda: FakeEngine("lossless-claw", info_id="lcm"), "plugin:lossless-claw")
    resolved = await reg.resolve(slot("lossless-claw"))
    assert resolved.engine.info.id == "lcm" and resolved.engine_id == "lossless-claw"
    assert reg.list_quarantines() == []


async def test_default_engine_is_not_wrapped_in_the_quarantine_proxy() -> None:
    reg = EngineRegistry(autoload=False)
    built: list[LegacyContextEngine] = []

    def legacy_factory() -> LegacyContextEngine:
        built.append(LegacyContextEngine())
        return built[-1]

    reg.register_for_owner("legacy", legacy_factory, CORE_OWNER)
    engine = (await reg.resolve(None)).engine

    async def failing_ingest(params: IngestParams) -> IngestResult:
        raise RuntimeError("legacy ingest exploded")

    built[0].ingest = failing_ingest  # type: ignore[method-assign]
    with pytest.raises(RuntimeError, match="legacy ingest exploded"):
        await engine.ingest(IngestParams(session_id="s", message=user("a")))
    assert reg.list_quarantines() == []


# --- every installed engine honours the contract -------------------------------------------------

INSTALLED = sorted(ep.name for ep in entry_points(group=ENTRY_POINT_GROUP))


@pytest.mark.parametrize("name", INSTALLED)
async def test_every_installed_engine_honours_the_contract(name: str, store: Store) -> None:
    """Each entry point loads, resolves unquarantined, and answers every required hook in shape."""
    reg = EngineRegistry(autoload=False)
    reg.ensure_loaded(allow={name})
    assert reg.load_errors == {}
    ctx = EngineContext(store=store, summarizer=ExtractiveSummarizer(store.counter))
    resolved = await reg.resolve(slot(name), ctx)
    assert reg.list_quarantines() == [] and resolved.fallback_reason is None
    engine = resolved.engine
    async with store.transaction() as conn:
        session = await repo.ensure_session(conn, f"agent:main:{name}", engine_id=name)
    history = [user(f"message {i} " + "word " * 40) for i in range(6)]
    base = {"session_id": session.session_id, "session_key": session.session_key}
    for i, message in enumerate(history):
        assert isinstance((await engine.ingest(IngestParams(message=message, entry_id=f"e{i}", **base))).ingested, bool)
    duplicate = await engine.ingest(IngestParams(message=history[0], entry_id="e0", **base))
    assert duplicate.ingested is False, "a known entry id is never ingested twice"
    assembled = await engine.assemble(AssembleParams(messages=history, token_budget=50_000, **base))
    assert isinstance(assembled, AssembleResult) and assembled.estimated_tokens >= 0
    assert all(hasattr(m, "role") for m in assembled.messages)
    compacted = await engine.compact(CompactParams(token_budget=50_000, session_file=session.session_file, **base))
    assert isinstance(compacted, CompactResult) and isinstance(compacted.ok, bool)
    if supports(engine, "dispose"):
        assert await engine.dispose() is None
    assert reg.list_quarantines() == [], "no hook failed"


async def test_fallback_engine_gets_the_shared_ctx_without_the_plugins_own_config(store: Store) -> None:
    reg = EngineRegistry(autoload=False)
    legacy_contexts: list[EngineContext] = []

    def legacy_factory(ctx: EngineContext) -> LegacyContextEngine:
        legacy_contexts.append(ctx)
        return LegacyContextEngine(ctx)

    reg.register_for_owner("legacy", legacy_factory, CORE_OWNER)
    factory = CountingFactory(lambda: FakeEngine("fake"))
    reg.register_for_owner("fake", factory, "plugin:fake")
    config = slot("fake", entries={"fake": {"config": {"secret": 1}}})
    engine = (await reg.resolve(config, EngineContext(store=store, workspace_dir="/ws"))).engine
    assert factory.contexts[0].config == {"secret": 1}
    factory.built[0].fail["assemble"] = RuntimeError("boom")
    await engine.assemble(AssembleParams(session_id="s", messages=[user("a")]))
    (fallback_ctx,) = legacy_contexts
    assert fallback_ctx.config is None
    assert fallback_ctx.store is store and fallback_ctx.workspace_dir == "/ws"
    assert fallback_ctx.openclaw_config is config


async def test_when_the_default_engine_also_fails_the_original_error_is_raised() -> None:
    reg = EngineRegistry(autoload=False)
    default = FakeEngine("legacy")
    default.fail["assemble"] = RuntimeError("default failed too")
    reg.register_for_owner("legacy", lambda: default, CORE_OWNER)
    factory = CountingFactory(lambda: FakeEngine("fake"))
    reg.register_for_owner("fake", factory, "plugin:fake")
    engine = (await reg.resolve(slot("fake"))).engine
    original = RuntimeError("plugin failed")
    factory.built[0].fail["assemble"] = original
    with pytest.raises(RuntimeError) as caught:
        await engine.assemble(AssembleParams(session_id="s", messages=[user("a")]))
    assert caught.value is original and default.count("assemble") == 1
    assert [q.reason for q in reg.list_quarantines()] == ["plugin failed"]
