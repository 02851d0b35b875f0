"""The ContextEngine contract: the required Protocol, one Protocol per optional capability, and their checks.

An engine implements the required surface (:class:`ContextEngine`) and any optional capability it
wants; the host asks ``supports_after_turn(engine)`` and friends, never an attribute by name. As in
OpenClaw, a hook is present when the engine has it as a callable; the one capability that cannot be
seen from a method's presence, engine tools that take the host's ``spawn`` callback, is declared with
``tools_accept_spawn = True`` on the engine class.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar, Protocol, TypeGuard, runtime_checkable

from openclaw_ctx.contract.hooks import OPTIONAL_HOOKS, hook
from openclaw_ctx.contract.model import ToolSpec
from openclaw_ctx.contract.params import (
    AfterTurnParams,
    AssembleParams,
    AssembleResult,
    BootstrapParams,
    BootstrapResult,
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
    SubagentEndedParams,
    SubagentSpawnPreparation,
)
from openclaw_ctx.contract.turns import CommitTurnParams, CommitTurnResult

if TYPE_CHECKING:
    from openclaw_ctx.config import OpenClawConfig
    from openclaw_ctx.store.store import Store
    from openclaw_ctx.summarize.base import Summarizer

__all__ = [
    "AfterTurnCapable",
    "BootstrapCapable",
    "ContextEngine",
    "DeferredCompactionCapable",
    "DelegationTask",
    "DisposeCapable",
    "EngineContext",
    "EngineFactory",
    "IngestBatchCapable",
    "CommitTurnCapable",
    "MaintainCapable",
    "SpawnCallback",
    "SpawningToolsCapable",
    "SubagentEndedCapable",
    "SubagentSpawnCapable",
    "ToolsCapable",
    "supports",
    "supports_after_turn",
    "supports_bootstrap",
    "supports_deferred_compaction",
    "supports_dispose",
    "supports_ingest_batch",
    "supports_commit_turn",
    "supports_maintain",
    "supports_spawning_tools",
    "supports_subagent_ended",
    "supports_subagent_spawn",
    "supports_tools",
]


# --- factories ------------------------------------------------------------------------------


@dataclass
class EngineContext:
    """What a factory receives (`ctx` in OpenClaw): its plugin config, directories, and the shared store.

    Engines never open their own connections: `store` is the one Store of this host.
    """

    config: dict[str, Any] | None = None
    """`plugins.entries.<id>.config` for this engine (None when absent)."""
    agent_dir: str | None = None
    workspace_dir: str | None = None
    store: Store | None = None
    openclaw_config: OpenClawConfig | None = None
    summarizer: Summarizer | None = None
    """The summarizer the host resolved (embedded extractive by default)."""
    extras: dict[str, Any] = field(default_factory=dict)


EngineFactory = Callable[..., "ContextEngine | Awaitable[ContextEngine]"]
"""`(ctx: EngineContext) -> engine` (sync or async); a factory taking no argument is fine too."""


# --- the required surface -------------------------------------------------------------------


@runtime_checkable
class ContextEngine(Protocol):
    """The required surface; optional capabilities are the protocols below."""

    @property
    def info(self) -> EngineInfo:
        """Engine id, name, version, ownsCompaction, hostRequirements."""
        ...

    async def ingest(self, params: IngestParams) -> IngestResult:
        """Store one message."""
        ...

    async def assemble(self, params: AssembleParams) -> AssembleResult:
        """Build the ordered messages for a run within the token budget."""
        ...

    async def compact(self, params: CompactParams) -> CompactResult:
        """Summarise older history."""
        ...


# --- optional lifecycle hooks ---------------------------------------------------------------


class BootstrapCapable(Protocol):
    """Initialises state the first time it sees a session."""

    async def bootstrap(self, params: BootstrapParams) -> BootstrapResult:
        """Import or initialise the session's state."""
        ...


class IngestBatchCapable(Protocol):
    """Ingests a completed turn's messages in one call."""

    async def ingest_batch(self, params: IngestBatchParams) -> IngestBatchResult:
        """Store the turn's new messages."""
        ...


class AfterTurnCapable(Protocol):
    """Sees the whole message snapshot after each run (instead of ingest)."""

    async def after_turn(self, params: AfterTurnParams) -> None:
        """Finalise the turn."""
        ...


class CommitTurnCapable(Protocol):
    """Commits a whole turn at once, idempotently on its advancement key (OpenClaw 2026.9)."""

    async def commit_turn(self, params: CommitTurnParams) -> CommitTurnResult:
        """Write the turn's messages, or nothing when the advancement key is already stored."""
        ...


class MaintainCapable(Protocol):
    """Maintains its transcript (after bootstrap, a turn or a compaction)."""

    async def maintain(self, params: MaintainParams) -> MaintainResult:
        """Do the maintenance due (deferred work, transcript rewrites) and say what changed."""
        ...


class SubagentSpawnCapable(Protocol):
    """Prepares its state for a child run."""

    async def prepare_subagent_spawn(self, params: PrepareSubagentSpawnParams) -> SubagentSpawnPreparation | None:
        """Prepare the child; the returned preparation is rolled back if the spawn fails."""
        ...


class SubagentEndedCapable(Protocol):
    """Is told when a sub-agent session ends."""

    async def on_subagent_ended(self, params: SubagentEndedParams) -> None:
        """Release what was prepared for the child."""
        ...


class DisposeCapable(Protocol):
    """Holds resources to release when the host is done with it."""

    async def dispose(self) -> None:
        """Release them (the Store is the host's, not the engine's)."""
        ...


# --- capabilities beyond OpenClaw's hooks ---------------------------------------------------


class DelegationTask(Protocol):
    """What an engine asks the host to run as a sub-agent: which parent, which child key, which prompt."""

    @property
    def parent_session_key(self) -> str:
        """The delegating session."""
        ...

    @property
    def child_session_key(self) -> str:
        """The child's own, fresh session key."""
        ...

    @property
    def prompt(self) -> str:
        """The child's one prompt."""
        ...


SpawnCallback = Callable[[DelegationTask], Awaitable[str]]
"""Runs a delegated task as a sub-agent through the host and returns the child's final reply."""


class ToolsCapable(Protocol):
    """Offers its own agent tools (lossless-claw's recall tools) beside the host's."""

    def tools(self, session_key: str) -> list[ToolSpec]:
        """The engine's tools for one session."""
        ...


class SpawningToolsCapable(Protocol):
    """Offers tools that delegate to sub-agents through the host's `spawn` callback."""

    tools_accept_spawn: ClassVar[bool]
    """Declared ``True`` by the engine class: :meth:`tools` takes ``spawn=``."""

    def tools(self, session_key: str, *, spawn: SpawnCallback | None = None) -> list[ToolSpec]:
        """The engine's tools for one session; `spawn` runs a sub-agent through the host."""
        ...


class DeferredCompactionCapable(Protocol):
    """Records compaction debt during a turn and pays it later, after the reply."""

    async def drain_debt(self, session_key: str) -> CompactResult | None:
        """Pay the key's debt now; None when there was none."""
        ...


# --- the checks -----------------------------------------------------------------------------


def _has(engine: object, name: str) -> bool:
    return callable(getattr(engine, name, None))


def supports_bootstrap(engine: object) -> TypeGuard[BootstrapCapable]:
    """True when `engine` has ``bootstrap``."""
    return _has(engine, "bootstrap")


def supports_ingest_batch(engine: object) -> TypeGuard[IngestBatchCapable]:
    """True when `engine` has ``ingest_batch``."""
    return _has(engine, "ingest_batch")


def supports_after_turn(engine: object) -> TypeGuard[AfterTurnCapable]:
    """True when `engine` has ``after_turn``."""
    return _has(engine, "after_turn")


def supports_commit_turn(engine: object) -> TypeGuard[CommitTurnCapable]:
    """True when `engine` has ``commit_turn``."""
    return _has(engine, "commit_turn")


def supports_maintain(engine: object) -> TypeGuard[MaintainCapable]:
    """True when `engine` has ``maintain``."""
    return _has(engine, "maintain")


def supports_subagent_spawn(engine: object) -> TypeGuard[SubagentSpawnCapable]:
    """True when `engine` has ``prepare_subagent_spawn``."""
    return _has(engine, "prepare_subagent_spawn")


def supports_subagent_ended(engine: object) -> TypeGuard[SubagentEndedCapable]:
    """True when `engine` has ``on_subagent_ended``."""
    return _has(engine, "on_subagent_ended")


def supports_dispose(engine: object) -> TypeGuard[DisposeCapable]:
    """True when `engine` has ``dispose``."""
    return _has(engine, "dispose")


def supports_tools(engine: object) -> TypeGuard[ToolsCapable]:
    """True when `engine` offers tools of its own."""
    return _has(engine, "tools")


def supports_spawning_tools(engine: object) -> TypeGuard[SpawningToolsCapable]:
    """True when `engine`'s tools take the host's ``spawn`` callback (declared, never sniffed)."""
    return _has(engine, "tools") and getattr(engine, "tools_accept_spawn", False) is True


def supports_deferred_compaction(engine: object) -> TypeGuard[DeferredCompactionCapable]:
    """True when `engine` pays compaction debt after the reply (``drain_debt``)."""
    return _has(engine, "drain_debt")


_CHECKS: dict[str, Callable[[object], bool]] = {
    "bootstrap": supports_bootstrap,
    "ingest_batch": supports_ingest_batch,
    "after_turn": supports_after_turn,
    "commit_turn": supports_commit_turn,
    "maintain": supports_maintain,
    "prepare_subagent_spawn": supports_subagent_spawn,
    "on_subagent_ended": supports_subagent_ended,
    "dispose": supports_dispose,
}
"""The check of each optional hook of the table (a test keeps the two in step)."""


def supports(engine: object, name: str) -> TypeGuard[Any]:
    """True when `engine` implements the optional lifecycle hook `name` (snake_case).

    Kept for callers that name a hook; typed code uses the ``supports_<hook>`` check of the capability.

    Raises:
        ValueError: `name` is not an optional hook of the table.
    """
    if hook(name).required:
        raise ValueError(f"{name!r} is a required hook; known optional: {', '.join(OPTIONAL_HOOKS)}")
    return _CHECKS[name](engine)
