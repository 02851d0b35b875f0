"""The two wrappers the registry puts around a resolved engine.

1. :class:`CompatEngine` (inner, every engine): a strict engine written against an older contract may
   reject keys the host adds (``sessionKey``, ``prompt``, ``runtimeSettings``, ``sessionTarget``,
   ``runtimeContext``). When a call fails with what looks like a strict-validator rejection of such a
   key, the call is retried without it; rejected keys are remembered per wrapped instance so later
   calls (of any method) omit them up front.
2. :class:`QuarantineProxy` (outer, non-default engines only): the first failure of a lifecycle call
   quarantines the engine for the process and that call falls back to the default engine, except for
   ``compact`` and ``prepare_subagent_spawn``, which re-raise. Aborts never quarantine.

Which hooks are guarded, their host-added keys, their wire names and their downgraded answers all
come from :data:`openclaw_ctx.contract.HOOKS`.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import replace
from typing import Any, Protocol

from pydantic import BaseModel
from pydantic.alias_generators import to_snake

from openclaw_ctx.contract import (
    DOWNGRADED_REASON,
    HOOKS,
    HOST_PARAMS,
    ContextEngine,
    EngineContext,
    EngineInfo,
    hook,
    without_keys,
)
from openclaw_ctx.errors import AbortError
from openclaw_ctx.registry.proxies import Wrapper, compose
from openclaw_ctx.registry.rejections import rejected_host_keys

__all__ = [
    "DOWNGRADED_REASON",
    "GUARDED_HOOKS",
    "HOST_PARAM_KEYS",
    "CompatEngine",
    "QuarantineProxy",
    "QuarantineSink",
    "accepted_host_keys",
    "guard",
    "is_quarantined",
    "operation_name",
    "rejected_host_keys",
    "wrap_compat",
]

_log = logging.getLogger("openclaw_ctx.registry.registry")

HOST_PARAM_KEYS: dict[str, frozenset[str]] = {h.name: h.host_keys for h in HOOKS if h.host_keys}
"""Per method, the host-added keys (snake_case) a strict engine may reject and the call be retried without."""

GUARDED_HOOKS = tuple(h.name for h in HOOKS if h.guarded)
"""Methods the quarantine proxy guards; ``dispose`` is deliberately not among them."""

_WIRE_NAMES = {h.name: h.wire for h in HOOKS}


def operation_name(method: str) -> str:
    """OpenClaw's name of a hook (``after_turn`` → ``afterTurn``), used in quarantine records and logs."""
    return _WIRE_NAMES.get(method, method)


# --- strict engines -------------------------------------------------------------------------------


class CompatEngine(Wrapper):
    """Retries calls without the host-added keys a strict engine rejects, and remembers them.

    Build it with :func:`wrap_compat`, which gives it the inner engine's optional capabilities.
    """

    def __init__(self, inner: Any) -> None:
        super().__init__(inner)
        self.rejected_keys: set[str] = set()
        """Host keys (snake_case) this engine instance is known to reject."""

    async def _dispatch(self, method: str, params: Any) -> Any:
        fn = getattr(self._inner, method)
        allowed = HOST_PARAM_KEYS.get(method, frozenset())
        if not allowed or not isinstance(params, BaseModel):
            return await fn(params)
        present = allowed & params.model_fields_set
        # A host key left at None is not forwarded at all ("prompt only when provided"), nor one the
        # engine's info.accepted_host_params leaves out (as OpenClaw 2026.9's host filter does).
        drop = {k for k in present if getattr(params, k) is None} | (present & self.rejected_keys)
        drop |= present - accepted_host_keys(self._inner)
        current = without_keys(params, drop) if drop else params
        while True:
            try:
                return await fn(current)
            except Exception as exc:
                learned = rejected_host_keys(exc, set(allowed & current.model_fields_set))
                if not learned:
                    raise
                self.rejected_keys |= learned
                current = without_keys(current, learned)


def accepted_host_keys(engine: Any) -> frozenset[str]:
    """The host keys (snake_case) `engine` accepts: all of them unless its info lists some."""
    accepted = getattr(getattr(engine, "info", None), "accepted_host_params", None)
    if accepted is None:
        return HOST_PARAMS
    return frozenset(to_snake(k) for k in accepted) & HOST_PARAMS


def wrap_compat(engine: Any) -> CompatEngine:
    """`engine` in a :class:`CompatEngine` (idempotent: an already wrapped engine is returned as is)."""
    return engine if isinstance(engine, CompatEngine) else compose(CompatEngine, engine)(engine)


# --- runtime quarantine ---------------------------------------------------------------------------


class QuarantineSink(Protocol):
    """What the proxy needs from its registry."""

    def is_quarantined(self, engine_id: str) -> bool:
        """True when `engine_id` is quarantined for this process."""
        ...

    def quarantine(self, engine_id: str, owner: str | None, operation: str, reason: str) -> object:
        """Record (first failure wins) and log a quarantine."""
        ...

    async def resolve_default(self, ctx: EngineContext | None = None) -> ContextEngine:
        """The default engine, strictly (raises when it cannot be had)."""
        ...


_LEGACY_INFO = EngineInfo(id="legacy", name="Legacy Context Engine")


def _is_abort(error: BaseException, signal: Any) -> bool:
    if isinstance(error, AbortError | asyncio.CancelledError):
        return True
    if signal is None or not getattr(signal, "aborted", False):
        return False
    if error is getattr(signal, "reason", None) or type(error).__name__ == "AbortError":
        return True
    text = str(error).lower()
    return any(word in text for word in ("abort", "cancelled", "canceled"))


def _reason(error: BaseException) -> str:
    return str(error).strip() or type(error).__name__


class QuarantineProxy(Wrapper):
    """Guards a non-default engine: first failure quarantines it and work moves to the default engine.

    Build it with :func:`guard`, which gives it the inner engine's optional capabilities.
    """

    def __init__(
        self,
        inner: Any,
        *,
        engine_id: str,
        owner: str | None,
        sink: QuarantineSink,
        ctx: EngineContext | None = None,
    ) -> None:
        super().__init__(inner)
        self.engine_id = engine_id
        self._owner = owner
        self._sink = sink
        self._ctx = ctx
        self._fallback: ContextEngine | None = None

    @property
    def quarantined(self) -> bool:
        """True once this engine id is quarantined for the process."""
        return self._sink.is_quarantined(self.engine_id)

    @property
    def info(self) -> EngineInfo:
        """The engine's info, or the default engine's once quarantined."""
        if self.quarantined:
            return self._fallback.info if self._fallback is not None else _LEGACY_INFO
        return super().info

    @property
    def owner(self) -> str | None:
        """Registry owner of the engine; ``None`` once it has been downgraded."""
        return None if self.quarantined else self._owner

    async def _default(self) -> ContextEngine:
        if self._fallback is None:
            # The default engine gets the shared ctx, not the failed plugin's own config.
            ctx = replace(self._ctx, config=None) if self._ctx is not None else None
            self._fallback = await self._sink.resolve_default(ctx)
        return self._fallback

    async def _fallback_call(self, method: str, params: Any) -> Any:
        default = await self._default()
        fn = getattr(default, method, None)
        if callable(fn):
            return await fn(params)
        fallback = hook(method).fallback
        if fallback is None:
            raise RuntimeError(f'default engine "{default.info.id}" has no {method}() to fall back to')
        return fallback()

    async def _dispatch(self, method: str, params: Any) -> Any:
        signal = getattr(params, "abort_signal", None)
        if signal is not None and signal.aborted:
            raise signal.reason or AbortError("operation aborted")
        if self.quarantined:
            return await self._fallback_call(method, params)
        try:
            return await getattr(self._inner, method)(params)
        except Exception as exc:
            if _is_abort(exc, signal):
                raise
            self._sink.quarantine(self.engine_id, self._owner, operation_name(method), _reason(exc))
            if hook(method).reraises:
                raise
            try:
                return await self._fallback_call(method, params)
            except Exception:
                _log.warning(
                    "default engine also failed during %s; re-raising the original error", method, exc_info=True
                )
            raise


def guard(
    inner: Any, *, engine_id: str, owner: str | None, sink: QuarantineSink, ctx: EngineContext | None = None
) -> QuarantineProxy:
    """`inner` (a compat-wrapped plugin engine) behind a :class:`QuarantineProxy` reporting to `sink`."""
    return compose(QuarantineProxy, inner)(inner, engine_id=engine_id, owner=owner, sink=sink, ctx=ctx)


def is_quarantined(engine: object) -> bool:
    """True when `engine` is a guarded plugin engine that has been quarantined (its work now goes to legacy)."""
    return isinstance(engine, QuarantineProxy) and engine.quarantined
