"""The one table of the engine's lifecycle hooks; the registry's wrappers and the host derive from it.

Each :class:`Hook` names a hook in Python (``after_turn``) and on the wire (``afterTurn``), says which
host-added keys a strict engine may reject (the compat wrapper retries the call without them), what
a quarantined engine's call answers when the default engine lacks the hook, whether a failure
re-raises instead of falling back, and which host capability the call needs.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from pydantic import BaseModel

from openclaw_ctx.contract.params import (
    AfterTurnParams,
    AssembleParams,
    BootstrapParams,
    BootstrapResult,
    CompactParams,
    HostCapability,
    IngestBatchParams,
    IngestBatchResult,
    IngestParams,
    IngestResult,
    MaintainParams,
    MaintainResult,
    PrepareSubagentSpawnParams,
    SubagentEndedParams,
)
from openclaw_ctx.contract.turns import CommitTurnParams

__all__ = [
    "DOWNGRADED_REASON",
    "HOOKS",
    "HOST_PARAMS",
    "OPTIONAL_HOOKS",
    "REQUIRED_HOOKS",
    "Hook",
    "hook",
]

DOWNGRADED_REASON = "context engine downgraded to legacy"

# OpenClaw 2026.9's CONTEXT_ENGINE_HOST_PARAMS (snake_case): the keys the host adds to a hook's params,
# withheld from an engine whose info.accepted_host_params leaves them out.
HOST_PARAMS = frozenset(
    {"session_key", "prompt", "runtime_settings", "session_target", "runtime_context", "abort_signal"}
)
# Per OpenClaw's compat wrapper: the keys the host adds to session-scoped hooks.
_SESSION_KEYS = frozenset({"session_key", "runtime_settings", "session_target", "runtime_context", "abort_signal"})


@dataclass(frozen=True)
class Hook:
    """One lifecycle hook of a context engine."""

    name: str
    """Python name (``after_turn``)."""
    wire: str
    """OpenClaw's name (``afterTurn``), used in quarantine records and logs."""
    required: bool = False
    """Part of the required surface (``ingest``, ``assemble``, ``compact``) rather than optional."""
    guarded: bool = True
    """Whether a failure quarantines the engine (``dispose`` is deliberately not guarded)."""
    host_keys: frozenset[str] = frozenset()
    """Host-added keys (snake_case) a strict engine may reject; the call is retried without them."""
    fallback: Callable[[], object] | None = None
    """The downgraded answer when the default engine has no such hook (None: the default must have it)."""
    reraises: bool = False
    """A failure quarantines the engine and re-raises instead of answering from the default engine."""
    capability: HostCapability | None = None
    """The host capability the call needs, when an engine can require it of the host."""
    params: type[BaseModel] | None = None
    """The hook's one params model (its camelCase wire form is what ``serve`` validates); None: no params."""


def _nothing() -> None:
    return None


def _maintenance_downgraded() -> MaintainResult:
    return MaintainResult(reason=DOWNGRADED_REASON)


HOOKS: tuple[Hook, ...] = (
    Hook(
        "bootstrap",
        "bootstrap",
        params=BootstrapParams,
        host_keys=_SESSION_KEYS,
        fallback=lambda: BootstrapResult(bootstrapped=False, reason=DOWNGRADED_REASON),
        capability="bootstrap",
    ),
    Hook(
        "ingest",
        "ingest",
        params=IngestParams,
        required=True,
        host_keys=frozenset({"session_key"}),
        fallback=lambda: IngestResult(ingested=False),
    ),
    Hook(
        "ingest_batch",
        "ingestBatch",
        params=IngestBatchParams,
        host_keys=frozenset({"session_key"}),
        fallback=lambda: IngestBatchResult(ingested_count=0),
    ),
    Hook(
        "assemble",
        "assemble",
        params=AssembleParams,
        required=True,
        host_keys=frozenset({"session_key", "prompt", "runtime_settings", "runtime_context", "abort_signal"}),
        capability="assemble-before-prompt",
    ),
    # A turn that cannot be committed must not be reported written: the failure re-raises (the host
    # retries it; the advancement key makes the retry safe).
    Hook("commit_turn", "commitTurn", host_keys=_SESSION_KEYS, reraises=True, params=CommitTurnParams),
    Hook(
        "after_turn",
        "afterTurn",
        host_keys=_SESSION_KEYS,
        fallback=_nothing,
        capability="after-turn",
        params=AfterTurnParams,
    ),
    Hook(
        "maintain",
        "maintain",
        host_keys=_SESSION_KEYS,
        fallback=_maintenance_downgraded,
        capability="maintain",
        params=MaintainParams,
    ),
    Hook(
        "compact",
        "compact",
        required=True,
        host_keys=_SESSION_KEYS,
        reraises=True,
        capability="compact",
        params=CompactParams,
    ),
    Hook(
        "prepare_subagent_spawn",
        "prepareSubagentSpawn",
        fallback=_nothing,
        reraises=True,
        params=PrepareSubagentSpawnParams,
    ),
    Hook("on_subagent_ended", "onSubagentEnded", fallback=_nothing, params=SubagentEndedParams),
    Hook("dispose", "dispose", guarded=False),
)
"""Every lifecycle hook, in OpenClaw's order of a session's life."""

REQUIRED_HOOKS = tuple(h.name for h in HOOKS if h.required)
OPTIONAL_HOOKS = tuple(h.name for h in HOOKS if not h.required)

_BY_NAME = {h.name: h for h in HOOKS}


def hook(name: str) -> Hook:
    """The table entry of hook `name` (snake_case).

    Raises:
        ValueError: no hook has that name.
    """
    try:
        return _BY_NAME[name]
    except KeyError:
        raise ValueError(f"unknown hook {name!r}; known: {', '.join(_BY_NAME)}") from None
