"""Engine hooks by wire name: every entry of :data:`~openclaw_ctx.contract.HOOKS` with a params model is served.

A hook added to the table with its ``params`` model is served with no change here. Params arrive in the
host's camelCase; keys the model does not know (``sessionTarget`` on hooks that take none, ``agentId``, …)
are dropped, since an engine could not receive them anyway, and the rest must validate (``-32602``).
Results go back in their camelCase wire form; an engine's exception is a ``-32000`` error naming the hook
and the error class.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import Any

from pydantic import BaseModel, ValidationError

from openclaw_ctx.contract import (
    HOOKS,
    AbortSignal,
    CompactResult,
    ContextEngine,
    Hook,
    PrepareSubagentSpawnParams,
    SubagentEndedParams,
    SubagentSpawnPreparation,
)
from openclaw_ctx.errors import AbortError
from openclaw_ctx.host.serve.protocol import CANCELLED, ENGINE_ERROR, INVALID_PARAMS, METHOD_NOT_FOUND, RpcError
from openclaw_ctx.host.serve.spawns import SpawnPreparations

__all__ = ["SERVED_HOOKS", "call_hook", "served_hooks", "session_lane", "to_wire_result"]

log = logging.getLogger("openclaw_ctx.host.serve")

SERVED_HOOKS: dict[str, Hook] = {h.wire: h for h in HOOKS if h.params is not None}
"""Wire name → hook, for every hook that takes params (``dispose`` is the server's own business)."""


def served_hooks(engine: ContextEngine) -> list[str]:
    """The wire names of the served hooks `engine` implements."""
    return [wire for wire, h in SERVED_HOOKS.items() if callable(getattr(engine, h.name, None))]


def session_lane(params: Any) -> str:
    """The ordering key of a call: ``sessionKey``, else ``sessionTarget.sessionKey``, else ``sessionId``
    (sub-agent hooks: the parent's, else the child's key); calls with none share one lane."""
    if not isinstance(params, dict):
        return ""
    target = params.get("sessionTarget")
    target_key = target.get("sessionKey") if isinstance(target, dict) else None
    for value in (
        params.get("sessionKey"),
        target_key,
        params.get("sessionId"),
        params.get("parentSessionKey"),
        params.get("childSessionKey"),
    ):
        if isinstance(value, str) and value:
            return value
    return ""


def _build_params(h: Hook, raw: Any, signal: AbortSignal) -> BaseModel:
    model = h.params
    assert model is not None
    if not isinstance(raw, dict):
        raise RpcError(INVALID_PARAMS, f"{h.wire}: params must be an object", {"errors": ["params must be an object"]})
    known = {f.alias or name: name for name, f in model.model_fields.items()}
    data = {known[k]: v for k, v in raw.items() if k in known and v is not None}
    target = raw.get("sessionTarget")
    if "session_key" in model.model_fields and "session_key" not in data and isinstance(target, dict):
        if isinstance(target.get("sessionKey"), str):
            data["session_key"] = target["sessionKey"]
    if "abort_signal" in model.model_fields:
        data["abort_signal"] = signal
    dropped = sorted(set(raw) - set(known))
    if dropped:
        log.debug("%s: dropped keys the params model does not take: %s", h.wire, ", ".join(dropped))
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        aliases = {name: f.alias or name for name, f in model.model_fields.items()}
        errors = [f"{_where(e['loc'], aliases)}: {e['msg']}" for e in exc.errors()]
        raise RpcError(INVALID_PARAMS, f"{h.wire}: invalid params", {"errors": errors}) from None


def _where(loc: tuple[int | str, ...], aliases: dict[str, str]) -> str:
    """A validation error's location in the wire's names (``sessionId``, ``messages.3``)."""
    parts = [aliases.get(p, p) if i == 0 and isinstance(p, str) else str(p) for i, p in enumerate(loc)]
    return ".".join(str(p) for p in parts) or "(params)"


def to_wire_result(value: Any) -> Any:
    """A hook's result in its JSON wire form (camelCase, unset optional fields left out)."""
    if isinstance(value, BaseModel):
        return value.model_dump(mode="json", by_alias=True, exclude_none=True)
    if isinstance(value, SubagentSpawnPreparation):
        return {"prepared": True}
    if isinstance(value, dict):
        return {k: to_wire_result(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [to_wire_result(v) for v in value]
    return value


Before = Callable[[BaseModel], Awaitable[object]]


async def call_hook(
    engine: ContextEngine,
    wire: str,
    raw: Any,
    signal: AbortSignal,
    before: Before | None = None,
    spawns: SpawnPreparations | None = None,
) -> Any:
    """Validate `raw`, call the engine's hook `wire` (after `before`, given the params) and return its wire result.

    With `spawns`, a spawn preparation is held there and its answer names it (``rollbackId``), and a
    child's end lets its preparations go.

    Raises:
        RpcError: ``-32601`` no such hook (or the engine lacks it), ``-32602`` bad params,
            ``-32000`` the engine raised.
    """
    h = SERVED_HOOKS.get(wire)
    if h is None:
        raise RpcError(METHOD_NOT_FOUND, f"unknown method {wire!r}")
    fn = getattr(engine, h.name, None)
    if not callable(fn):
        raise RpcError(METHOD_NOT_FOUND, f"engine {engine.info.id!r} has no {wire!r} hook")
    params = _build_params(h, raw, signal)
    try:
        if before is not None:
            await before(params)
        result = await fn(params)
        target = getattr(params, "session_target", None)
        if isinstance(result, CompactResult) and target is not None:
            result = result.bound_to(target)
    except AbortError as exc:
        raise RpcError(CANCELLED, f"{wire}: cancelled ({exc})") from None
    except Exception as exc:
        log.warning("%s failed: %s: %s", wire, type(exc).__name__, exc)
        message = str(exc).strip() or type(exc).__name__
        raise RpcError(ENGINE_ERROR, message, {"hook": wire, "kind": type(exc).__name__}) from None
    if spawns is not None and isinstance(params, PrepareSubagentSpawnParams | SubagentEndedParams):
        if isinstance(result, SubagentSpawnPreparation):
            return {"prepared": True, "rollbackId": spawns.keep(params.child_session_key, result)}
        if isinstance(params, SubagentEndedParams):
            spawns.forget_child(params.child_session_key)
    return to_wire_result(result)
