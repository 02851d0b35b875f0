"""What ``initialize`` builds: the summarizer the server's engine uses and the engine itself."""

from __future__ import annotations

import dataclasses
from typing import Any

from openclaw_ctx.config import OpenClawConfig
from openclaw_ctx.contract import EngineContext
from openclaw_ctx.providers.settings import plugin_config
from openclaw_ctx.registry import ResolvedEngine, resolve_context_engine
from openclaw_ctx.registry.wrappers import QuarantineProxy
from openclaw_ctx.store.store import Store
from openclaw_ctx.summarize import Summarizer, default_summarizer
from openclaw_ctx.summarize.settings import resolve_summarizer

__all__ = ["HOST_SUMMARIZER", "pick_summarizer", "resolve_engine"]

HOST_SUMMARIZER = "host"
EXTRACTIVE = frozenset({"extractive", "extractive-v1", "extractive-v2"})


def pick_summarizer(choice: str | None, config: OpenClawConfig, host: Summarizer) -> Summarizer:
    """The summarizer `choice` names: ``host`` (the client's model), ``extractive``, or a ``provider/model``;
    unset: the configured summary model (``summaryModel: "host"`` selects the host's), else extractive.

    Raises:
        ConfigError: a configured provider cannot be used as written.
    """
    if choice is None and plugin_config(config).get("summaryModel") == HOST_SUMMARIZER:
        choice = HOST_SUMMARIZER
    if choice == HOST_SUMMARIZER:
        return host
    if choice in EXTRACTIVE:
        return default_summarizer()
    return resolve_summarizer(config, model=choice) or default_summarizer()


async def resolve_engine(
    store: Store,
    config: OpenClawConfig,
    engine_id: str | None,
    summarizer: Summarizer,
    *,
    engine_config: dict[str, Any] | None = None,
) -> ResolvedEngine:
    """The engine `engine_id` selects (None: the configured slot), resolved as the runtime resolves it,
    minus the quarantine proxy: the host on the client's side quarantines (or, for ``assemble``, falls
    back) on an error answer itself, so the server reports every engine error instead of downgrading
    its one engine to legacy for the rest of its life. Strict-key retries (the compat wrapper) stay.
    `engine_config` (the plugin's ``engineConfig``) overrides ``plugins.entries.<engine>.config`` key by key.

    Raises:
        EngineNotFoundError: the default engine is needed and not registered.
    """
    if engine_id:
        config = config.with_engine(engine_id)
    selected, _source = config.slot_engine()
    entry = config.entry(selected)
    settings = {**((entry.config or {}) if entry else {}), **(engine_config or {})} or None
    ctx = EngineContext(config=settings, store=store, openclaw_config=config, summarizer=summarizer)
    resolved = await resolve_context_engine(config, ctx)
    if isinstance(resolved.engine, QuarantineProxy):
        return dataclasses.replace(resolved, engine=resolved.engine.inner)
    return resolved
