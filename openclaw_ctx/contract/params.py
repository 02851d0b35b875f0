"""Every parameter and result object of the ContextEngine contract, and the types they share.

Parameter and result objects mirror OpenClaw's TypeScript param bags. Python code uses snake_case
fields; ``model_dump(by_alias=True)`` gives the camelCase JSON shape. Which keys a caller actually set
matters (a strict engine may reject keys the host added), so it is tracked by pydantic's
``model_fields_set`` and :func:`without_keys` rebuilds a params object with some keys removed.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence
from typing import Annotated, Any, Literal

from pydantic import Field, PlainSerializer, PlainValidator

from openclaw_ctx.contract.targets import SessionTarget, TranscriptSemantics
from openclaw_ctx.contract.wire import WireParams, WireResult, without_keys
from openclaw_ctx.errors import AbortError
from openclaw_ctx.messages import AgentMessage, parse_message, to_wire

__all__ = [
    "AbortSignal",
    "AfterTurnParams",
    "AssembleParams",
    "AssembleResult",
    "BootstrapParams",
    "BootstrapResult",
    "CompactParams",
    "CompactResult",
    "CompactResultDetail",
    "CompactionTarget",
    "ContextProjection",
    "EngineInfo",
    "HostCapability",
    "HostRequirements",
    "IngestBatchParams",
    "IngestBatchResult",
    "IngestParams",
    "IngestResult",
    "MaintainParams",
    "MaintainResult",
    "MessageList",
    "Operation",
    "PrepareSubagentSpawnParams",
    "PromptAuthority",
    "SubagentEndReason",
    "SubagentEndedParams",
    "SubagentSpawnPreparation",
    "without_keys",
]

Operation = Literal["agent-run", "manual-compact", "subagent-spawn"]
HostCapability = Literal[
    "bootstrap",
    "assemble-before-prompt",
    "after-turn",
    "maintain",
    "compact",
    "runtime-llm-complete",
    "thread-bootstrap-projection",
    "reference-context",
]
PromptAuthority = Literal["assembled", "preassembly_may_overflow"]
SubagentEndReason = Literal["deleted", "completed", "swept", "released"]
CompactionTarget = Literal["budget", "threshold"]


def _message_list(value: Any) -> list[AgentMessage]:
    # Keep the caller's list object when it already holds messages: legacy assemble must hand back
    # the very list it was given, and pydantic's list validation would copy it.
    if isinstance(value, list) and all(hasattr(m, "role") and hasattr(m, "model_fields_set") for m in value):
        return value
    if isinstance(value, Sequence) and not isinstance(value, str | bytes):
        return [parse_message(m, where=f"messages[{i}]") for i, m in enumerate(value)]
    raise ValueError(f"expected a list of messages, got {type(value).__name__}")


def _dump_messages(value: list[AgentMessage]) -> list[dict[str, Any]]:
    return [to_wire(m) for m in value]


MessageList = Annotated[
    list[AgentMessage],
    PlainValidator(_message_list, json_schema_input_type=list[dict[str, Any]]),
    # Serialise as OpenClaw's wire JSON (the union's own serializer cannot see through PlainValidator).
    PlainSerializer(_dump_messages, return_type=list[dict[str, Any]]),
]


class AbortSignal:
    """A cancellation flag an engine should honour in long operations (AbortSignal in TypeScript)."""

    def __init__(self) -> None:
        self._event = asyncio.Event()
        self.reason: BaseException | None = None

    @property
    def aborted(self) -> bool:
        """True once :meth:`abort` was called."""
        return self._event.is_set()

    def abort(self, reason: BaseException | str | None = None) -> None:
        """Mark the signal aborted, recording why."""
        if isinstance(reason, BaseException):
            self.reason = reason
        else:
            self.reason = AbortError(reason or "operation aborted")
        self._event.set()

    def raise_if_aborted(self) -> None:
        """Raise the abort reason if the signal is aborted."""
        if self.aborted:
            raise self.reason or AbortError("operation aborted")

    async def wait(self) -> None:
        """Return once the signal is aborted."""
        await self._event.wait()


# --- info and host requirements -------------------------------------------------------------


class HostRequirements(WireResult):
    """Capabilities an operation needs from the host; unmet ones fail the run closed."""

    required_capabilities: list[HostCapability]
    unsupported_message: str | None = None


class EngineInfo(WireResult):
    """What an engine says about itself."""

    id: str
    """Engine id; may differ from the id it was registered under (OpenClaw #66601)."""
    name: str
    version: str | None = None
    owns_compaction: bool | None = None
    """True: the host disables its own auto-compaction and pre-prompt precheck for this engine."""
    turn_maintenance_mode: Literal["foreground", "background"] | None = None
    host_requirements: dict[Operation, HostRequirements] | None = None
    accepted_host_params: list[str] | None = None
    """Host-added keys (camelCase) the engine accepts; a host withholds the others. None: all of them."""
    transcript_semantics: TranscriptSemantics | None = None
    """Declared to take part in OpenClaw 2026.9's durable turns (``commitTurn``)."""


# --- ingest / bootstrap ---------------------------------------------------------------------


class IngestParams(WireParams):
    """One new message for a session."""

    session_id: str
    session_key: str | None = None
    message: AgentMessage
    is_heartbeat: bool = False
    entry_id: str | None = None
    """Transcript entry id of the message, the idempotency key (never a content hash)."""


class IngestResult(WireResult):
    """`ingested` is False for a duplicate or a no-op."""

    ingested: bool


class IngestBatchParams(WireParams):
    """A completed turn's messages, ingested together once after the run."""

    session_id: str
    session_key: str | None = None
    messages: MessageList
    is_heartbeat: bool = False
    entry_ids: list[str | None] | None = None


class IngestBatchResult(WireResult):
    """How many of the batch's messages were new."""

    ingested_count: int


class BootstrapParams(WireParams):
    """Sent the first time an engine sees a session."""

    session_id: str
    session_key: str | None = None
    session_target: SessionTarget | None = None
    session_file: str | None = None
    runtime_settings: Any = None
    runtime_context: dict[str, Any] | None = None


class BootstrapResult(WireResult):
    """Whether the engine initialised state for the session."""

    bootstrapped: bool
    imported_messages: int | None = None
    reason: str | None = None


# --- assemble -------------------------------------------------------------------------------


class AssembleParams(WireParams):
    """Input of the pre-prompt assembly."""

    session_id: str
    session_key: str | None = None
    messages: MessageList
    """The pipeline's messages for this run (the session's current context)."""
    token_budget: int | None = None
    available_tools: frozenset[str] | None = None
    citations_mode: Literal["auto", "on", "off"] | None = None
    model: str | None = None
    prompt: str | None = None
    runtime_settings: Any = None
    runtime_context: dict[str, Any] | None = None
    abort_signal: AbortSignal | None = None


class ContextProjection(WireResult):
    """Projection hints for persistent-thread backends."""

    mode: Literal["per_turn", "thread_bootstrap"]
    epoch: str | None = None
    fingerprint: str | None = None


class AssembleResult(WireResult):
    """What the model sees."""

    messages: MessageList
    estimated_tokens: int = Field(ge=0)
    """The engine's estimate of the assembled context; 0 means 'host, estimate it yourself'."""
    system_prompt_addition: str | None = None
    prompt_authority: PromptAuthority = "assembled"
    context_projection: ContextProjection | None = None


# --- compact --------------------------------------------------------------------------------


class CompactParams(WireParams):
    """A compaction request (/compact, overflow recovery, budget or threshold compaction)."""

    session_id: str
    session_key: str | None = None
    agent_id: str | None = None
    session_target: SessionTarget | None = None
    session_file: str | None = None
    """Deprecated by OpenClaw 2026.9 (it now carries the session key); kept for older hosts."""
    token_budget: int | None = None
    force: bool = False
    force_reason: Literal["manual", "preflight_required"] | None = None
    current_token_count: int | None = None
    compaction_target: CompactionTarget | None = None
    custom_instructions: str | None = None
    runtime_settings: Any = None
    runtime_context: dict[str, Any] | None = None
    abort_signal: AbortSignal | None = None


class CompactResultDetail(WireResult):
    """What a compaction did; `session_id`/`session_file` name the successor after rotation."""

    summary: str | None = None
    first_kept_entry_id: str | None = None
    tokens_before: int
    tokens_after: int | None = None
    details: Any = None
    session_id: str | None = None
    session_file: str | None = None
    session_target: SessionTarget | None = None
    """The successor session, as OpenClaw 2026.9 reads it."""


class CompactResult(WireResult):
    """`ok` false = failed; `compacted` false = nothing done (with `reason`)."""

    ok: bool
    compacted: bool
    reason: str | None = None
    result: CompactResultDetail | None = None

    def bound_to(self, target: SessionTarget) -> CompactResult:
        """This result for a host that owns the transcript (OpenClaw 2026.9, which sent `target`): the
        rotation stays inside our store, so the successor is the host's own binding, unchanged. The host
        would otherwise adopt our successor's id as its session (and rejects a bare successor file);
        our successor's id moves to ``details.storeSessionId``."""
        if self.result is None:
            return self
        detail = self.result
        details = detail.details if isinstance(detail.details, dict) else {}
        if detail.session_id:
            details = {**details, "storeSessionId": detail.session_id}
        bound = detail.model_copy(
            update={"session_id": None, "session_file": None, "session_target": target, "details": details or None}
        )
        return self.model_copy(update={"result": bound})


# --- maintain -------------------------------------------------------------------------------


class MaintainParams(WireParams):
    """Sent for transcript maintenance (before and after a turn, after bootstrap or a compaction)."""

    session_id: str
    session_key: str | None = None
    session_file: str | None = None
    reason: Literal["bootstrap", "turn", "compaction"] | None = None
    session_target: SessionTarget | None = None
    runtime_settings: Any = None
    runtime_context: dict[str, Any] | None = None
    abort_signal: AbortSignal | None = None


class MaintainResult(WireResult):
    """What maintenance did to the host's transcript: ``changed`` only when entries were rewritten."""

    changed: bool = False
    bytes_freed: int = 0
    rewritten_entries: int = 0
    reason: str | None = None


# --- afterTurn and sub-agents ---------------------------------------------------------------


class AfterTurnParams(WireParams):
    """Sent after a run, with the whole message snapshot of the turn."""

    session_id: str
    session_key: str | None = None
    session_target: SessionTarget | None = None
    session_file: str | None = None
    messages: MessageList
    pre_prompt_message_count: int = Field(ge=0)
    auto_compaction_summary: str | None = None
    is_heartbeat: bool = False
    token_budget: int | None = None
    runtime_settings: Any = None
    runtime_context: dict[str, Any] | None = None


class PrepareSubagentSpawnParams(WireParams):
    """Sent before a child run starts."""

    parent_session_key: str
    child_session_key: str
    context_mode: Literal["isolated", "fork"] | None = None
    parent_session_id: str | None = None
    parent_session_file: str | None = None
    child_session_id: str | None = None
    child_session_file: str | None = None
    ttl_ms: int | None = None


class SubagentSpawnPreparation:
    """Returned by prepare_subagent_spawn; the host calls `rollback` if the spawn then fails."""

    def __init__(self, rollback: Callable[[], Awaitable[None] | None]) -> None:
        self._rollback = rollback

    async def rollback(self) -> None:
        """Undo the preparation."""
        result = self._rollback()
        if result is not None:
            await result


class SubagentEndedParams(WireParams):
    """Sent when a sub-agent session completes or is cleaned up."""

    child_session_key: str
    reason: SubagentEndReason
