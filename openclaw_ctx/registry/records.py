"""Registry records, the contract check of a factory's result, and entry-point helpers.

Split from :mod:`openclaw_ctx.registry.registry` (which re-exports the public names).
"""

from __future__ import annotations

import inspect
import logging
import re
from dataclasses import dataclass, replace
from importlib.metadata import EntryPoint
from typing import Any, Literal, Protocol

from openclaw_ctx.config import DEFAULT_ENGINE_ID, OpenClawConfig, engines_allowed_by_env
from openclaw_ctx.contract import REQUIRED_HOOKS, ContextEngine, EngineContext, EngineFactory

_log = logging.getLogger("openclaw_ctx.registry.registry")

__all__ = [
    "CORE_OWNER",
    "ENTRY_POINT_GROUP",
    "PUBLIC_SDK_OWNER",
    "Lifecycle",
    "PluginApi",
    "QuarantineRecord",
    "RegisterResult",
    "RegisteredEngine",
    "ResolvedEngine",
    "call_factory",
    "contract_error",
    "entry_point_owner",
    "env_allow",
    "factory_context",
    "owner_plugin_id",
]

ENTRY_POINT_GROUP = "openclaw_ctx.engines"
CORE_OWNER = "core"
PUBLIC_SDK_OWNER = "public-sdk"
_PLUGIN_PREFIX = "plugin:"
_OUR_DISTRIBUTION = "openclaw-ctx"
Lifecycle = Literal["runtime", "readOnlyDiscovery"]


@dataclass(frozen=True)
class RegisterResult:
    """``ok`` or, when refused, the owner that holds the id."""

    ok: bool
    existing_owner: str | None = None


@dataclass(frozen=True)
class RegisteredEngine:
    """One registry entry."""

    engine_id: str
    factory: EngineFactory
    owner: str
    lifecycle: Lifecycle


@dataclass(frozen=True)
class QuarantineRecord:
    """Why an engine was taken out of service for this process (the first failure only)."""

    engine_id: str
    owner: str | None
    operation: str
    """``resolve``, ``factory``, ``contract-validation`` or a hook name (``assemble``, ``afterTurn``, …)."""
    reason: str
    failed_at: str
    pid: int | None = None
    """The process that quarantined it (records of other processes come from the health file)."""


@dataclass(frozen=True)
class ResolvedEngine:
    """The outcome of resolution: the engine to call, and where it came from."""

    engine: ContextEngine
    """The wrapped engine; use it for every hook."""
    engine_id: str
    """The id the slot selected (``legacy`` when unset), even when work fell back to legacy."""
    source: Literal["configured", "default"]
    owner: str | None
    """Registry owner of the engine actually in use (``core`` after a fallback)."""
    fallback_reason: str | None = None
    """Why the selected engine is not the one in use (quarantined, disabled, discovery-only), else None."""

    @property
    def active_id(self) -> str:
        """Id of the engine that will actually run (``engine.info.id``)."""
        return self.engine.info.id


def owner_plugin_id(owner_or_engine: object) -> str | None:
    """The plugin id behind an owner (``"plugin:x"`` → ``"x"``); accepts an owner string or an object with ``owner``."""
    owner = owner_or_engine if isinstance(owner_or_engine, str) else getattr(owner_or_engine, "owner", None)
    if isinstance(owner, str) and owner.startswith(_PLUGIN_PREFIX):
        return owner[len(_PLUGIN_PREFIX) :].strip() or None
    return None


def _present(value: Any) -> bool:
    return isinstance(value, str) and bool(value.strip())


def _get(obj: Any, name: str) -> Any:
    return obj.get(name) if isinstance(obj, dict) else getattr(obj, name, None)


def contract_error(engine_id: str, engine: object) -> str | None:
    """OpenClaw's contract check of a factory's result: ``None`` when valid, else the message."""
    if engine is None or isinstance(engine, str | bytes | int | float | bool | list | tuple | dict):
        kind = "None" if engine is None else type(engine).__name__
        return f'Context engine "{engine_id}" factory returned {kind} instead of a ContextEngine object.'
    issues: list[str] = []
    info = getattr(engine, "info", None)
    if info is None:
        issues.append("missing info")
    else:
        issues += [f"missing info.{attr}" for attr in ("id", "name") if not _present(_get(info, attr))]
    issues += [f"missing {m}()" for m in REQUIRED_HOOKS if not callable(getattr(engine, m, None))]
    if not issues:
        return None
    return f'Context engine "{engine_id}" factory returned an invalid ContextEngine: {", ".join(issues)}.'


async def call_factory(factory: EngineFactory, ctx: EngineContext) -> Any:
    """Call a factory with `ctx` (or with nothing when it takes no argument), awaiting an async one."""
    try:
        params = inspect.signature(factory).parameters.values()
        takes_ctx = any(p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD, p.VAR_POSITIONAL) for p in params)
    except (TypeError, ValueError):  # builtins without a signature: assume OpenClaw's shape
        takes_ctx = True
    result = factory(ctx) if takes_ctx else factory()
    return await result if inspect.isawaitable(result) else result


def _normalize_dist(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def entry_point_owner(ep: EntryPoint) -> str:
    """``core`` for our own ``legacy`` entry point, ``plugin:<name>`` for every other."""
    dist = ep.dist.name if ep.dist is not None else ""
    if ep.name == DEFAULT_ENGINE_ID and _normalize_dist(dist) == _OUR_DISTRIBUTION:
        return CORE_OWNER
    return f"{_PLUGIN_PREFIX}{ep.name}"


def env_allow() -> set[str] | None:
    """Entry-point names ``OPENCLAW_CTX_ENGINES`` allows (``None``: no restriction)."""
    allowed = engines_allowed_by_env()
    return set(allowed) if allowed is not None else None


class _Registrar(Protocol):
    """What :class:`PluginApi` needs from the registry."""

    def register_for_owner(
        self,
        engine_id: str,
        factory: EngineFactory,
        owner: str,
        *,
        allow_same_owner_refresh: bool = False,
        lifecycle: Lifecycle = "runtime",
    ) -> RegisterResult: ...


class PluginApi:
    """The ``api`` object an entry point's ``register(api)`` receives."""

    def __init__(self, registry: _Registrar, owner: str) -> None:
        self._registry = registry
        self.owner = owner

    def register_context_engine(
        self, engine_id: str, factory: EngineFactory, *, lifecycle: Lifecycle = "runtime"
    ) -> RegisterResult:
        """Register `factory` under `engine_id` for this entry point's owner (refusals are logged)."""
        result = self._registry.register_for_owner(engine_id, factory, self.owner, lifecycle=lifecycle)
        if not result.ok:
            _log.warning(
                '[context-engine] %s could not register "%s": already owned by %s',
                self.owner,
                engine_id,
                result.existing_owner,
            )
        return result


def factory_context(ctx: EngineContext | None, config: OpenClawConfig | None, engine_id: str) -> EngineContext:
    """The factory's ctx: the caller's, completed (never mutated) with the config and the plugin entry."""
    ctx = ctx or EngineContext()
    if config is None:
        return ctx
    entry = config.entry(engine_id)
    return replace(
        ctx,
        openclaw_config=ctx.openclaw_config or config,
        config=ctx.config if ctx.config is not None else (dict(entry.config) if entry is not None else None),
    )
