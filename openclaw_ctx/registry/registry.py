"""The context-engine registry: registration by owner, entry-point loading, resolution and quarantine.

One registry per process (:func:`get_registry`), mirroring OpenClaw's ``src/context-engine/registry.ts``.
Engines arrive through the entry-point group ``openclaw_ctx.engines``: each entry point is a
``register(api)`` function that calls ``api.register_context_engine(id, factory)``. Our own ``legacy``
entry point registers as owner ``core``; every other entry point registers as ``plugin:<name>``.

Resolution (:meth:`EngineRegistry.resolve`) selects ``plugins.slots.contextEngine`` (default
``legacy``). A non-default engine that is missing, whose factory raises, whose result breaks the
contract, or that later fails inside a lifecycle call is quarantined for the process and work moves
to ``legacy``; the default engine itself fails loudly. Tests build their own ``EngineRegistry()``.
"""

from __future__ import annotations

import logging
import os
import sys
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field, replace
from importlib.metadata import EntryPoint, entry_points
from pathlib import Path
from typing import Any, Literal

from openclaw_ctx._time import utc_now
from openclaw_ctx.config import DEFAULT_ENGINE_ID, OpenClawConfig
from openclaw_ctx.contract import ContextEngine, EngineContext, EngineFactory
from openclaw_ctx.errors import EngineContractError, EngineNotFoundError
from openclaw_ctx.registry.health import default_health_path, read_health, write_health
from openclaw_ctx.registry.records import (
    CORE_OWNER,
    ENTRY_POINT_GROUP,
    PUBLIC_SDK_OWNER,
    Lifecycle,
    PluginApi,
    QuarantineRecord,
    RegisteredEngine,
    RegisterResult,
    ResolvedEngine,
    call_factory,
    contract_error,
    entry_point_owner,
    env_allow,
    factory_context,
    owner_plugin_id,
)
from openclaw_ctx.registry.wrappers import guard, wrap_compat

_log = logging.getLogger("openclaw_ctx.registry.registry")

__all__ = [
    "CORE_OWNER",
    "DEFAULT_ENGINE_ID",
    "ENTRY_POINT_GROUP",
    "PUBLIC_SDK_OWNER",
    "EngineRegistry",
    "QuarantineRecord",
    "RegisterResult",
    "RegisteredEngine",
    "ResolvedEngine",
    "clear_context_engines_for_owner",
    "contract_error",
    "ensure_engines_loaded",
    "get_registry",
    "list_quarantines",
    "owner_plugin_id",
    "register_context_engine",
    "register_context_engine_for_owner",
    "resolve_context_engine",
]


@dataclass
class EngineRegistry:
    """Registered engines and quarantines. The process has one (:func:`get_registry`); tests make their own.

    Args:
        autoload: when True, :meth:`resolve` first loads the entry points (:meth:`ensure_loaded`).
        health_path: where to mirror quarantines for other processes (``None``: nowhere).
    """

    autoload: bool = True
    health_path: Callable[[], Path] | None = None
    _engines: dict[str, RegisteredEngine] = field(default_factory=dict)
    _quarantines: dict[str, QuarantineRecord] = field(default_factory=dict)
    _loaded: set[tuple[str, str]] = field(default_factory=set)
    _scans: set[frozenset[str] | None] = field(default_factory=set)
    load_errors: dict[str, str] = field(default_factory=dict)
    """Entry points that failed to load: name → error text."""

    # --- registration ---------------------------------------------------------------------------

    def register_for_owner(
        self,
        engine_id: str,
        factory: EngineFactory,
        owner: str,
        *,
        allow_same_owner_refresh: bool = False,
        lifecycle: Lifecycle = "runtime",
    ) -> RegisterResult:
        """Register `factory` under `engine_id` for `owner` (OpenClaw's ``registerContextEngineForOwner``).

        ``legacy`` is reserved for owner ``core``; an id held by another owner is refused; the same
        owner may replace its factory only with `allow_same_owner_refresh`. A discovery-only
        registration never replaces a runtime one. A successful runtime registration clears the id's
        quarantine.

        Raises:
            ValueError: `owner` or `engine_id` is empty.
        """
        owner = owner.strip() if isinstance(owner, str) else ""
        if not owner:
            raise ValueError("context engine owner must be a non-empty string")
        if not isinstance(engine_id, str) or not engine_id.strip():
            raise ValueError("context engine id must be a non-empty string")
        if engine_id == DEFAULT_ENGINE_ID and owner != CORE_OWNER:
            return RegisterResult(False, CORE_OWNER)
        existing = self._engines.get(engine_id)
        if existing is not None:
            if existing.owner != owner:
                return RegisterResult(False, existing.owner)
            if existing.lifecycle == "runtime" and lifecycle == "readOnlyDiscovery":
                return RegisterResult(True)
            if existing.lifecycle == lifecycle and not allow_same_owner_refresh:
                return RegisterResult(False, existing.owner)
        self._engines[engine_id] = RegisteredEngine(engine_id, factory, owner, lifecycle)
        if lifecycle == "runtime" and self._quarantines.pop(engine_id, None) is not None:
            self._sync_health()
        return RegisterResult(True)

    def register(self, engine_id: str, factory: EngineFactory) -> RegisterResult:
        """The public SDK call: owner is always ``public-sdk`` (it cannot claim ``legacy``)."""
        return self.register_for_owner(engine_id, factory, PUBLIC_SDK_OWNER)

    def clear_for_owner(self, owner: str) -> list[str]:
        """Unregister every engine of `owner` (and lift their quarantines); returns the ids removed."""
        removed = [i for i, e in self._engines.items() if e.owner == owner]
        lifted = [self._quarantines.pop(i, None) for i in removed]
        for engine_id in removed:
            del self._engines[engine_id]
        if any(lifted):
            self._sync_health()
        return removed

    def get(self, engine_id: str) -> RegisteredEngine | None:
        """The entry for `engine_id`, if registered."""
        return self._engines.get(engine_id)

    def list_engines(self) -> list[RegisteredEngine]:
        """Every registered engine, by id."""
        return [self._engines[i] for i in sorted(self._engines)]

    # --- entry points ---------------------------------------------------------------------------

    def ensure_loaded(self, allow: set[str] | None = None) -> None:
        """Load the ``openclaw_ctx.engines`` entry points once each (idempotent).

        Args:
            allow: entry-point names to load; ``None`` reads ``OPENCLAW_CTX_ENGINES`` (comma-separated),
                and loads everything when that is unset. The core ``legacy`` entry point always loads.
        """
        allowed = allow if allow is not None else env_allow()
        scan = frozenset(allowed) if allowed is not None else None
        if scan in self._scans:  # scanning installed distributions costs tens of ms: once per allow-set
            return
        self._scans.add(scan)
        self.load_entry_points(entry_points(group=ENTRY_POINT_GROUP), allow=allowed)

    def load_entry_points(self, eps: Iterable[EntryPoint], *, allow: set[str] | None = None) -> None:
        """Load the given entry points (skipping ones already loaded); a failing one is logged and skipped."""
        for ep in eps:
            owner = entry_point_owner(ep)
            key = (ep.name, ep.value)
            if key in self._loaded or (allow is not None and ep.name not in allow and owner != CORE_OWNER):
                continue
            self._loaded.add(key)
            try:
                register = ep.load()
                register(PluginApi(self, owner))
            except Exception as exc:
                self.load_errors[ep.name] = f"{type(exc).__name__}: {exc}"
                _log.error('[context-engine] plugin entry point "%s" (%s) failed to load: %s', ep.name, ep.value, exc)

    # --- quarantine -----------------------------------------------------------------------------

    def is_quarantined(self, engine_id: str) -> bool:
        """True when `engine_id` is quarantined for this process."""
        return engine_id in self._quarantines

    def quarantine(self, engine_id: str, owner: str | None, operation: str, reason: str) -> QuarantineRecord:
        """Record a failure (the first one wins) and log it; returns the record in force."""
        existing = self._quarantines.get(engine_id)
        if existing is not None:
            return existing
        record = QuarantineRecord(engine_id, owner, operation, reason, utc_now(), os.getpid())
        self._quarantines[engine_id] = record
        self._sync_health()
        owner_text = f" owner={owner}" if owner else ""
        _log.error(
            '[context-engine] Context engine "%s"%s failed during %s: %s; quarantining it for this process '
            'and falling back to default engine "%s".',
            engine_id,
            owner_text,
            operation,
            reason,
            DEFAULT_ENGINE_ID,
        )
        return record

    def list_quarantines(self, *, other_processes: bool = False) -> list[QuarantineRecord]:
        """Quarantines in force in this process, oldest first.

        Args:
            other_processes: also those that live processes recorded in the health file.
        """
        own = list(self._quarantines.values())
        if not other_processes or self.health_path is None:
            return own
        return own + read_health(self.health_path(), exclude_pid=os.getpid())

    def clear_quarantine(self, engine_id: str) -> bool:
        """Lift a quarantine; True if there was one."""
        lifted = self._quarantines.pop(engine_id, None) is not None
        if lifted:
            self._sync_health()
        return lifted

    def _sync_health(self) -> None:
        if self.health_path is not None:
            write_health(self.health_path(), list(self._quarantines.values()))

    # --- resolution -----------------------------------------------------------------------------

    async def resolve_default(self, ctx: EngineContext | None = None) -> ContextEngine:
        """The default engine, compat-wrapped, strictly: any problem raises.

        Raises:
            EngineNotFoundError: the default engine is not registered.
            EngineContractError: its factory returned something that is not a ContextEngine.
        """
        entry = self._engines.get(DEFAULT_ENGINE_ID)
        if entry is None or entry.lifecycle != "runtime":
            raise EngineNotFoundError(
                f'[context-engine] fallback failed: default engine "{DEFAULT_ENGINE_ID}" is not registered. '
                f"Available engines: {self._available()}"
            )
        engine = await call_factory(entry.factory, ctx or EngineContext())
        problem = contract_error(DEFAULT_ENGINE_ID, engine)
        if problem:
            raise EngineContractError(problem)
        return wrap_compat(engine)

    async def resolve(self, config: OpenClawConfig | None = None, ctx: EngineContext | None = None) -> ResolvedEngine:
        """Resolve the engine the slot selects (OpenClaw's ``resolveContextEngine``, steps 1–7).

        Args:
            config: the OpenClaw config; ``None`` selects ``legacy``.
            ctx: what the factory receives; ``config`` is filled from the plugin entry when unset.

        Raises:
            EngineNotFoundError: the default engine is needed and not registered.
            EngineContractError: the default engine's factory returned an invalid engine.
            Exception: whatever the default engine's factory raises.
        """
        if self.autoload:
            self.ensure_loaded()
        engine_id, source = config.slot_engine() if config is not None else (DEFAULT_ENGINE_ID, "default")
        ctx = factory_context(ctx, config, engine_id)
        if engine_id == DEFAULT_ENGINE_ID:
            return await self._resolve_selected_default(ctx, source)
        entry = self._engines.get(engine_id)
        if config is not None and not self._plugin_enabled(config, engine_id, entry):
            return await self._fallback(engine_id, source, ctx, "plugin disabled")
        if self.is_quarantined(engine_id):
            return await self._fallback(engine_id, source, ctx, "quarantined")
        if entry is None:
            reason, owner = "not registered", None
            if engine_id in self.load_errors:
                reason += f" (its plugin failed to load: {self.load_errors[engine_id]})"
                owner = f"plugin:{engine_id}"
            self.quarantine(engine_id, owner, "resolve", reason)
            return await self._fallback(engine_id, source, ctx, "quarantined")
        if entry.lifecycle == "readOnlyDiscovery":
            _log.warning(
                '[context-engine] Context engine "%s" is registered for read-only discovery only; '
                'falling back to default engine "%s".',
                engine_id,
                DEFAULT_ENGINE_ID,
            )
            return await self._fallback(engine_id, source, ctx, "read-only discovery")
        engine = await self._instantiate(entry, ctx)
        if engine is None:
            return await self._fallback(engine_id, source, ctx, "quarantined")
        proxy = guard(wrap_compat(engine), engine_id=engine_id, owner=entry.owner, sink=self, ctx=ctx)
        return ResolvedEngine(proxy, engine_id, source, entry.owner)

    async def _instantiate(self, entry: RegisteredEngine, ctx: EngineContext) -> Any | None:
        """Run a plugin factory and validate its result; quarantine and return None on failure."""
        try:
            engine = await call_factory(entry.factory, ctx)
        except Exception as exc:
            self.quarantine(entry.engine_id, entry.owner, "factory", str(exc).strip() or type(exc).__name__)
            return None
        try:
            problem = contract_error(entry.engine_id, engine)
        except Exception as exc:
            problem = str(exc).strip() or type(exc).__name__
        if problem:
            self.quarantine(entry.engine_id, entry.owner, "contract-validation", problem)
            return None
        return engine

    async def _resolve_selected_default(
        self, ctx: EngineContext | None, source: Literal["configured", "default"]
    ) -> ResolvedEngine:
        entry = self._engines.get(DEFAULT_ENGINE_ID)
        if entry is None or entry.lifecycle != "runtime":
            raise EngineNotFoundError(
                f'Context engine "{DEFAULT_ENGINE_ID}" is not registered. Available engines: {self._available()}'
            )
        return ResolvedEngine(await self.resolve_default(ctx), DEFAULT_ENGINE_ID, source, entry.owner)

    async def _fallback(
        self, engine_id: str, source: Literal["configured", "default"], ctx: EngineContext, why: str
    ) -> ResolvedEngine:
        # The fallback gets the default engine's own plugin config, not the failed engine's.
        engine = await self.resolve_default(replace(ctx, config=None))
        return ResolvedEngine(engine, engine_id, source, CORE_OWNER, fallback_reason=why)

    def _plugin_enabled(self, config: OpenClawConfig, engine_id: str, entry: RegisteredEngine | None) -> bool:
        plugin = owner_plugin_id(entry.owner) if entry is not None else None
        return all(config.plugin_enabled(p) for p in {engine_id, plugin} if p)

    def _available(self) -> str:
        return ", ".join(sorted(i for i, e in self._engines.items() if e.lifecycle == "runtime")) or "(none)"


# --- the process-wide registry ------------------------------------------------------------------

_GLOBAL_ATTR = "_openclaw_ctx_context_engine_registry"


def get_registry() -> EngineRegistry:
    """The process-wide registry.

    It is kept on the ``openclaw_ctx`` package module rather than in this module, so that a second
    copy of this module (a re-import under another name) still shares one registry (OpenClaw #40096).
    """
    holder = sys.modules["openclaw_ctx"]
    registry = getattr(holder, _GLOBAL_ATTR, None)
    if registry is None:
        registry = EngineRegistry(health_path=default_health_path)
        setattr(holder, _GLOBAL_ATTR, registry)
    return registry


def register_context_engine_for_owner(
    engine_id: str,
    factory: EngineFactory,
    owner: str,
    *,
    allow_same_owner_refresh: bool = False,
    lifecycle: Lifecycle = "runtime",
) -> RegisterResult:
    """:meth:`EngineRegistry.register_for_owner` on the process registry."""
    return get_registry().register_for_owner(
        engine_id, factory, owner, allow_same_owner_refresh=allow_same_owner_refresh, lifecycle=lifecycle
    )


def register_context_engine(engine_id: str, factory: EngineFactory) -> RegisterResult:
    """Public SDK registration (owner ``public-sdk``) on the process registry."""
    return get_registry().register(engine_id, factory)


def clear_context_engines_for_owner(owner: str) -> list[str]:
    """:meth:`EngineRegistry.clear_for_owner` on the process registry."""
    return get_registry().clear_for_owner(owner)


def ensure_engines_loaded(allow: set[str] | None = None) -> None:
    """:meth:`EngineRegistry.ensure_loaded` on the process registry."""
    get_registry().ensure_loaded(allow)


def list_quarantines() -> list[QuarantineRecord]:
    """Quarantines in force: this process's, then those other live processes recorded."""
    return get_registry().list_quarantines(other_processes=True)


async def resolve_context_engine(
    config: OpenClawConfig | None = None, ctx: EngineContext | None = None
) -> ResolvedEngine:
    """Resolve the slot's engine on the process registry (see :meth:`EngineRegistry.resolve`)."""
    return await get_registry().resolve(config, ctx)
