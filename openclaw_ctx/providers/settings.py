"""Which provider and model to use, from openclaw.json and the environment; keys stay in memory only.

Summary model, first match wins (the lossless-claw order): the caller's argument → ``LCM_SUMMARY_MODEL`` →
``plugins.entries["lossless-claw"].config.summaryModel`` → ``agents.defaults.compaction.model`` →
``agents.defaults.model``. The provider follows the same order (``LCM_SUMMARY_PROVIDER``, ``summaryProvider``,
``compaction.provider``), else a ``provider/model`` prefix, else ``claude*`` → anthropic, else openai.
Turn model: the argument → ``agents.defaults.model``.

Base URL: ``LCM_SUMMARY_BASE_URL`` (summaries only) → ``models.providers.<p>.baseUrl`` → ``ANTHROPIC_BASE_URL``
(anthropic) or ``OPENAI_BASE_URL`` (openai and the OpenAI-compatible local servers) → the provider's default
(Ollama, vLLM, LM Studio and llama.cpp have local defaults).
Key: ``models.providers.<p>.apiKey`` → ``OPENAI_API_KEY`` / ``ANTHROPIC_API_KEY``; required only for the
providers' own cloud endpoints. Keys are wrapped in :class:`~.http.Secret` at once: they are never logged,
never in a repr, never written anywhere.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal
from urllib.parse import urlsplit

from openclaw_ctx._ids import LOSSLESS_ENGINE_ID
from openclaw_ctx.config import OpenClawConfig
from openclaw_ctx.contract.model import Model
from openclaw_ctx.errors import ConfigError
from openclaw_ctx.providers.anthropic import ANTHROPIC_BASE_URL, AnthropicClient, AnthropicModel
from openclaw_ctx.providers.http import ChatClient, Secret
from openclaw_ctx.providers.openai import OPENAI_BASE_URL, OpenAIChatModel, OpenAIClient

__all__ = ["CONFIGURE_HELP", "PLUGIN_ID", "ProviderSpec", "plugin_config", "resolve_model", "resolve_summary_specs"]

Api = Literal["openai", "anthropic"]
PLUGIN_ID = LOSSLESS_ENGINE_ID
_PROVIDERS: dict[str, tuple[Api, str]] = {
    "openai": ("openai", OPENAI_BASE_URL),
    "anthropic": ("anthropic", ANTHROPIC_BASE_URL),
    "ollama": ("openai", "http://127.0.0.1:11434/v1"),
    "vllm": ("openai", "http://127.0.0.1:8000/v1"),
    "lmstudio": ("openai", "http://127.0.0.1:1234/v1"),
    "llamacpp": ("openai", "http://127.0.0.1:8080/v1"),
}
_KEY_ENV = {"openai": "OPENAI_API_KEY", "anthropic": "ANTHROPIC_API_KEY"}
_URL_ENV = {"openai": "OPENAI_BASE_URL", "anthropic": "ANTHROPIC_BASE_URL"}
_CLOUD_HOSTS = {"api.openai.com", "api.anthropic.com"}
_WINDOWS: dict[Api, int] = {"openai": 128_000, "anthropic": 200_000}

CONFIGURE_HELP = """No model provider is configured. Configure one with either:
  environment:  OPENAI_API_KEY (+ OPENAI_BASE_URL for Ollama, vLLM, llama.cpp, LM Studio)
                or ANTHROPIC_API_KEY (+ ANTHROPIC_BASE_URL), and name a model with --model
                (summaries: LCM_SUMMARY_MODEL, LCM_SUMMARY_PROVIDER, LCM_SUMMARY_BASE_URL)
  openclaw.json: agents.defaults.model = "openai/gpt-4o-mini" (or "anthropic/claude-...", "ollama/llama3.1"),
                agents.defaults.compaction.{model,provider},
                plugins.entries["lossless-claw"].config.{summaryModel,summaryProvider},
                models.providers.<name>.{baseUrl,apiKey}"""


@dataclass(frozen=True)
class ProviderSpec:
    """One resolved provider + model; `source` names where the model came from (for status output)."""

    provider: str
    api: Api
    model: str
    base_url: str
    source: str
    api_key: Secret | None = field(default=None, repr=False, compare=False)

    def client(self, **transport: Any) -> ChatClient:
        """A ChatClient for this spec (`transport`: ProviderTransport options)."""
        if self.api == "anthropic":
            return AnthropicClient(base_url=self.base_url, api_key=self.api_key, provider=self.provider, **transport)
        return OpenAIClient(base_url=self.base_url, api_key=self.api_key, provider=self.provider, **transport)


def _provider_table(config: OpenClawConfig) -> dict[str, dict[str, Any]]:
    models = (config.model_extra or {}).get("models")
    providers = models.get("providers") if isinstance(models, dict) else None
    return {k: v for k, v in providers.items() if isinstance(v, dict)} if isinstance(providers, dict) else {}


def _split_ref(ref: str, known: set[str]) -> tuple[str | None, str]:
    """``"anthropic/claude-x"`` → ("anthropic", "claude-x"); an unknown prefix (``meta-llama/…``) stays in the id."""
    head, sep, tail = ref.partition("/")
    return (head, tail) if sep and head in known and tail else (None, ref)


def _spec(
    config: OpenClawConfig,
    env: Mapping[str, str],
    ref: str,
    provider: str | None,
    source: str,
    base_url: str | None = None,
) -> ProviderSpec:
    table = _provider_table(config)
    prefix, model = _split_ref(ref.strip(), set(_PROVIDERS) | set(table))
    name = (provider or prefix or "").strip().lower()
    if prefix and prefix != name:  # an explicit provider: the prefix is part of its model id (OpenRouter style)
        model = ref.strip()
    if not name:
        name = "anthropic" if model.lower().startswith("claude") else "openai"
    entry = table.get(name, {})
    known = _PROVIDERS.get(name)
    api_field = str(entry.get("api", ""))
    api: Api = "anthropic" if "anthropic" in api_field else ("openai" if api_field else (known or ("openai", ""))[0])
    url = base_url or entry.get("baseUrl") or _url_from_env(name, known, env) or (known[1] if known else None)
    if not url:
        raise ConfigError(
            f"provider {name!r} (model {model!r}, from {source}): no base URL; set models.providers.{name}.baseUrl"
        )
    raw_key = entry.get("apiKey") or env.get(_KEY_ENV.get(name, ""), "") or None
    if raw_key is None and urlsplit(url).hostname in _CLOUD_HOSTS:
        where = _KEY_ENV.get(name, f"models.providers.{name}.apiKey")
        raise ConfigError(f"provider {name!r} (model {model!r}, from {source}) needs an API key: set {where}")
    key = Secret(str(raw_key)) if raw_key else None
    return ProviderSpec(provider=name, api=api, model=model, base_url=str(url), source=source, api_key=key)


def _url_from_env(name: str, known: tuple[Api, str] | None, env: Mapping[str, str]) -> str | None:
    """The base URL the environment gives `name`: its own variable, or ``OPENAI_BASE_URL`` for the local
    OpenAI-compatible servers (Ollama, vLLM, LM Studio, llama.cpp), as the configure help promises."""
    variable = _URL_ENV.get(name) or ("OPENAI_BASE_URL" if known is not None and known[0] == "openai" else None)
    return (env.get(variable) or None) if variable else None


def plugin_config(config: OpenClawConfig) -> dict[str, Any]:
    entry = config.entry(PLUGIN_ID)
    return dict(entry.config) if entry is not None else {}


def _first(*candidates: tuple[Any, str]) -> tuple[str, str] | None:
    for value, source in candidates:
        if isinstance(value, str) and value.strip():
            return value.strip(), source
    return None


def resolve_summary_specs(
    config: OpenClawConfig,
    *,
    model: str | None = None,
    provider: str | None = None,
    env: Mapping[str, str] | None = None,
) -> list[ProviderSpec]:
    """The summary provider and its fallbacks, in order (empty when no summary model is configured).

    Raises:
        ConfigError: a configured provider cannot be used as written (no key for a cloud endpoint, …).
    """
    env = os.environ if env is None else env
    plugin = plugin_config(config)
    compaction = config.agents.defaults.compaction
    layers: list[tuple[Any, Any, str]] = [
        (model, provider, "argument"),
        (env.get("LCM_SUMMARY_MODEL"), env.get("LCM_SUMMARY_PROVIDER"), "LCM_SUMMARY_MODEL"),
        (plugin.get("summaryModel"), plugin.get("summaryProvider"), f"plugins.entries.{PLUGIN_ID}.config.summaryModel"),
        (compaction.model, compaction.provider, "agents.defaults.compaction.model"),
        (config.agents.defaults.model, None, "agents.defaults.model"),
    ]
    # The first layer naming a model decides; a provider named there or in a higher layer applies to it,
    # one named lower down belongs to a different model and is ignored.
    chosen: tuple[str, str | None, str] | None = None
    named: str | None = None
    for layer_model, layer_provider, source in layers:
        if isinstance(layer_provider, str) and layer_provider.strip() and named is None:
            named = layer_provider.strip()
        if isinstance(layer_model, str) and layer_model.strip():
            chosen = (layer_model.strip(), named, source)
            break
    if chosen is None:
        return []
    ref, named, source = chosen
    specs = [_spec(config, env, ref, named, source, env.get("LCM_SUMMARY_BASE_URL") or None)]
    raw = env.get("LCM_FALLBACK_PROVIDERS")
    fallbacks: Any = [s for s in raw.split(",") if s.strip()] if raw else plugin.get("fallbackProviders") or []
    for item in fallbacks if isinstance(fallbacks, list) else []:
        if isinstance(item, dict) and item.get("model"):
            specs.append(_spec(config, env, str(item["model"]), item.get("provider"), "fallbackProviders"))
        elif isinstance(item, str) and item.strip():
            specs.append(_spec(config, env, item, None, "fallbackProviders"))
    return specs


def resolve_model(
    config: OpenClawConfig,
    *,
    model: str | None = None,
    provider: str | None = None,
    env: Mapping[str, str] | None = None,
    **transport: Any,
) -> Model | None:
    """The turn Model: `model` (``provider/model`` accepted) or ``agents.defaults.model``; None when neither.

    The context window is ``agents.defaults.contextWindow`` or the API family's default.

    Raises:
        ConfigError: the provider cannot be used as written.
    """
    env = os.environ if env is None else env
    found = _first((model, "argument"), (config.agents.defaults.model, "agents.defaults.model"))
    if found is None:
        return None
    spec = _spec(config, env, found[0], provider, found[1])
    window = config.agents.defaults.context_window or _WINDOWS[spec.api]
    client = spec.client(**{"timeout_s": 300.0, **transport})
    if isinstance(client, AnthropicClient):
        return AnthropicModel(client, spec.model, context_window=window)
    assert isinstance(client, OpenAIClient)
    return OpenAIChatModel(client, spec.model, context_window=window)
