"""Capabilities, not getattr: the HOOKS table, the capability checks, and the wrappers that mirror them."""

from __future__ import annotations

import inspect
from typing import Any, ClassVar, get_args

import pytest
from test_registry import FakeEngine, make_registry, slot, user
from test_registry_compat import _camel

from openclaw_ctx.contract import (
    HOOKS,
    OPTIONAL_HOOKS,
    AfterTurnCapable,
    BootstrapCapable,
    CommitTurnCapable,
    ContextEngine,
    DisposeCapable,
    HostCapability,
    IngestBatchCapable,
    IngestParams,
    MaintainCapable,
    SubagentEndedCapable,
    SubagentSpawnCapable,
    supports,
    supports_after_turn,
    supports_bootstrap,
    supports_commit_turn,
    supports_deferred_compaction,
    supports_dispose,
    supports_ingest_batch,
    supports_maintain,
    supports_spawning_tools,
    supports_subagent_ended,
    supports_subagent_spawn,
    supports_tools,
)
from openclaw_ctx.contract.host import CAPABILITY_ORDER, EMBEDDED_HOST, HOOK_CAPABILITIES
from openclaw_ctx.contract.model import ToolSpec
from openclaw_ctx.host.runtime import Runtime
from openclaw_ctx.host.scripted import ScriptedModel
from openclaw_ctx.messages import AssistantMessage, TextContent
from openclaw_ctx.registry import is_quarantined
from openclaw_ctx.registry.wrappers import GUARDED_HOOKS, HOST_PARAM_KEYS, operation_name, wrap_compat
from openclaw_ctx.store.store import Store

HOOK_PROTOCOLS = (
    ContextEngine,
    BootstrapCapable,
    IngestBatchCapable,
    CommitTurnCapable,
    AfterTurnCapable,
    MaintainCapable,
    SubagentSpawnCapable,
    SubagentEndedCapable,
    DisposeCapable,
)
"""The protocols of the lifecycle hooks (tools and deferred compaction are host capabilities, not hooks)."""

OPTIONAL_CHECKS = (
    supports_bootstrap,
    supports_ingest_batch,
    supports_commit_turn,
    supports_after_turn,
    supports_maintain,
    supports_subagent_spawn,
    supports_subagent_ended,
    supports_dispose,
    supports_deferred_compaction,
    supports_tools,
    supports_spawning_tools,
)


def _protocol_methods(protocol: type) -> set[str]:
    return {n for n, v in vars(protocol).items() if not n.startswith("_") and inspect.iscoroutinefunction(v)}


class _Spawning(FakeEngine):
    tools_accept_spawn: ClassVar[bool] = True

    def __init__(self) -> None:
        super().__init__("spawning")
        self.spawns: list[Any] = []

    def tools(self, session_key: str, *, spawn: Any = None) -> list[ToolSpec]:
        self.spawns.append(spawn)
        return []

    async def drain_debt(self, session_key: str) -> None:
        return None


class _Undeclared(FakeEngine):
    """Takes `spawn=` but does not declare it: the host must not sniff the signature."""

    def __init__(self) -> None:
        super().__init__("undeclared")
        self.spawns: list[Any] = []

    def tools(self, session_key: str, spawn: Any = None) -> list[ToolSpec]:
        self.spawns.append(spawn)
        return []


class _Minimal:
    info = FakeEngine().info

    async def ingest(self, params: Any) -> Any: ...
    async def assemble(self, params: Any) -> Any: ...
    async def compact(self, params: Any) -> Any: ...


# --- the table -----------------------------------------------------------------------------------


def test_the_table_names_every_hook_the_protocols_declare() -> None:
    declared = set().union(*(_protocol_methods(p) for p in HOOK_PROTOCOLS))
    assert {h.name for h in HOOKS} == declared
    assert {h.name for h in HOOKS if h.required} == _protocol_methods(ContextEngine)


def test_wire_names_are_the_camel_case_of_each_hook() -> None:
    assert all(h.wire == _camel(h.name) for h in HOOKS)
    assert operation_name("after_turn") == "afterTurn" and operation_name("resolve") == "resolve"


def test_every_guarded_hook_of_the_table_is_guarded_by_the_wrapper() -> None:
    assert set(GUARDED_HOOKS) == {h.name for h in HOOKS} - {"dispose"}
    assert "maintain" in GUARDED_HOOKS and "maintain" in OPTIONAL_HOOKS
    assert HOST_PARAM_KEYS == {h.name: h.host_keys for h in HOOKS if h.host_keys}
    for h in HOOKS:
        if h.guarded and not h.required and not h.reraises:
            assert h.fallback is not None, f"{h.name}: a quarantined call needs a downgraded answer"


def test_every_optional_hook_has_a_check_and_a_proxy() -> None:
    for name in OPTIONAL_HOOKS:
        assert supports(FakeEngine(), name), name
        assert not supports(_Minimal(), name), name
    wrapped = wrap_compat(FakeEngine())
    assert all(callable(getattr(wrapped, name, None)) for name in OPTIONAL_HOOKS)


def test_host_capabilities_of_the_hooks_are_named_in_host_requirements() -> None:
    assert set(CAPABILITY_ORDER) == set(get_args(HostCapability))
    assert HOOK_CAPABILITIES == {h.capability for h in HOOKS if h.capability}
    assert HOOK_CAPABILITIES <= set(CAPABILITY_ORDER)
    assert HOOK_CAPABILITIES <= EMBEDDED_HOST.capabilities


def test_supports_refuses_names_outside_the_optional_hooks() -> None:
    with pytest.raises(ValueError, match="required hook"):
        supports(FakeEngine(), "assemble")
    with pytest.raises(ValueError, match="unknown hook"):
        supports(FakeEngine(), "afterTurn")


# --- the checks and the wrappers -------------------------------------------------------------------


def test_checks_answer_what_the_engine_has() -> None:
    full, minimal = _Spawning(), _Minimal()
    assert all(check(full) for check in OPTIONAL_CHECKS)
    assert not any(check(minimal) for check in OPTIONAL_CHECKS)


def test_spawning_tools_are_declared_never_sniffed() -> None:
    undeclared = _Undeclared()
    assert supports_tools(undeclared) and not supports_spawning_tools(undeclared)
    assert supports_spawning_tools(_Spawning())


@pytest.mark.parametrize("make", [_Spawning, _Undeclared, _Minimal, FakeEngine])
async def test_wrappers_have_exactly_the_capabilities_of_the_engine(make: Any) -> None:
    reg = make_registry()
    reg.register_for_owner("plug", lambda: make(), "plugin:plug")
    engine = (await reg.resolve(slot("plug"))).engine
    inner = make()
    assert [check(engine) for check in OPTIONAL_CHECKS] == [check(inner) for check in OPTIONAL_CHECKS]
    assert isinstance(engine, ContextEngine)
    assert not hasattr(type(engine), "__getattr__")


async def test_quarantine_is_read_from_the_wrapper_not_guessed() -> None:
    reg = make_registry()
    reg.register_for_owner("fake", lambda: FakeEngine("fake"), "plugin:fake")
    engine = (await reg.resolve(slot("fake"))).engine
    legacy = (await reg.resolve(None)).engine
    assert not is_quarantined(engine) and not is_quarantined(legacy)
    engine.inner.inner.fail["ingest"] = RuntimeError("boom")
    await engine.ingest(IngestParams(session_id="s", message=user("a")))
    assert is_quarantined(engine) and not is_quarantined(legacy)


# --- the host asks the checks ----------------------------------------------------------------------


def _reply() -> AssistantMessage:
    return AssistantMessage(content=[TextContent(text="ok")], stop_reason="stop", model="scripted")


@pytest.mark.parametrize(("make", "gets_spawn"), [(_Spawning, True), (_Undeclared, False)])
async def test_the_runtime_hands_spawn_only_to_declared_tools(store: Store, make: Any, gets_spawn: bool) -> None:
    from openclaw_ctx.registry import clear_context_engines_for_owner, register_context_engine_for_owner

    engine = make()
    owner = f"plugin:{engine.engine_id}"
    assert register_context_engine_for_owner(engine.engine_id, lambda _ctx: engine, owner).ok
    try:
        runtime = await Runtime.create(store, config=slot(engine.engine_id), model=ScriptedModel([_reply()]))
        await runtime.run_turn("agent:main:caps", "hi")
        await runtime.dispose()
    finally:
        clear_context_engines_for_owner(owner)
    (spawn,) = engine.spawns
    assert spawn == (runtime.subagents.run_delegated if gets_spawn else None)
