"""Finding the engine that adopts a key's context, through the registry and never by import.

``migrate --to E`` (E other than legacy) and ``backfill`` need an engine that offers the adoption
capability (:mod:`openclaw_ctx.contract.adoption`). Its factory is run directly, without the registry's
quarantine and fallback: an offline command must say what is wrong, not carry on with another engine.
"""

from __future__ import annotations

from openclaw_ctx._ids import LEGACY_ENGINE_ID
from openclaw_ctx.config import OpenClawConfig
from openclaw_ctx.contract import EngineContext
from openclaw_ctx.contract.adoption import AdoptsContext, supports_adoption
from openclaw_ctx.errors import EngineContractError, EngineNotFoundError
from openclaw_ctx.registry import get_registry
from openclaw_ctx.registry.records import call_factory, factory_context
from openclaw_ctx.store.store import Store
from openclaw_ctx.summarize.base import Summarizer

__all__ = ["adopter_for", "installed_engines"]


def installed_engines() -> list[str]:
    """Every engine id some installed package registers (``openclaw_ctx.engines`` entry points)."""
    registry = get_registry()
    registry.ensure_loaded()
    return sorted(e.engine_id for e in registry.list_engines())


async def adopter_for(engine_id: str, *, store: Store, config: OpenClawConfig, summarizer: Summarizer) -> AdoptsContext:
    """An instance of `engine_id` that can adopt a key's context.

    Raises:
        EngineNotFoundError: no installed package registers `engine_id`.
        EngineContractError: the engine is installed but cannot adopt a context.
    """
    registry = get_registry()
    registry.ensure_loaded()
    entry = registry.get(engine_id)
    if entry is None:
        reason = registry.load_errors.get(engine_id)
        installed = ", ".join(installed_engines())
        raise EngineNotFoundError(
            f"{engine_id} is not installed"
            + (f" (its plugin failed to load: {reason})" if reason else "")
            + f"; installed engines: {installed}"
        )
    ctx = factory_context(EngineContext(store=store, summarizer=summarizer), config, engine_id)
    engine = await call_factory(entry.factory, ctx)
    if engine_id == LEGACY_ENGINE_ID or not supports_adoption(engine):
        raise EngineContractError(f"engine {engine_id!r} cannot adopt a session's context (no adoption capability)")
    return engine
