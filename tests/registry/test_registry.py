"""Registry: registration by owner, slot selection, factory ctx, discovery-only entries, entry-point loading.

Mirrors the "Contract / registry" checklist of OpenClaw's context-engine tests. `FakeEngine` here is a
test double of a third-party plugin engine; the other registry test files import it.
"""

from __future__ import annotations

import importlib.util
import logging
import os
import subprocess
import sys
import textwrap
from collections.abc import Callable
from importlib.metadata import EntryPoint
from pathlib import Path
from typing import Any

import pytest

from engines.legacy import LegacyContextEngine
from openclaw_ctx import testing
from openclaw_ctx.config import OpenClawConfig
from openclaw_ctx.contract import (
    AssembleParams,
    AssembleResult,
    BootstrapResult,
    CommitTurnResult,
    CompactParams,
    CompactResult,
    CompactResultDetail,
    EngineContext,
    EngineInfo,
    IngestBatchResult,
    IngestParams,
    IngestResult,
    MaintainResult,
    SubagentSpawnPreparation,
)
from openclaw_ctx.messages import UserMessage
from openclaw_ctx.registry import (
    CORE_OWNER,
    PUBLIC_SDK_OWNER,
    EngineRegistry,
    RegisterResult,
    get_registry,
    owner_plugin_id,
    resolve_context_engine,
)
from openclaw_ctx.registry import registry as registry_module
from openclaw_ctx.registry.health import read_health
from openclaw_ctx.registry.records import env_allow

REGISTRY_LOGGER = "openclaw_ctx.registry.registry"


class FakeEngine:
    """A plugin engine double: records calls, raises what `fail` says, returns contract-shaped results."""

    def __init__(self, engine_id: str = "fake", *, info_id: str | None = None, owns_compaction: bool | None = None):
        self.engine_id = engine_id
        self._info = EngineInfo(id=info_id or engine_id, name="Fake Engine", owns_compaction=owns_compaction)
        self.calls: list[tuple[str, Any]] = []
        self.fail: dict[str, BaseException] = {}
        self.seen_entries: list[str | None] = []

    @property
    def info(self) -> EngineInfo:
        return self._info

    def _enter(self, method: str, params: Any) -> None:
        self.calls.append((method, params))
        if method in self.fail:
            raise self.fail[method]

    def count(self, method: str) -> int:
        return sum(1 for m, _ in self.calls if m == method)

    async def ingest(self, params: IngestParams) -> IngestResult:
        self._enter("ingest", params)
        self.seen_entries.append(params.entry_id)
        return IngestResult(ingested=True)

    async def ingest_batch(self, params: Any) -> IngestBatchResult:
        self._enter("ingest_batch", params)
        return IngestBatchResult(ingested_count=len(params.messages))

    async def assemble(self, params: AssembleParams) -> AssembleResult:
        self._enter("assemble", params)
        kept = list(params.messages)[-2:]
        return AssembleResult(messages=kept, estimated_tokens=10 * len(kept), system_prompt_addition="fake recall")

    async def compact(self, params: CompactParams) -> CompactResult:
        self._enter("compact", params)
        detail = CompactResultDetail(summary="fake summary", tokens_before=100, tokens_after=10)
        return CompactResult(ok=True, compacted=True, reason=None, result=detail)

    async def bootstrap(self, params: Any) -> BootstrapResult:
        self._enter("bootstrap", params)
        return BootstrapResult(bootstrapped=True, imported_messages=0)

    async def maintain(self, params: Any) -> MaintainResult:
        self._enter("maintain", params)
        return MaintainResult(changed=True, bytes_freed=1, rewritten_entries=1)

    async def commit_turn(self, params: Any) -> CommitTurnResult:
        self._enter("commit_turn", params)
        return CommitTurnResult(status="committed")

    async def after_turn(self, params: Any) -> None:
        self._enter("after_turn", params)

    async def prepare_subagent_spawn(self, params: Any) -> SubagentSpawnPreparation:
        self._enter("prepare_subagent_spawn", params)
        return SubagentSpawnPreparation(lambda: None)

    async def on_subagent_ended(self, params: Any) -> None:
        self._enter("on_subagent_ended", params)

    async def dispose(self) -> None:
        self.calls.append(("dispose", None))


class CountingFactory:
    """A factory that builds one engine per call and remembers the ctx it got."""

    def __init__(self, make: Callable[[], Any]) -> None:
        self.make = make
        self.contexts: list[EngineContext] = []
        self.built: list[Any] = []

    def __call__(self, ctx: EngineContext) -> Any:
        self.contexts.append(ctx)
        engine = self.make()
        self.built.append(engine)
        return engine

    @property
    def calls(self) -> int:
        return len(self.contexts)


def make_registry() -> EngineRegistry:
    """A fresh registry with the real legacy engine registered by core (no entry-point autoload)."""
    reg = EngineRegistry(autoload=False)
    assert reg.register_for_owner("legacy", LegacyContextEngine, CORE_OWNER).ok
    return reg


def slot(engine_id: str | None, **plugins: Any) -> OpenClawConfig:
    """A config selecting `engine_id` in plugins.slots.contextEngine, with extra `plugins` keys."""
    data: dict[str, Any] = {"plugins": {"slots": {"contextEngine": engine_id}, **plugins}}
    return OpenClawConfig.model_validate(data)


def user(text: str) -> UserMessage:
    return testing.user(text, timestamp=1)


# --- registration -------------------------------------------------------------------------------


async def test_mock_engine_registered_under_id_resolves_via_slot_and_keeps_info_id() -> None:
    reg = make_registry()
    factory = CountingFactory(lambda: FakeEngine("fake"))
    assert reg.register_for_owner("fake", factory, "plugin:fake") == RegisterResult(True)
    resolved = await reg.resolve(slot("fake"))
    assert resolved.engine_id == "fake" and resolved.source == "configured"
    assert resolved.engine.info.id == "fake" and resolved.active_id == "fake"
    assert resolved.owner == "plugin:fake"
    # The wrappers delegate to the very instance the factory built.
    await resolved.engine.ingest(IngestParams(session_id="s", message=user("hi")))
    assert factory.built[0].count("ingest") == 1


def test_same_owner_reregistration_with_refresh_replaces_factory() -> None:
    reg = make_registry()
    first, second = CountingFactory(FakeEngine), CountingFactory(FakeEngine)
    assert reg.register_for_owner("fake", first, "plugin:fake").ok
    refused = reg.register_for_owner("fake", second, "plugin:fake")
    assert refused == RegisterResult(False, "plugin:fake")
    entry = reg.get("fake")
    assert entry is not None and entry.factory is first
    assert reg.register_for_owner("fake", second, "plugin:fake", allow_same_owner_refresh=True).ok
    entry = reg.get("fake")
    assert entry is not None and entry.factory is second


def test_different_owner_is_rejected_and_original_kept() -> None:
    reg = make_registry()
    original = CountingFactory(FakeEngine)
    reg.register_for_owner("fake", original, "plugin:one")
    result = reg.register_for_owner("fake", CountingFactory(FakeEngine), "plugin:two", allow_same_owner_refresh=True)
    assert result == RegisterResult(False, "plugin:one")
    entry = reg.get("fake")
    assert entry is not None and entry.factory is original and entry.owner == "plugin:one"


def test_public_register_cannot_spoof_owner_nor_register_legacy() -> None:
    reg = make_registry()
    assert reg.register("legacy", FakeEngine) == RegisterResult(False, CORE_OWNER)
    assert reg.register_for_owner("legacy", FakeEngine, "plugin:evil") == RegisterResult(False, CORE_OWNER)
    assert reg.register("mine", FakeEngine).ok
    entry = reg.get("mine")
    assert entry is not None and entry.owner == PUBLIC_SDK_OWNER
    # An engine owned by a plugin cannot be taken over through the public SDK.
    reg.register_for_owner("theirs", FakeEngine, "plugin:theirs")
    assert reg.register("theirs", FakeEngine) == RegisterResult(False, "plugin:theirs")


def test_owner_must_be_non_empty() -> None:
    reg = make_registry()
    with pytest.raises(ValueError, match="owner must be a non-empty string"):
        reg.register_for_owner("fake", FakeEngine, "  ")
    with pytest.raises(ValueError, match="id must be a non-empty string"):
        reg.register_for_owner(" ", FakeEngine, "plugin:x")


async def test_owner_plugin_prefix_maps_to_plugin_id() -> None:
    reg = make_registry()
    reg.register_for_owner("fake", lambda: FakeEngine("fake"), "plugin:fake-pkg")
    resolved = await reg.resolve(slot("fake"))
    assert owner_plugin_id(resolved.engine) == "fake-pkg"
    assert owner_plugin_id(resolved) == "fake-pkg"
    assert owner_plugin_id("plugin:x") == "x"
    assert owner_plugin_id(CORE_OWNER) is None and owner_plugin_id(PUBLIC_SDK_OWNER) is None


def test_clear_context_engines_for_owner_removes_only_that_owner() -> None:
    reg = make_registry()
    reg.register_for_owner("a", FakeEngine, "plugin:p")
    reg.register_for_owner("b", FakeEngine, "plugin:p")
    reg.register_for_owner("c", FakeEngine, "plugin:q")
    reg.quarantine("a", "plugin:p", "assemble", "boom")
    reg.quarantine("c", "plugin:q", "assemble", "boom")
    assert sorted(reg.clear_for_owner("plugin:p")) == ["a", "b"]
    assert [e.engine_id for e in reg.list_engines()] == ["c", "legacy"]
    assert [q.engine_id for q in reg.list_quarantines()] == ["c"]


# --- factory ctx -------------------------------------------------------------------------------


async def test_factory_receives_config_agent_dir_and_workspace_dir(tmp_path: Path) -> None:
    reg = make_registry()
    factory = CountingFactory(FakeEngine)
    reg.register_for_owner("fake", factory, "plugin:fake")
    config = slot("fake", entries={"fake": {"enabled": True, "config": {"depth": 3}}})
    ctx = EngineContext(agent_dir=str(tmp_path / "agent"), workspace_dir=str(tmp_path / "ws"))
    await reg.resolve(config, ctx)
    got = factory.contexts[0]
    assert got.config == {"depth": 3}
    assert got.openclaw_config is config
    assert got.agent_dir == str(tmp_path / "agent") and got.workspace_dir == str(tmp_path / "ws")
    assert ctx.config is None, "the caller's ctx is not mutated"


async def test_no_arg_and_async_factories_work() -> None:
    reg = make_registry()

    def no_arg() -> FakeEngine:
        return FakeEngine("plain", info_id="plain-info")

    async def async_factory(ctx: EngineContext) -> FakeEngine:
        return FakeEngine("async-one")

    reg.register_for_owner("plain", no_arg, "plugin:plain")
    reg.register_for_owner("async-one", async_factory, "plugin:async-one")
    assert (await reg.resolve(slot("plain"))).engine.info.id == "plain-info"
    assert (await reg.resolve(slot("async-one"))).engine.info.id == "async-one"
    assert reg.list_quarantines() == []


async def test_resolve_with_no_config_leaves_ctx_fields_unset() -> None:
    reg = EngineRegistry(autoload=False)
    seen: list[EngineContext] = []

    def legacy_factory(ctx: EngineContext) -> LegacyContextEngine:
        seen.append(ctx)
        return LegacyContextEngine(ctx)

    reg.register_for_owner("legacy", legacy_factory, CORE_OWNER)
    resolved = await reg.resolve()
    assert resolved.engine_id == "legacy" and resolved.source == "default"
    assert (seen[0].config, seen[0].agent_dir, seen[0].workspace_dir, seen[0].store) == (None, None, None, None)
    # With a config, legacy sees it too (its compaction reads agents.defaults.compaction).
    config = slot("legacy", entries={"legacy": {"config": {"note": 1}}})
    await reg.resolve(config)
    assert seen[1].openclaw_config is config and seen[1].config == {"note": 1}


# --- slot selection ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "plugins"),
    [(None, {}), ("", {}), ("   ", {}), ("legacy", {}), (" legacy ", {}), ("none", {"enabled": False})],
)
async def test_slot_undefined_empty_or_legacy_selects_legacy_without_plugin_factory(
    value: str | None, plugins: dict[str, Any], caplog: pytest.LogCaptureFixture
) -> None:
    reg = make_registry()
    factory = CountingFactory(FakeEngine)
    reg.register_for_owner("fake", factory, "plugin:fake")
    resolved = await reg.resolve(slot(value, **plugins))
    assert resolved.engine.info.id == "legacy"
    assert factory.calls == 0
    assert reg.list_quarantines() == []
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING]


@pytest.mark.parametrize(
    "plugins",
    [
        {"entries": {"fake": {"enabled": False}}},
        {"deny": ["fake"]},
        {"enabled": False},
        {"allow": ["something-else"]},
    ],
    ids=["entry-disabled", "denied", "globally-disabled", "not-allowed"],
)
async def test_plugin_disabled_or_denied_uses_legacy_silently_and_reenable_restores_it(
    plugins: dict[str, Any], caplog: pytest.LogCaptureFixture
) -> None:
    reg = make_registry()
    factory = CountingFactory(FakeEngine)
    reg.register_for_owner("fake", factory, "plugin:fake")
    config = slot("fake", **plugins)
    resolved = await reg.resolve(config)
    assert resolved.engine.info.id == "legacy" and resolved.fallback_reason == "plugin disabled"
    assert config.plugins.slots.context_engine == "fake", "the slot value is kept"
    assert factory.calls == 0 and reg.list_quarantines() == []
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING]
    enabled = await reg.resolve(slot("fake"))
    assert enabled.engine.info.id == "fake" and factory.calls == 1


async def test_engine_owned_by_a_disabled_plugin_of_another_name_uses_legacy() -> None:
    reg = make_registry()
    factory = CountingFactory(FakeEngine)
    reg.register_for_owner("fake-engine", factory, "plugin:fake-pkg")
    resolved = await reg.resolve(slot("fake-engine", entries={"fake-pkg": {"enabled": False}}))
    assert resolved.engine.info.id == "legacy" and factory.calls == 0


async def test_read_only_discovery_registration_falls_back_with_one_warning(caplog: pytest.LogCaptureFixture) -> None:
    reg = make_registry()
    discovery = CountingFactory(FakeEngine)
    assert reg.register_for_owner("fake", discovery, "plugin:fake", lifecycle="readOnlyDiscovery").ok
    resolved = await reg.resolve(slot("fake"))
    assert resolved.engine.info.id == "legacy" and resolved.fallback_reason == "read-only discovery"
    warnings = [r for r in caplog.records if r.name == REGISTRY_LOGGER and r.levelno == logging.WARNING]
    assert len(warnings) == 1 and "read-only discovery" in warnings[0].getMessage()
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR]
    assert discovery.calls == 0 and reg.list_quarantines() == []

    runtime = CountingFactory(FakeEngine)
    assert reg.register_for_owner("fake", runtime, "plugin:fake").ok
    assert (await reg.resolve(slot("fake"))).engine.info.id == "fake" and runtime.calls == 1
    # A later discovery pass must not replace the runtime entry.
    assert reg.register_for_owner("fake", discovery, "plugin:fake", lifecycle="readOnlyDiscovery").ok
    entry = reg.get("fake")
    assert entry is not None and entry.factory is runtime and entry.lifecycle == "runtime"


# --- entry points and the process-wide registry ------------------------------------------------


def test_ensure_loaded_is_idempotent_and_registers_legacy_as_core() -> None:
    reg = EngineRegistry(autoload=False)
    reg.ensure_loaded(allow={"legacy"})
    reg.ensure_loaded(allow={"legacy"})
    entry = reg.get("legacy")
    assert entry is not None and entry.owner == CORE_OWNER and entry.factory is LegacyContextEngine
    assert [e.engine_id for e in reg.list_engines()] == ["legacy"]


def _write_plugin(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, module: str, body: str) -> None:
    (tmp_path / f"{module}.py").write_text(textwrap.dedent(body), encoding="utf-8")
    monkeypatch.syspath_prepend(str(tmp_path))


def _ep(name: str, value: str) -> EntryPoint:
    return EntryPoint(name=name, value=value, group=registry_module.ENTRY_POINT_GROUP)


async def test_plugin_entry_points_register_as_plugin_owner_and_broken_ones_are_skipped(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    _write_plugin(
        tmp_path,
        monkeypatch,
        "occtx_good_plugin",
        """
        from engines.legacy import LegacyContextEngine
        from openclaw_ctx.contract import EngineInfo

        class Good(LegacyContextEngine):
            @property
            def info(self):
                return EngineInfo(id="good", name="Good")

        def register(api):
            api.register_context_engine("good", Good)
            api.register_context_engine("legacy", Good)  # refused: legacy belongs to core
        """,
    )
    _write_plugin(tmp_path, monkeypatch, "occtx_bad_plugin", "raise RuntimeError('boom at import')\n")
    reg = EngineRegistry(autoload=False)
    reg.ensure_loaded(allow={"legacy"})
    eps = [_ep("bad", "occtx_bad_plugin:register"), _ep("good", "occtx_good_plugin:register")]
    reg.load_entry_points(eps)
    reg.load_entry_points(eps)  # idempotent: nothing is imported or registered twice
    good = reg.get("good")
    legacy = reg.get("legacy")
    assert good is not None and good.owner == "plugin:good"
    assert legacy is not None and legacy.owner == CORE_OWNER
    assert reg.load_errors == {"bad": "RuntimeError: boom at import"}
    assert sum("failed to load" in r.getMessage() for r in caplog.records) == 1
    # Legacy still resolves, and selecting the broken plugin falls back with its load error as the reason.
    assert (await reg.resolve(slot(None))).engine.info.id == "legacy"
    broken = await reg.resolve(slot("bad"))
    assert broken.engine.info.id == "legacy"
    (record,) = reg.list_quarantines()
    assert (record.engine_id, record.owner, record.operation) == ("bad", "plugin:bad", "resolve")
    assert "boom at import" in record.reason


def test_env_var_restricts_which_entry_points_load(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    _write_plugin(
        tmp_path,
        monkeypatch,
        "occtx_env_plugin",
        """
        def register(api):
            api.register_context_engine(api.owner.split(":", 1)[1], lambda: None)
        """,
    )
    monkeypatch.setenv("OPENCLAW_CTX_ENGINES", "one, legacy")
    eps = [_ep("one", "occtx_env_plugin:register"), _ep("two", "occtx_env_plugin:register")]
    reg = EngineRegistry(autoload=False)
    reg.load_entry_points(eps, allow=env_allow())
    assert reg.get("one") is not None and reg.get("two") is None
    # ensure_loaded reads the same variable: the real lossless-claw entry point is not attempted.
    monkeypatch.setenv("OPENCLAW_CTX_ENGINES", "legacy")
    real = EngineRegistry(autoload=False)
    real.ensure_loaded()
    assert [e.engine_id for e in real.list_engines()] == ["legacy"] and real.load_errors == {}


def test_registry_is_process_global_even_across_module_copies() -> None:
    spec = importlib.util.spec_from_file_location("openclaw_ctx_registry_copy", registry_module.__file__)
    assert spec is not None and spec.loader is not None
    copy = importlib.util.module_from_spec(spec)
    sys.modules["openclaw_ctx_registry_copy"] = copy
    try:
        spec.loader.exec_module(copy)
        assert copy is not registry_module
        assert copy.get_registry() is get_registry()
    finally:
        del sys.modules["openclaw_ctx_registry_copy"]


async def test_module_level_resolve_uses_the_process_registry(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENCLAW_CTX_ENGINES", "legacy")
    resolved = await resolve_context_engine(None)
    assert resolved.engine.info.id == "legacy" and resolved.owner == CORE_OWNER
    entry = get_registry().get("legacy")
    assert entry is not None and entry.owner == CORE_OWNER


# --- the quarantine health file ------------------------------------------------------------------

_CHILD = """
import sys
from pathlib import Path
from openclaw_ctx.registry import EngineRegistry

path = Path(sys.argv[1])
reg = EngineRegistry(autoload=False, health_path=lambda: path)
reg.quarantine("lossless-claw", "plugin:lossless-claw", "assemble", "boom in child")
print("ready", flush=True)
sys.stdin.read()
"""


def test_quarantines_of_other_live_processes_are_listed_from_the_health_file(tmp_path: Path) -> None:
    path = tmp_path / "health.json"
    reg = EngineRegistry(autoload=False, health_path=lambda: path)
    with subprocess.Popen(
        [sys.executable, "-c", _CHILD, str(path)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    ) as child:
        assert child.stdin is not None and child.stdout is not None
        assert child.stdout.readline().strip() == "ready"
        assert reg.list_quarantines() == []
        (other,) = reg.list_quarantines(other_processes=True)
        assert (other.engine_id, other.owner, other.operation, other.reason, other.pid) == (
            "lossless-claw",
            "plugin:lossless-claw",
            "assemble",
            "boom in child",
            child.pid,
        )
        child.stdin.close()
        child.wait()
    # The child is gone: its records no longer count.
    assert reg.list_quarantines(other_processes=True) == []


def test_own_quarantines_are_mirrored_and_lifted_in_the_health_file(tmp_path: Path) -> None:
    path = tmp_path / "state" / "health.json"
    reg = EngineRegistry(autoload=False, health_path=lambda: path)
    reg.quarantine("fake", "plugin:fake", "factory", "boom")
    assert [(r.engine_id, r.pid) for r in read_health(path)] == [("fake", os.getpid())]
    reg.register_for_owner("fake", FakeEngine, "plugin:fake")
    assert read_health(path) == [] and reg.list_quarantines() == []
    path.write_text("{not json", encoding="utf-8")
    assert reg.list_quarantines(other_processes=True) == [], "an unreadable file is ignored"
    reg.quarantine("other", None, "resolve", "not registered")
    assert [r.engine_id for r in read_health(path)] == ["other"], "and rewritten on the next change"
