"""Configuration of the lossless-claw engine: the reference's camelCase keys, defaults, `LCM_*` env overrides.

The plugin config lives under ``plugins.entries["lossless-claw"].config``. Environment variables named
``LCM_<UPPER_SNAKE_OF_KEY>`` override it (the reference's precedence). Unknown keys and values of the
wrong type raise :class:`~openclaw_ctx.errors.ConfigError` naming the key, at factory time, so the
registry quarantines the engine with a clear reason instead of failing later in a turn.
"""

from __future__ import annotations

import json
import logging
import os
import re
from collections.abc import Mapping
from functools import lru_cache
from typing import Any, Literal, get_args, get_origin

from pydantic import BaseModel, ConfigDict, Field, ValidationError
from pydantic.alias_generators import to_camel

from openclaw_ctx.errors import ConfigError

__all__ = ["DEFAULT_TOKEN_BUDGET", "LosslessConfig", "glob_match", "resolve_config"]

log = logging.getLogger(__name__)

# Reference keys this port accepts for compatibility but does not act on (configs copied from a
# lossless-claw install keep loading; each is logged once at resolve time).
_ACCEPTED_UNUSED = frozenset(
    {
        "enabled",
        "databasePath",
        "dbPath",
        "largeFilesDir",
        "enableSummaryThinking",
        "expansionModel",
        "expansionProvider",
        "largeFileSummaryModel",
        "largeFileSummaryProvider",
        "fallbackProviders",
        "cacheAwareCompaction",
        "dynamicLeafChunkTokens",
        "timezone",
        "independentLogFile",
        # Reference behaviour this port does differently or leaves to the host / provider layer.
        "contextThresholdOverrides",
        "bootstrapMaxTokens",
        "newSessionRetainDepth",
        "promptAwareEviction",
        "stubLargeToolPayloads",
        "circuitBreakerThreshold",
        "circuitBreakerCooldownMs",
        "summaryCallWindowMs",
        "summaryMaxCallsPerWindow",
        "summarySpendBackoffMs",
        "summaryBaseUrl",
        "pruneHeartbeatOk",
        "transcriptGcEnabled",
        "autoRotateSessionFiles",
        "hostFallbackMode",
        "stripInjectedContextTags",
        "replayFloodThresholdExternal",
        "replayFloodThresholdInternal",
    }
)
# The token budget when the host sends none (the reference's fallback).
DEFAULT_TOKEN_BUDGET = 128_000
# Old names of current keys.
_ALIASES = {"incrementalMaxDepth": "sweepMaxDepth", "largeFileThresholdTokens": "largeFileTokenThreshold"}


class LosslessConfig(BaseModel):
    """Every setting the engine uses; field names are snake_case, JSON keys camelCase."""

    model_config = ConfigDict(
        alias_generator=to_camel,
        populate_by_name=True,
        extra="forbid",
        strict=True,
        frozen=True,
    )

    context_threshold: float = Field(0.75, gt=0, le=1)
    """Compact when max(stored, observed) tokens exceed this fraction of the token budget."""
    fresh_tail_count: int = Field(64, ge=1)
    """Raw messages at the end of the context that are never compacted or evicted."""
    fresh_tail_max_tokens: int | None = Field(None, ge=1)
    """Optional token cap on the fresh tail walk (it still reaches back to the newest user message)."""
    leaf_chunk_tokens: int = Field(20000, ge=1)
    leaf_min_fanout: int = Field(8, ge=2)
    condensed_min_fanout: int = Field(4, ge=2)
    condensed_min_fanout_hard: int = Field(2, ge=2)
    leaf_target_tokens: int = Field(2400, ge=1)
    condensed_target_tokens: int = Field(2000, ge=1)
    sweep_max_depth: int = Field(1, ge=-1)
    """Deepest node a normal sweep creates: 0 = leaf only, -1 = unlimited."""
    max_sweep_iterations: int = Field(12, ge=1)
    sweep_deadline_ms: int = Field(120000, ge=1)
    compact_until_under_deadline_ms: int = Field(300000, ge=1)
    summary_max_overage_factor: float = Field(3, gt=1)
    summary_timeout_ms: int = Field(60000, ge=1)
    """Bound on one summarizer call; a call that takes longer escalates like a failed one."""
    summary_prefix_target_tokens: int | None = Field(None, ge=1)
    """Summary tokens outside the tail a normal sweep condenses down to (derived when unset)."""
    max_assembly_token_budget: int | None = Field(None, ge=1)
    """Cap on the host's token budget for assembly and compaction."""
    fallback_max_tokens: int = Field(512, ge=64)
    max_expand_tokens: int = Field(4000, ge=1)
    delegation_timeout_ms: int = Field(120000, ge=1000)
    """How long lcm_expand_query waits for its recall sub-agent (a call's `timeoutMs` overrides it)."""
    large_file_token_threshold: int = Field(25000, ge=1)
    ignore_session_patterns: list[str] = Field(default_factory=list)
    stateless_session_patterns: list[str] = Field(default_factory=list)
    skip_stateless_sessions: bool = True
    proactive_threshold_compaction_mode: Literal["deferred", "inline"] = "deferred"
    custom_instructions: str = ""
    summary_model: str = ""
    summary_provider: str = ""

    def threshold_tokens(self, budget: int) -> int:
        """floor(contextThreshold × budget)."""
        return int(self.context_threshold * budget)

    def budget(self, token_budget: int | None) -> int:
        """The host's token budget (128k when it sent none), capped by `maxAssemblyTokenBudget`."""
        budget = token_budget or DEFAULT_TOKEN_BUDGET
        return min(budget, self.max_assembly_token_budget) if self.max_assembly_token_budget else budget

    def summary_prefix_target(self, budget: int) -> int:
        """Summary tokens outside the tail a normal sweep condenses down to."""
        if self.summary_prefix_target_tokens is not None:
            return self.summary_prefix_target_tokens
        return max(self.condensed_target_tokens, min(self.leaf_chunk_tokens, self.threshold_tokens(budget) // 2))

    def tail_max_tokens(self, budget: int) -> int:
        """Token cap of the fresh-tail walk: `freshTailMaxTokens`, else a quarter of the threshold.

        The reference leaves the walk uncapped, so with small windows 64 tool-heavy messages alone
        overflow the budget and no compaction can help. The implicit cap keeps room for summaries,
        and with the summary prefix target (at most half the threshold) a sweep ends near 3/4 of the
        threshold, so the next few turns fit before another one rewrites the prompt prefix
        (replaying the example at 64k: 14 compactions in 76 turns, against 18 with a third and more
        with a half). The tail still always reaches back to the newest user message.
        """
        if self.fresh_tail_max_tokens is not None:
            return self.fresh_tail_max_tokens
        return max(1, self.threshold_tokens(budget) // 4)

    def is_ignored(self, session_key: str) -> bool:
        """True when nothing may be stored for this session key."""
        return any(glob_match(p, session_key) for p in self.ignore_session_patterns)

    def is_stateless(self, session_key: str) -> bool:
        """True when this session key may read lossless state but never write it."""
        return self.skip_stateless_sessions and any(glob_match(p, session_key) for p in self.stateless_session_patterns)


@lru_cache(maxsize=256)
def _glob_regex(pattern: str) -> re.Pattern[str]:
    out: list[str] = []
    i = 0
    while i < len(pattern):
        if pattern.startswith("**", i):
            out.append(".*")
            i += 2
        elif pattern[i] == "*":
            out.append("[^:]*")
            i += 1
        elif pattern[i] == "?":
            out.append("[^:]")
            i += 1
        else:
            out.append(re.escape(pattern[i]))
            i += 1
    return re.compile("".join(out), re.DOTALL)


def glob_match(pattern: str, session_key: str) -> bool:
    """Match a whole session key: ``*`` stops at ``:``, ``**`` crosses it, ``?`` is one non-``:`` char."""
    return _glob_regex(pattern).fullmatch(session_key) is not None


def _field_by_key() -> dict[str, str]:
    return {info.alias or name: name for name, info in LosslessConfig.model_fields.items()}


def _env_name(key: str) -> str:
    return "LCM_" + re.sub(r"(?<!^)(?=[A-Z])", "_", key).upper()


def _parse_env(key: str, raw: str) -> Any:
    annotation = LosslessConfig.model_fields[_field_by_key()[key]].annotation
    args = get_args(annotation)
    optional = type(None) in args
    base = next((a for a in args if a is not type(None)), annotation) if optional else annotation
    value = raw.strip()
    if optional and value.lower() in {"", "none", "null"}:
        return None
    if get_origin(base) is list:
        if value.startswith("["):
            return json.loads(value)
        return [part.strip() for part in value.split(",") if part.strip()]
    if base is bool:
        lowered = value.lower()
        if lowered in {"1", "true", "yes", "on"}:
            return True
        if lowered in {"0", "false", "no", "off"}:
            return False
        raise ValueError(f"expected a boolean, got {raw!r}")
    if base is int:
        return int(value)
    if base is float:
        return float(value)
    return raw


def _env_overrides(env: Mapping[str, str]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    keys = list(_field_by_key()) + list(_ALIASES)
    for key in keys:
        name = _env_name(key)
        if name not in env:
            continue
        target = _ALIASES.get(key, key)
        try:
            out[target] = _parse_env(target, env[name])
        except (ValueError, json.JSONDecodeError) as exc:
            raise ConfigError(f"lossless-claw: environment variable {name}: {exc}") from exc
    return out


def _describe(error: ValidationError, source: str) -> str:
    parts = []
    for item in error.errors()[:5]:
        key = ".".join(str(p) for p in item["loc"]) or "(config)"
        got = item.get("input")
        shown = f" (got {got!r})" if not isinstance(got, dict) else ""
        parts.append(f"{key}: {item['msg']}{shown}")
    return f"lossless-claw config ({source}): " + "; ".join(parts)


def resolve_config(raw: Mapping[str, Any] | None, env: Mapping[str, str] | None = None) -> LosslessConfig:
    """Build the engine config from the plugin config mapping, then apply ``LCM_*`` env overrides.

    Args:
        raw: ``plugins.entries["lossless-claw"].config`` (None or empty for all defaults).
        env: the environment (default ``os.environ``).

    Raises:
        ConfigError: an unknown key, a value of the wrong type, or a bad env override, naming the key.
    """
    if raw is not None and not isinstance(raw, Mapping):
        raise ConfigError(f"lossless-claw config: expected an object, got {type(raw).__name__}")
    known = _field_by_key()
    data: dict[str, Any] = {}
    for key, value in (raw or {}).items():
        if key in _ACCEPTED_UNUSED:
            log.info("lossless-claw config key %r is accepted but not used by this port", key)
            continue
        target = _ALIASES.get(key, key)
        if target not in known:
            raise ConfigError(f"lossless-claw config: unknown key {key!r}; known keys: {', '.join(sorted(known))}")
        data[target] = value
    try:
        LosslessConfig.model_validate(data)
    except ValidationError as exc:
        raise ConfigError(_describe(exc, "plugins.entries.lossless-claw.config")) from exc
    data.update(_env_overrides(os.environ if env is None else env))
    try:
        return LosslessConfig.model_validate(data)
    except ValidationError as exc:
        raise ConfigError(_describe(exc, "after LCM_* environment overrides")) from exc
