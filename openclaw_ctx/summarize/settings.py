"""The summarizer openclaw.json and the environment configure: an LLMSummarizer over the providers.

Which provider and model (and the fallbacks) is the providers' business
(:func:`openclaw_ctx.providers.settings.resolve_summary_specs`); this module adds the summary calls' own
settings (timeout, circuit breaker, spend guard) and builds the summarizer.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from typing import Any

from openclaw_ctx.config import OpenClawConfig
from openclaw_ctx.errors import ConfigError
from openclaw_ctx.providers.resilience import CircuitBreaker, SpendGuard
from openclaw_ctx.providers.settings import PLUGIN_ID, plugin_config, resolve_summary_specs
from openclaw_ctx.summarize.base import Summarizer
from openclaw_ctx.summarize.llm import LLMSummarizer

__all__ = ["resolve_summarizer"]


def _number(env: Mapping[str, str], plugin: Mapping[str, Any], key: str, default: float) -> float:
    """A numeric plugin setting; ``LCM_<UPPER_SNAKE>`` in the environment overrides the plugin config."""
    name = "LCM_" + re.sub(r"(?<!^)(?=[A-Z])", "_", key).upper()
    raw: Any = env.get(name, plugin.get(key, default))
    try:
        return float(raw)
    except (TypeError, ValueError) as exc:
        raise ConfigError(f"{name} / plugins.entries.{PLUGIN_ID}.config.{key}: expected a number, got {raw!r}") from exc


def resolve_summarizer(
    config: OpenClawConfig,
    *,
    model: str | None = None,
    provider: str | None = None,
    env: Mapping[str, str] | None = None,
    **transport: Any,
) -> Summarizer | None:
    """An LLMSummarizer for the configured summary model and fallbacks, or None when none is configured.

    Timeout, circuit breaker and spend guard come from the lossless-claw plugin config (``summaryTimeoutMs``,
    ``circuitBreakerThreshold``/``CooldownMs``, ``summaryCallWindowMs``, ``summaryMaxCallsPerWindow``,
    ``summarySpendBackoffMs``) or their ``LCM_*`` variables; `transport` overrides any ProviderTransport option.

    Raises:
        ConfigError: as for :func:`resolve_summary_specs`, or a non-numeric setting.
    """
    env = os.environ if env is None else env
    specs = resolve_summary_specs(config, model=model, provider=provider, env=env)
    if not specs:
        return None
    plugin = plugin_config(config)
    guard = SpendGuard(
        max_calls=int(_number(env, plugin, "summaryMaxCallsPerWindow", 24)),
        window_s=_number(env, plugin, "summaryCallWindowMs", 600_000) / 1000,
        backoff_s=_number(env, plugin, "summarySpendBackoffMs", 1_800_000) / 1000,
    )
    threshold = int(_number(env, plugin, "circuitBreakerThreshold", 5))
    cooldown_s = _number(env, plugin, "circuitBreakerCooldownMs", 1_800_000) / 1000
    breakers = {s.provider: CircuitBreaker(s.provider, threshold=threshold, cooldown_s=cooldown_s) for s in specs}
    options: dict[str, Any] = {"timeout_s": _number(env, plugin, "summaryTimeoutMs", 60_000) / 1000}
    options.update(transport)
    clients = [s.client(**{"breaker": breakers[s.provider], "spend_guard": guard, **options}) for s in specs]
    return LLMSummarizer(
        clients[0], specs[0].model, fallbacks=[(c, s.model) for c, s in zip(clients[1:], specs[1:], strict=True)]
    )
