"""Legacy-param compat: strict engines that reject host-added keys get the call retried without them.

Mirrors OpenClaw's "Legacy-param compat (strict validators)" checklist. `StrictEngine` is a test double
of a third-party plugin written against an older contract.
"""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import BaseModel, ConfigDict
from test_registry import FakeEngine, make_registry, slot, user

from openclaw_ctx.contract import (
    AfterTurnParams,
    AssembleParams,
    BootstrapParams,
    CompactParams,
    IngestParams,
)
from openclaw_ctx.contract.settings import build_runtime_settings
from openclaw_ctx.registry.wrappers import CompatEngine, rejected_host_keys, wrap_compat


def _camel(name: str) -> str:
    head, *rest = name.split("_")
    return head + "".join(p.title() for p in rest)


class StrictEngine(FakeEngine):
    """Rejects, zod-style, the first key of `rejects` (camelCase) that a call carries."""

    def __init__(self, rejects: list[str], engine_id: str = "strict") -> None:
        super().__init__(engine_id)
        self.rejects = rejects

    def _enter(self, method: str, params: Any) -> None:
        super()._enter(method, params)
        for key in self.rejects:
            if key in {_camel(f) for f in params.model_fields_set}:
                raise ValueError(f"Unrecognized key(s) in object: '{key}'")


def keys_seen(engine: FakeEngine, method: str) -> list[set[str]]:
    return [{_camel(f) for f in p.model_fields_set} for m, p in engine.calls if m == method]


SETTINGS = build_runtime_settings(selected_engine_id="strict")


async def test_engine_rejecting_session_key_is_retried_without_it_and_memoized_for_ingest() -> None:
    inner = StrictEngine(["sessionKey"])
    engine = wrap_compat(inner)
    for entry in ("e1", "e2"):
        result = await engine.ingest(IngestParams(session_id="s", session_key="k", message=user(entry), entry_id=entry))
        assert result.ingested is True
    assert inner.count("ingest") == 3
    assert inner.seen_entries == ["e1", "e2"], "each message ingested exactly once"
    # Each message got through exactly once, and the second went without sessionKey up front.
    assert [("sessionKey" in k) for k in keys_seen(inner, "ingest")] == [True, False, False]
    assert engine.rejected_keys == {"session_key"}


@pytest.mark.parametrize("method", ["maintain", "compact"])
async def test_engine_rejecting_session_key_is_retried_and_memoized_for_maintain_and_compact(method: str) -> None:
    inner = StrictEngine(["sessionKey"])
    engine = wrap_compat(inner)
    make = BootstrapParams if method == "maintain" else CompactParams
    for _ in range(2):
        await getattr(engine, method)(make(session_id="s", session_key="k"))
    assert inner.count(method) == 3
    assert [("sessionKey" in k) for k in keys_seen(inner, method)] == [True, False, False]


async def test_assemble_rejecting_session_key_prompt_and_runtime_settings_peels_one_key_per_retry() -> None:
    inner = StrictEngine(["sessionKey", "prompt", "runtimeSettings"])
    engine = wrap_compat(inner)
    params = AssembleParams(
        session_id="s", session_key="k", messages=[user("a")], prompt="hi", runtime_settings=SETTINGS, token_budget=9
    )
    result = await engine.assemble(params)
    assert [m.content for m in result.messages] == ["a"]
    seen = keys_seen(inner, "assemble")
    assert len(seen) == 4
    assert [sorted(k & {"sessionKey", "prompt", "runtimeSettings"}) for k in seen] == [
        ["prompt", "runtimeSettings", "sessionKey"],
        ["prompt", "runtimeSettings"],
        ["runtimeSettings"],
        [],
    ]
    assert all("tokenBudget" in k for k in seen), "keys the engine accepts are never dropped"


def _session_hook_params(method: str) -> Any:
    common: dict[str, Any] = {
        "session_id": "s",
        "session_key": "k",
        "runtime_settings": SETTINGS,
        "runtime_context": {"cwd": "/w"},
    }
    if method == "after_turn":
        return AfterTurnParams(messages=[user("a")], pre_prompt_message_count=0, **common)
    if method == "compact":
        return CompactParams(**common)
    return BootstrapParams(**common)


@pytest.mark.parametrize("method", ["bootstrap", "maintain", "after_turn", "compact"])
async def test_session_hooks_rejecting_runtime_settings_and_context_retry_and_keep_session_key(method: str) -> None:
    # Our params have no sessionTarget yet, so two keys are peeled (OpenClaw peels three in four calls).
    inner = StrictEngine(["runtimeSettings", "runtimeContext"])
    engine = wrap_compat(inner)
    await getattr(engine, method)(_session_hook_params(method))
    seen = keys_seen(inner, method)
    assert len(seen) == 3
    assert seen[-1] & {"sessionKey", "runtimeSettings", "runtimeContext"} == {"sessionKey"}


async def test_assemble_never_drops_keys_outside_its_own_host_set() -> None:
    # runtimeContext was learned from bootstrap, but it is not an assemble host key: nothing to drop.
    inner = StrictEngine(["runtimeContext"])
    engine = wrap_compat(inner)
    await engine.bootstrap(_session_hook_params("bootstrap"))
    await engine.assemble(AssembleParams(session_id="s", session_key="k", messages=[user("a")], token_budget=5))
    (assemble_keys,) = keys_seen(inner, "assemble")
    assert {"sessionKey", "tokenBudget"} <= assemble_keys


async def test_rejections_learned_in_one_method_carry_to_others_on_the_same_instance() -> None:
    inner = StrictEngine(["sessionKey"])
    engine = wrap_compat(inner)
    await engine.ingest(IngestParams(session_id="s", session_key="k", message=user("a")))
    await engine.assemble(AssembleParams(session_id="s", session_key="k", messages=[user("a")]))
    await engine.compact(CompactParams(session_id="s", session_key="k"))
    assert inner.count("ingest") == 2
    assert inner.count("assemble") == 1 and inner.count("compact") == 1
    # A fresh wrapper around another instance learns on its own.
    other = StrictEngine(["sessionKey"])
    await wrap_compat(other).assemble(AssembleParams(session_id="s", session_key="k", messages=[user("a")]))
    assert other.count("assemble") == 2


async def test_non_schema_error_mentioning_session_key_quarantines_instead_of_retrying() -> None:
    class Picky(FakeEngine):
        def _enter(self, method: str, params: Any) -> None:
            super()._enter(method, params)
            raise LookupError(f'Unknown sessionKey "{params.session_key}"')

    reg = make_registry()
    built: list[Picky] = []
    reg.register_for_owner("picky", lambda: built.append(Picky("picky")) or built[-1], "plugin:picky")
    engine = (await reg.resolve(slot("picky"))).engine
    result = await engine.ingest(IngestParams(session_id="s", session_key="x", message=user("a")))
    assert result.ingested is False, "legacy answered the call"
    assert built[0].count("ingest") == 1
    assert [(q.operation, q.reason) for q in reg.list_quarantines()] == [("ingest", 'Unknown sessionKey "x"')]


async def test_a_retried_rejection_never_quarantines_the_engine() -> None:
    reg = make_registry()
    built: list[StrictEngine] = []
    reg.register_for_owner("strict", lambda: built.append(StrictEngine(["sessionKey"])) or built[-1], "plugin:strict")
    engine = (await reg.resolve(slot("strict"))).engine
    assert (await engine.ingest(IngestParams(session_id="s", session_key="k", message=user("a")))).ingested
    assert reg.list_quarantines() == [] and engine.info.id == "strict"


async def test_prompt_is_forwarded_only_when_provided() -> None:
    inner = FakeEngine()
    engine = wrap_compat(inner)
    await engine.assemble(AssembleParams(session_id="s", messages=[user("a")], prompt=None, session_key=None))
    await engine.assemble(AssembleParams(session_id="s", messages=[user("a")], prompt="what now?"))
    first, second = keys_seen(inner, "assemble")
    assert "prompt" not in first and "sessionKey" not in first
    assert "prompt" in second
    assert inner.calls[-1][1].prompt == "what now?"


# --- recognising rejections in other shapes ----------------------------------------------------


class _OldIngestParams(BaseModel):
    """An older engine's own strict params model (no sessionKey)."""

    model_config = ConfigDict(extra="forbid")
    sessionId: str  # noqa: N815 - the wire name, as the old engine declared it
    message: Any
    isHeartbeat: bool = False  # noqa: N815


async def test_pydantic_extra_forbidden_rejection_is_recognised() -> None:
    class PydanticStrict(FakeEngine):
        def _enter(self, method: str, params: Any) -> None:
            super()._enter(method, params)
            _OldIngestParams.model_validate(params.model_dump(by_alias=True, exclude_unset=True))

    inner = PydanticStrict()
    result = await wrap_compat(inner).ingest(IngestParams(session_id="s", session_key="k", message=user("a")))
    assert result.ingested and inner.count("ingest") == 2


async def test_unexpected_keyword_argument_rejection_is_recognised() -> None:
    def old_compact(session_id: str, force: bool = False) -> None:
        return None

    class KwargsStrict(FakeEngine):
        def _enter(self, method: str, params: Any) -> None:
            super()._enter(method, params)
            old_compact(**params.model_dump(exclude_unset=True))

    inner = KwargsStrict()
    await wrap_compat(inner).compact(CompactParams(session_id="s", session_key="k", runtime_settings=SETTINGS))
    # TypeError names one argument at a time: two retries.
    assert inner.count("compact") == 3


def test_rejection_is_found_through_causes_issue_lists_and_groups() -> None:
    class ZodError(Exception):
        def __init__(self) -> None:
            super().__init__("validation failed")
            self.issues = [{"code": "unrecognized_keys", "keys": ["runtimeSettings"], "path": []}]

    try:
        try:
            raise ZodError()
        except ZodError as inner:
            raise RuntimeError("hook failed") from inner
    except RuntimeError as outer:
        chained = outer
    assert rejected_host_keys(chained, {"runtime_settings", "session_key"}) == {"runtime_settings"}
    group = ExceptionGroup("many", [ValueError("additional properties not allowed: 'prompt'")])
    assert rejected_host_keys(group, {"prompt"}) == {"prompt"}
    assert rejected_host_keys(ValueError("'sessionKey' is not allowed"), {"session_key"}) == {"session_key"}
    assert rejected_host_keys(ValueError("Unknown sessionKey 'abc'"), {"session_key"}) == set()
    # A rejected key the call did not carry is not a reason to retry.
    assert rejected_host_keys(ValueError("Unrecognized key(s) in object: 'prompt'"), {"session_key"}) == set()


async def test_rejection_of_a_key_no_longer_carried_is_reraised_not_looped() -> None:
    inner = FakeEngine()
    inner.fail["ingest"] = ValueError("Unrecognized key(s) in object: 'sessionKey'")
    with pytest.raises(ValueError, match="Unrecognized key"):
        await wrap_compat(inner).ingest(IngestParams(session_id="s", session_key="k", message=user("a")))
    assert inner.count("ingest") == 2, "one retry without sessionKey, then the error is the engine's own"


def test_compat_wrapper_is_idempotent() -> None:
    inner = FakeEngine()
    once = wrap_compat(inner)
    assert isinstance(once, CompatEngine) and wrap_compat(once) is once and once.inner is inner
