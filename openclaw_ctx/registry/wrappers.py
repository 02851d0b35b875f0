"""The two wrappers the registry puts around a resolved engine.

1. :class:`CompatEngine` (inner, every engine): a strict engine written against an older contract may
   reject keys the host adds (``sessionKey``, ``prompt``, ``runtimeSettings``, ``sessionTarget``,
   ``runtimeContext``). When a call fails with what looks like a strict-validator rejection of such a
   key, the call is retried without it; rejected keys are remembered per wrapped instance so later
   calls (of any method) omit them up front.
2. :class:`QuarantineProxy` (outer, non-default engines only): the first failure of a lifecycle call
   quarantines the engine for the process and that call falls back to the default engine, except for
   ``compact`` and ``prepare_subagent_spawn``, which re-raise. Aborts never quarantine.
"""

from __future__ import annotations

import asyncio
import logging
import re
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import replace
from typing import Any, Protocol

from pydantic import BaseModel, ValidationError

from openclaw_ctx.contract import (
    AssembleParams,
    AssembleResult,
    BootstrapResult,
    CompactParams,
    CompactResult,
    ContextEngine,
    EngineContext,
    EngineInfo,
    IngestBatchResult,
    IngestParams,
    IngestResult,
    without_keys,
)
from openclaw_ctx.errors import AbortError

__all__ = [
    "DOWNGRADED_REASON",
    "GUARDED_HOOKS",
    "HOST_PARAM_KEYS",
    "CompatEngine",
    "QuarantineProxy",
    "QuarantineSink",
    "operation_name",
    "rejected_host_keys",
    "wrap_compat",
]

_log = logging.getLogger("openclaw_ctx.registry.registry")

DOWNGRADED_REASON = "context engine downgraded to legacy"

_SESSION_HOOK_KEYS = frozenset({"session_key", "runtime_settings", "session_target", "runtime_context"})
HOST_PARAM_KEYS: dict[str, frozenset[str]] = {
    "bootstrap": _SESSION_HOOK_KEYS,
    "maintain": _SESSION_HOOK_KEYS,
    "after_turn": _SESSION_HOOK_KEYS,
    "compact": _SESSION_HOOK_KEYS,
    "ingest": frozenset({"session_key"}),
    "ingest_batch": frozenset({"session_key"}),
    "assemble": frozenset({"session_key", "prompt", "runtime_settings"}),
}
"""Per method, the host-added keys (snake_case) a strict engine may reject and the call be retried without."""

_OPTIONAL_GUARDED = (
    "bootstrap",
    "maintain",
    "ingest_batch",
    "after_turn",
    "prepare_subagent_spawn",
    "on_subagent_ended",
)
GUARDED_HOOKS = ("ingest", "assemble", "compact", *_OPTIONAL_GUARDED)
"""Methods the quarantine proxy guards; ``dispose`` is deliberately not among them."""

_RERAISE = frozenset({"compact", "prepare_subagent_spawn"})
_OPERATION_NAMES = {
    "ingest_batch": "ingestBatch",
    "after_turn": "afterTurn",
    "prepare_subagent_spawn": "prepareSubagentSpawn",
    "on_subagent_ended": "onSubagentEnded",
}


def operation_name(method: str) -> str:
    """OpenClaw's name of a hook (``after_turn`` → ``afterTurn``), used in quarantine records and logs."""
    return _OPERATION_NAMES.get(method, method)


def _camel(name: str) -> str:
    head, *rest = name.split("_")
    return head + "".join(p.title() for p in rest)


# --- recognising strict-validator rejections -------------------------------------------------------

_Q = r"[\"'`]"
_REJECTION_TEMPLATES = (
    r"unrecogni[sz]ed\s+key(?:\(s\)|s)?\b[^\n]*?{q}{k}{q}",
    r"additional\s+propert(?:y|ies)\b[^\n]*?{q}{k}{q}",
    r"(?:unexpected|unknown|invalid|extra|unrecogni[sz]ed)\s+(?:property|properties|field|fields|key|keys|"
    r"keyword\s+argument|argument|input)\b[^\n]*?{q}{k}{q}",
    r"{q}{k}{q}\s+is\s+not\s+(?:allowed|permitted)",
)


def _patterns(name: str) -> list[re.Pattern[str]]:
    return [re.compile(t.format(q=_Q, k=re.escape(name)), re.IGNORECASE) for t in _REJECTION_TEMPLATES]


def _spellings(key: str) -> set[str]:
    return {key, _camel(key)}


_ALL_HOST_KEYS = frozenset().union(*HOST_PARAM_KEYS.values())
_KEY_PATTERNS = {key: [p for spelling in _spellings(key) for p in _patterns(spelling)] for key in _ALL_HOST_KEYS}


def _walk(error: object, seen: set[int], depth: int = 0) -> Iterator[object]:
    """The error, its causes, contexts, grouped errors, issues and messages (bounded, cycle-safe)."""
    if depth > 8 or id(error) in seen:
        return
    seen.add(id(error))
    yield error
    children: list[object] = []
    if isinstance(error, list | tuple):
        children.extend(error)
    elif isinstance(error, dict):
        children.extend(v for k, v in error.items() if k in ("cause", "issues", "errors", "message"))
    elif isinstance(error, BaseException):
        children.extend(c for c in (error.__cause__, error.__context__) if c is not None)
        if isinstance(error, BaseExceptionGroup):
            children.extend(error.exceptions)
        for attr in ("issues", "errors", "message"):
            value = getattr(error, attr, None)
            if isinstance(value, list | tuple | str | dict):
                children.append(value)
    for child in children:
        yield from _walk(child, seen, depth + 1)


def _structured_rejections(node: object, candidates: set[str]) -> set[str]:
    found: set[str] = set()
    if isinstance(node, ValidationError):
        for item in node.errors():
            if item["type"] == "extra_forbidden" and item["loc"]:
                found |= {k for k in candidates if str(item["loc"][-1]) in _spellings(k)}
    elif isinstance(node, dict) and node.get("code") == "unrecognized_keys":
        keys = node.get("keys") or []
        found |= {k for k in candidates if any(str(x) in _spellings(k) for x in keys)}
    return found


def _texts(node: object) -> list[str]:
    if isinstance(node, str):
        return [node]
    if isinstance(node, BaseException):
        return [str(node)]
    return []


def rejected_host_keys(error: BaseException, candidates: set[str]) -> set[str]:
    """Which of `candidates` (snake_case host keys) `error` says a strict validator rejected.

    Recognises pydantic ``extra_forbidden`` errors, zod-style ``unrecognized_keys`` issues, and
    messages such as ``Unrecognized key(s) in object: 'sessionKey'``, ``additional properties 'x'``,
    ``unexpected keyword argument 'prompt'`` or ``'x' is not allowed``. A message that merely mentions
    a key (``Unknown sessionKey "x"``) is not a rejection.
    """
    found: set[str] = set()
    for node in _walk(error, set()):
        found |= _structured_rejections(node, candidates)
        for text in _texts(node):
            found |= {k for k in candidates & _ALL_HOST_KEYS if any(p.search(text) for p in _KEY_PATTERNS[k])}
    return found & candidates


# --- shared wrapper plumbing ------------------------------------------------------------------------

Hook = Callable[[Any], Awaitable[Any]]


class _Wrapper:
    """Delegates to `inner`; optional hooks exist on the wrapper only when the inner engine has them."""

    def __init__(self, inner: Any) -> None:
        self._inner = inner

    @property
    def inner(self) -> Any:
        """The wrapped engine."""
        return self._inner

    @property
    def info(self) -> EngineInfo:
        """The inner engine's info."""
        info: EngineInfo = self._inner.info
        return info

    async def ingest(self, params: IngestParams) -> IngestResult:
        """Store one message (through this wrapper's policy)."""
        result: IngestResult = await self._dispatch("ingest", params)
        return result

    async def assemble(self, params: AssembleParams) -> AssembleResult:
        """Build the run's context (through this wrapper's policy)."""
        result: AssembleResult = await self._dispatch("assemble", params)
        return result

    async def compact(self, params: CompactParams) -> CompactResult:
        """Summarise older history (through this wrapper's policy)."""
        result: CompactResult = await self._dispatch("compact", params)
        return result

    async def _dispatch(self, method: str, params: Any) -> Any:
        raise NotImplementedError

    def _hook(self, name: str) -> Hook:
        async def call(params: Any) -> Any:
            return await self._dispatch(name, params)

        call.__name__ = name
        return call

    def __getattr__(self, name: str) -> Any:
        # Only reached for attributes not defined on the wrapper itself.
        if name.startswith("__") or name == "_inner":
            raise AttributeError(name)
        target = getattr(self._inner, name)
        if name in _OPTIONAL_GUARDED and callable(target):
            return self._hook(name)
        return target


class CompatEngine(_Wrapper):
    """Retries calls without the host-added keys a strict engine rejects, and remembers them."""

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
        # A host key left at None is not forwarded at all ("prompt only when provided").
        drop = {k for k in present if getattr(params, k) is None} | (present & self.rejected_keys)
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


def wrap_compat(engine: Any) -> CompatEngine:
    """`engine` in a :class:`CompatEngine` (idempotent: an already wrapped engine is returned as is)."""
    return engine if isinstance(engine, CompatEngine) else CompatEngine(engine)


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


_FALLBACK_RESULTS: dict[str, Callable[[], Any]] = {
    "bootstrap": lambda: BootstrapResult(bootstrapped=False, reason=DOWNGRADED_REASON),
    "maintain": lambda: {"changed": False, "bytesFreed": 0, "rewrittenEntries": 0, "reason": DOWNGRADED_REASON},
    "ingest": lambda: IngestResult(ingested=False),
    "ingest_batch": lambda: IngestBatchResult(ingested_count=0),
    "after_turn": lambda: None,
    "prepare_subagent_spawn": lambda: None,
    "on_subagent_ended": lambda: None,
}

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


class QuarantineProxy(_Wrapper):
    """Guards a non-default engine: first failure quarantines it and work moves to the default engine."""

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
        if method not in _FALLBACK_RESULTS:
            raise RuntimeError(f'default engine "{default.info.id}" has no {method}() to fall back to')
        return _FALLBACK_RESULTS[method]()

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
            if method in _RERAISE:
                raise
            try:
                return await self._fallback_call(method, params)
            except Exception:
                _log.warning(
                    "default engine also failed during %s; re-raising the original error", method, exc_info=True
                )
            raise
