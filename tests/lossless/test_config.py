"""lossless-claw config: defaults, camelCase keys, LCM_* env overrides, clear errors, session globs."""

from __future__ import annotations

import pytest

from engines.lossless import register
from engines.lossless.config import LosslessConfig, glob_match, resolve_config
from engines.lossless.engine import create_engine
from openclaw_ctx.contract import EngineContext
from openclaw_ctx.errors import ConfigError, EngineError
from openclaw_ctx.store.store import Store


def test_defaults_match_the_reference() -> None:
    c = resolve_config(None, env={})
    assert c.context_threshold == 0.75
    assert c.fresh_tail_count == 64
    assert c.fresh_tail_max_tokens is None
    assert (c.leaf_chunk_tokens, c.leaf_min_fanout, c.condensed_min_fanout, c.condensed_min_fanout_hard) == (
        20000,
        8,
        4,
        2,
    )
    assert (c.leaf_target_tokens, c.condensed_target_tokens) == (2400, 2000)
    assert (c.sweep_max_depth, c.max_sweep_iterations, c.sweep_deadline_ms) == (1, 12, 120000)
    assert c.compact_until_under_deadline_ms == 300000
    assert (c.summary_max_overage_factor, c.fallback_max_tokens, c.max_expand_tokens) == (3, 512, 4000)
    assert c.large_file_token_threshold == 25000
    assert c.proactive_threshold_compaction_mode == "deferred"
    assert c.skip_stateless_sessions is True
    assert c.ignore_session_patterns == [] and c.stateless_session_patterns == []
    assert c.custom_instructions == "" and c.summary_model == "" and c.summary_provider == ""


def test_camel_case_keys_and_old_alias() -> None:
    c = resolve_config({"freshTailCount": 8, "incrementalMaxDepth": -1, "contextThreshold": 1}, env={})
    assert c.fresh_tail_count == 8 and c.sweep_max_depth == -1 and c.context_threshold == 1.0
    assert c.model_dump(by_alias=True)["freshTailCount"] == 8


def test_env_overrides_win_over_config() -> None:
    env = {
        "LCM_FRESH_TAIL_COUNT": "12",
        "LCM_CONTEXT_THRESHOLD": "0.5",
        "LCM_IGNORE_SESSION_PATTERNS": "agent:*:cron:**, test:*",
        "LCM_SKIP_STATELESS_SESSIONS": "false",
        "LCM_PROACTIVE_THRESHOLD_COMPACTION_MODE": "inline",
        "LCM_FRESH_TAIL_MAX_TOKENS": "none",
        "LCM_INCREMENTAL_MAX_DEPTH": "2",
    }
    c = resolve_config({"freshTailCount": 3, "freshTailMaxTokens": 100}, env=env)
    assert c.fresh_tail_count == 12
    assert c.context_threshold == 0.5
    assert c.ignore_session_patterns == ["agent:*:cron:**", "test:*"]
    assert c.skip_stateless_sessions is False
    assert c.proactive_threshold_compaction_mode == "inline"
    assert c.fresh_tail_max_tokens is None
    assert c.sweep_max_depth == 2


def test_unknown_key_is_named() -> None:
    with pytest.raises(ConfigError, match="unknown key 'freshTailCuont'"):
        resolve_config({"freshTailCuont": 3}, env={})


@pytest.mark.parametrize(
    ("raw", "key"),
    [
        ({"freshTailCount": "64"}, "freshTailCount"),
        ({"contextThreshold": 1.5}, "contextThreshold"),
        ({"ignoreSessionPatterns": "a:*"}, "ignoreSessionPatterns"),
        ({"proactiveThresholdCompactionMode": "later"}, "proactiveThresholdCompactionMode"),
        ({"skipStatelessSessions": "yes"}, "skipStatelessSessions"),
    ],
)
def test_ill_typed_value_is_named(raw: dict[str, object], key: str) -> None:
    with pytest.raises(ConfigError, match=key):
        resolve_config(raw, env={})


def test_bad_env_value_is_named() -> None:
    with pytest.raises(ConfigError, match="LCM_FRESH_TAIL_COUNT"):
        resolve_config({}, env={"LCM_FRESH_TAIL_COUNT": "many"})
    with pytest.raises(ConfigError, match="freshTailCount"):
        resolve_config({}, env={"LCM_FRESH_TAIL_COUNT": "0"})


def test_reference_only_keys_are_accepted() -> None:
    copied = {
        "databasePath": "/x/lcm.db",
        "contextThresholdOverrides": [{"model": "gpt-*", "contextThreshold": 0.6}],
        "bootstrapMaxTokens": 6000,
        "promptAwareEviction": False,
        "circuitBreakerThreshold": 5,
        "summaryMaxCallsPerWindow": 24,
        "autoRotateSessionFiles": {"enabled": True},
        "replayFloodThresholdExternal": 3,
    }
    assert resolve_config(copied, env={}) == resolve_config(None, env={})


def test_summary_timeout_prefix_target_and_assembly_cap_are_settings() -> None:
    c = resolve_config(
        {"summaryTimeoutMs": 1500, "summaryPrefixTargetTokens": 900, "maxAssemblyTokenBudget": 50_000}, env={}
    )
    assert c.summary_timeout_ms == 1500 and c.summary_prefix_target(128_000) == 900
    assert c.budget(200_000) == 50_000 and c.budget(None) == 50_000 and c.budget(8_000) == 8_000
    assert resolve_config(None, env={}).budget(None) == 128_000
    with pytest.raises(ConfigError, match="fallbackMaxTokens"):
        resolve_config({"fallbackMaxTokens": 32}, env={})


def test_not_an_object_is_refused() -> None:
    with pytest.raises(ConfigError, match="expected an object"):
        resolve_config(["freshTailCount"], env={})  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("pattern", "key", "hit"),
    [
        ("agent:*:cron", "agent:main:cron", True),
        ("agent:*:cron", "agent:main:sub:cron", False),
        ("agent:**:cron", "agent:main:sub:cron", True),
        ("agent:main:*", "agent:main:telegram:42", False),
        ("agent:main:**", "agent:main:telegram:42", True),
        ("agent:?:x", "agent:a:x", True),
        ("agent.main", "agentXmain", False),
    ],
)
def test_glob(pattern: str, key: str, hit: bool) -> None:
    assert glob_match(pattern, key) is hit


def test_ignored_and_stateless_policies() -> None:
    c = LosslessConfig(ignore_session_patterns=["agent:*:cron:**"], stateless_session_patterns=["agent:*:sub:**"])
    assert c.is_ignored("agent:main:cron:nightly") and not c.is_ignored("agent:main:chat")
    assert c.is_stateless("agent:main:sub:1")
    assert not c.model_copy(update={"skip_stateless_sessions": False}).is_stateless("agent:main:sub:1")


async def test_factory_reports_config_errors_and_info(store: Store) -> None:
    with pytest.raises(ConfigError, match="leafChunkTokens"):
        create_engine(EngineContext(config={"leafChunkTokens": -1}, store=store))
    with pytest.raises(EngineError, match="Store"):
        create_engine(EngineContext(config={}))
    engine = create_engine(EngineContext(config={}, store=store))
    info = engine.info
    assert info.id == "lossless-claw" and info.name == "Lossless Context Management"
    assert info.owns_compaction is True
    assert info.host_requirements is not None
    req = info.host_requirements["agent-run"]
    assert req.required_capabilities == ["assemble-before-prompt"] and req.unsupported_message


def test_register_uses_the_engine_id() -> None:
    seen: list[tuple[str, object]] = []

    class Api:
        def register_context_engine(self, engine_id: str, factory: object) -> None:
            seen.append((engine_id, factory))

    register(Api())
    assert seen == [("lossless-claw", create_engine)]
