"""Explicit capability proxies: a wrapper has exactly the optional capabilities of the engine it wraps.

A wrapper class is composed from :class:`Wrapper` (the required surface) and one small proxy class
per capability the inner engine has, so ``supports_after_turn(wrapper)`` answers what the engine
answers and every delegating method is written out (no ``__getattr__``). Lifecycle hooks of the
table go through the wrapper's policy (:meth:`Wrapper._dispatch`); ``dispose``, tools and deferred
compaction are handed straight to the inner engine.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, ClassVar, TypeVar, cast

from openclaw_ctx.contract import (
    AfterTurnParams,
    AssembleParams,
    AssembleResult,
    BootstrapParams,
    BootstrapResult,
    CommitTurnParams,
    CommitTurnResult,
    CompactParams,
    CompactResult,
    EngineInfo,
    IngestBatchParams,
    IngestBatchResult,
    IngestParams,
    IngestResult,
    MaintainParams,
    MaintainResult,
    PrepareSubagentSpawnParams,
    SpawnCallback,
    SubagentEndedParams,
    SubagentSpawnPreparation,
    supports_after_turn,
    supports_bootstrap,
    supports_commit_turn,
    supports_deferred_compaction,
    supports_dispose,
    supports_ingest_batch,
    supports_maintain,
    supports_spawning_tools,
    supports_subagent_ended,
    supports_subagent_spawn,
    supports_tools,
)
from openclaw_ctx.contract.model import ToolSpec

__all__ = ["CAPABILITY_PROXIES", "Wrapper", "compose"]


class Wrapper:
    """Delegates to `inner`; subclasses decide the policy of a hook call in :meth:`_dispatch`."""

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


# --- one proxy per optional capability ----------------------------------------------------------


class _Bootstrap(Wrapper):
    async def bootstrap(self, params: BootstrapParams) -> BootstrapResult:
        """Initialise the session (through this wrapper's policy)."""
        result: BootstrapResult = await self._dispatch("bootstrap", params)
        return result


class _IngestBatch(Wrapper):
    async def ingest_batch(self, params: IngestBatchParams) -> IngestBatchResult:
        """Store a turn's messages (through this wrapper's policy)."""
        result: IngestBatchResult = await self._dispatch("ingest_batch", params)
        return result


class _CommitTurn(Wrapper):
    async def commit_turn(self, params: CommitTurnParams) -> CommitTurnResult:
        """Commit a whole turn (through this wrapper's policy)."""
        result: CommitTurnResult = await self._dispatch("commit_turn", params)
        return result


class _AfterTurn(Wrapper):
    async def after_turn(self, params: AfterTurnParams) -> None:
        """Finalise a turn (through this wrapper's policy)."""
        await self._dispatch("after_turn", params)


class _Maintain(Wrapper):
    async def maintain(self, params: MaintainParams) -> MaintainResult:
        """Maintain the transcript (through this wrapper's policy)."""
        result: MaintainResult = await self._dispatch("maintain", params)
        return result


class _SubagentSpawn(Wrapper):
    async def prepare_subagent_spawn(self, params: PrepareSubagentSpawnParams) -> SubagentSpawnPreparation | None:
        """Prepare a child run (through this wrapper's policy)."""
        result: SubagentSpawnPreparation | None = await self._dispatch("prepare_subagent_spawn", params)
        return result


class _SubagentEnded(Wrapper):
    async def on_subagent_ended(self, params: SubagentEndedParams) -> None:
        """Release a child's state (through this wrapper's policy)."""
        await self._dispatch("on_subagent_ended", params)


class _Dispose(Wrapper):
    async def dispose(self) -> None:
        """Release the engine (never guarded: a failing dispose is the caller's to see)."""
        await self._inner.dispose()


class _Tools(Wrapper):
    def tools(self, session_key: str) -> list[ToolSpec]:
        """The engine's own tools."""
        specs: list[ToolSpec] = self._inner.tools(session_key)
        return specs


class _SpawningTools(Wrapper):
    tools_accept_spawn: ClassVar[bool] = True

    def tools(self, session_key: str, *, spawn: SpawnCallback | None = None) -> list[ToolSpec]:
        """The engine's own tools, which may delegate to sub-agents through `spawn`."""
        specs: list[ToolSpec] = self._inner.tools(session_key, spawn=spawn)
        return specs


class _DeferredCompaction(Wrapper):
    async def drain_debt(self, session_key: str) -> CompactResult | None:
        """Pay the key's deferred compaction debt."""
        result: CompactResult | None = await self._inner.drain_debt(session_key)
        return result


CAPABILITY_PROXIES: tuple[tuple[Callable[[object], bool], type[Wrapper]], ...] = (
    (supports_bootstrap, _Bootstrap),
    (supports_ingest_batch, _IngestBatch),
    (supports_commit_turn, _CommitTurn),
    (supports_after_turn, _AfterTurn),
    (supports_maintain, _Maintain),
    (supports_subagent_spawn, _SubagentSpawn),
    (supports_subagent_ended, _SubagentEnded),
    (supports_dispose, _Dispose),
    (supports_deferred_compaction, _DeferredCompaction),
)
"""Each capability check and the proxy a wrapper gains when the inner engine passes it."""


def _tools_proxy(inner: object) -> tuple[type[Wrapper], ...]:
    # The two shapes of `tools` are one capability: the declared spawning one wins.
    if supports_spawning_tools(inner):
        return (_SpawningTools,)
    return (_Tools,) if supports_tools(inner) else ()


W = TypeVar("W", bound=Wrapper)


_COMPOSED: dict[tuple[type[Wrapper], tuple[type[Wrapper], ...]], type[Wrapper]] = {}


def _composed(base: type[W], proxies: tuple[type[Wrapper], ...]) -> type[W]:
    if not proxies:
        return base
    key = (base, proxies)
    if key not in _COMPOSED:  # one class per capability set, not one per engine instance
        _COMPOSED[key] = type(base.__name__, (base, *proxies), {"__module__": base.__module__})
    return cast(type[W], _COMPOSED[key])


def compose(base: type[W], inner: object) -> type[W]:
    """`base` extended with the proxy of every optional capability `inner` has (classes are cached)."""
    proxies = tuple(proxy for check, proxy in CAPABILITY_PROXIES if check(inner)) + _tools_proxy(inner)
    return _composed(base, proxies)
