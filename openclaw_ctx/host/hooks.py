"""The host's side of every engine hook: each typed *Params built once, OpenClaw's failure policy in one place.

OpenClaw's embedded runner only warns when bootstrap, assemble, turn finalization or the engine's
tools fail, and the turn goes on (assemble falls back to the pipeline messages); a throwing or
timed-out ``compact`` is a failed compaction, not a crashed turn. Sub-agent hooks and ``dispose``
raise to the caller. Which hooks an engine has is asked of its declared capabilities.
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import TYPE_CHECKING, Any, Literal

from openclaw_ctx.contract import (
    AfterTurnParams,
    AssembleParams,
    AssembleResult,
    BootstrapParams,
    CommitTurnParams,
    CompactParams,
    CompactResult,
    ContextEngine,
    IngestBatchParams,
    IngestParams,
    MaintainParams,
    PrepareSubagentSpawnParams,
    SpawnCallback,
    SubagentEndedParams,
    SubagentEndReason,
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
from openclaw_ctx.host.scheduler import Drain, drain_deferred
from openclaw_ctx.messages import AgentMessage, UserMessage, flatten_text
from openclaw_ctx.registry import is_quarantined
from openclaw_ctx.store import repo

if TYPE_CHECKING:
    from openclaw_ctx.host.runtime import Runtime

__all__ = ["EngineHooks"]

log = logging.getLogger("openclaw_ctx.host.runtime")


class EngineHooks:
    """Calls the runtime's engine for the runtime, with the runtime's budget and runtimeSettings."""

    def __init__(self, runtime: Runtime) -> None:
        self._runtime = runtime
        self._bootstrapped: set[tuple[str, str]] = set()

    @property
    def _engine(self) -> ContextEngine:
        return self._runtime.engine

    async def bootstrap_once(self, session: repo.SessionRow) -> None:
        """``bootstrap`` the first time the engine sees the session (remembered in the engine's state)."""
        engine = self._engine
        if not supports_bootstrap(engine):
            return
        engine_id = self._engine.info.id
        mark = f"bootstrapped:{session.session_id}"
        if (engine_id, mark) in self._bootstrapped:
            return
        sessions = self._runtime.sessions
        if await sessions.engine_state(engine_id, session.session_key, mark):
            self._bootstrapped.add((engine_id, mark))
            return
        try:
            await engine.bootstrap(
                BootstrapParams(
                    session_id=session.session_id,
                    session_key=session.session_key,
                    session_file=session.session_file,
                    runtime_settings=self._runtime.runtime_settings(),
                )
            )
        except Exception as exc:  # OpenClaw only warns: a failed bootstrap never blocks the turn
            log.warning("context engine bootstrap failed for %s: %s", session.session_key, exc)
            return
        await sessions.set_engine_state(engine_id, session.session_key, mark, True)
        self._bootstrapped.add((engine_id, mark))

    async def maintain(self, session: repo.SessionRow) -> None:
        """``maintain``, as OpenClaw 2026.9 calls it before and after every turn; a failure only warns.

        Compaction debt is not paid here: the runtime pays it in the background after the reply
        (:meth:`deferred_compaction`), so deferred execution is not allowed.
        """
        engine = self._engine
        if not supports_maintain(engine) or is_quarantined(engine):
            return
        try:
            await engine.maintain(
                MaintainParams(
                    session_id=session.session_id,
                    session_key=session.session_key,
                    session_file=session.session_file,
                    reason="turn",
                    runtime_settings=self._runtime.runtime_settings(),
                    runtime_context={"allowDeferredCompactionExecution": False},
                )
            )
        except Exception as exc:
            log.warning("context engine maintain failed for %s: %s", session.session_key, exc)

    async def assemble(
        self, session: repo.SessionRow, history: list[AgentMessage], user: UserMessage | None, budget: int
    ) -> tuple[AssembleResult, bool]:
        """The engine's context for the run, and whether it came from the engine (not the pipeline)."""
        runtime = self._runtime
        try:
            result = await self._engine.assemble(
                AssembleParams(
                    session_id=session.session_id,
                    session_key=session.session_key,
                    messages=history,
                    token_budget=max(1, budget),
                    available_tools=frozenset(t.name for t in runtime.tool_specs),
                    model=runtime.model.name if runtime.model else None,
                    prompt=flatten_text(user) if user is not None else None,
                    runtime_settings=runtime.runtime_settings(),
                )
            )
            return result, True
        except Exception as exc:
            log.warning("context engine assemble failed, using pipeline messages: %s", exc)
            return AssembleResult(messages=history, estimated_tokens=0), False

    def finalize_reads_history(self) -> bool:
        """Whether :meth:`finalize_turn` needs the pre-turn history (``afterTurn`` does; the others do not)."""
        return not supports_commit_turn(self._engine) and supports_after_turn(self._engine)

    async def finalize_turn(
        self,
        session: repo.SessionRow,
        history: list[AgentMessage],
        new_messages: list[AgentMessage],
        entry_ids: list[str | None],
        is_heartbeat: bool,
    ) -> None:
        """``commitTurn`` (OpenClaw 2026.9's durable turn), else ``afterTurn``, ``ingestBatch`` or ``ingest``
        one by one; a failure never loses the stored turn."""
        engine = self._engine
        session_id, session_key = session.session_id, session.session_key
        try:
            if supports_commit_turn(engine) and new_messages:
                await engine.commit_turn(
                    CommitTurnParams(
                        # The turn's first entry names it: a turn replayed with the same ids is a duplicate.
                        advancement_key=f"turn:{entry_ids[0] or session_id}",
                        session_id=session_id,
                        session_key=session_key,
                        messages=new_messages,
                        entry_ids=entry_ids,
                        is_heartbeat=is_heartbeat,
                        token_budget=self._runtime.prompt_budget,
                        runtime_settings=self._runtime.runtime_settings(),
                    )
                )
            elif supports_after_turn(engine):
                await engine.after_turn(
                    AfterTurnParams(
                        session_id=session_id,
                        session_key=session_key,
                        session_file=session.session_file,
                        messages=[*history, *new_messages],
                        pre_prompt_message_count=len(history),
                        is_heartbeat=is_heartbeat,
                        token_budget=self._runtime.prompt_budget,
                        runtime_settings=self._runtime.runtime_settings(),
                    )
                )
            elif supports_ingest_batch(engine):
                await engine.ingest_batch(
                    IngestBatchParams(
                        session_id=session_id, session_key=session_key, messages=new_messages, is_heartbeat=is_heartbeat
                    )
                )
            else:
                for message in new_messages:
                    params = IngestParams(
                        session_id=session_id, session_key=session_key, message=message, is_heartbeat=is_heartbeat
                    )
                    await engine.ingest(params)
        except Exception as exc:
            log.warning("context engine turn finalization failed for %s: %s", session_key, exc)

    async def compact(
        self,
        session: repo.SessionRow,
        *,
        trigger: Literal["manual", "overflow", "budget"],
        target: str,
        force: bool,
        instructions: str | None = None,
        current: int | None = None,
    ) -> CompactResult:
        """One compaction through the engine, under the safety timeout; failures come back as ``ok=False``."""
        runtime = self._runtime
        if current is None:
            current = await runtime.sessions.context_tokens(session)
        params = self._compact_params(session, trigger, target, force, instructions, current)
        started = time.perf_counter()
        try:
            async with asyncio.timeout(runtime.compaction_timeout_s):
                result = await self._engine.compact(params)
        except TimeoutError:
            result = CompactResult(ok=False, compacted=False, reason=f"timed out after {runtime.compaction_timeout_s}s")
        except Exception as exc:  # a throwing compact() is a failed compaction, not a crashed turn
            result = CompactResult(ok=False, compacted=False, reason=f"{type(exc).__name__}: {exc}")
        log.info(
            "compaction on %s (%s): ok=%s compacted=%s in %.0f ms",
            session.session_key,
            trigger,
            result.ok,
            result.compacted,
            (time.perf_counter() - started) * 1000,
        )
        return result

    def _compact_params(
        self, session: repo.SessionRow, trigger: str, target: str, force: bool, instructions: str | None, current: int
    ) -> CompactParams:
        params: dict[str, Any] = {
            "session_id": session.session_id,
            "session_key": session.session_key,
            "session_file": session.session_file,
            "token_budget": self._runtime.prompt_budget,
            "force": force,
            "current_token_count": current,
            "compaction_target": target,
            "custom_instructions": instructions,
            "runtime_context": {"trigger": trigger, "currentTokenCount": current},
        }
        # Only keys the host means are set: a strict engine sees exactly what OpenClaw would send.
        if force and trigger == "manual":
            params["force_reason"] = "manual"
        if self._runtime.owns_compaction:
            params["runtime_settings"] = self._runtime.runtime_settings()
        return CompactParams(**params)

    def deferred_compaction(self, key: str, turn_number: int | None) -> Drain | None:
        """An owning engine's compaction debt, to pay in the background after the reply (#313: 3.5–29 s a pass)."""
        engine = self._engine
        if not supports_deferred_compaction(engine) or is_quarantined(engine):
            return None
        sessions = self._runtime.sessions

        async def compacted() -> None:
            # The turn whose debt this was is the one that compacted (its `turns` row says so).
            if turn_number is not None:
                await sessions.mark_compacted(key, turn_number)

        timeout = self._runtime.compaction_timeout_s
        return lambda: drain_deferred(key, engine.drain_debt, timeout_s=timeout, on_compacted=compacted)

    def tools(self, session_key: str, spawn: SpawnCallback) -> list[ToolSpec]:
        """The engine's own tools for the session (none once it is quarantined, or if they fail)."""
        engine = self._engine
        if not supports_tools(engine) or is_quarantined(engine):
            return []
        try:
            # An engine that delegates to sub-agents (lcm_expand_query) runs them through this host.
            if supports_spawning_tools(engine):
                return engine.tools(session_key, spawn=spawn)
            return engine.tools(session_key)
        except Exception as exc:
            log.warning("context engine tools unavailable for %s: %s", session_key, exc)
            return []

    async def prepare_subagent_spawn(
        self,
        parent_session_key: str,
        child_session_key: str,
        context_mode: Literal["isolated", "fork"],
        ttl_ms: int | None,
    ) -> SubagentSpawnPreparation | None:
        """The engine's preparation of a child run (None when the engine has no such hook)."""
        engine = self._engine
        if not supports_subagent_spawn(engine):
            return None
        parent = await self._runtime.sessions.active(parent_session_key)
        return await engine.prepare_subagent_spawn(
            PrepareSubagentSpawnParams(
                parent_session_key=parent_session_key,
                child_session_key=child_session_key,
                context_mode=context_mode,
                parent_session_id=parent.session_id,
                parent_session_file=parent.session_file,
                ttl_ms=ttl_ms,
            )
        )

    async def subagent_ended(self, child_session_key: str, reason: SubagentEndReason) -> None:
        """Tell the engine a sub-agent session ended."""
        engine = self._engine
        if supports_subagent_ended(engine):
            await engine.on_subagent_ended(SubagentEndedParams(child_session_key=child_session_key, reason=reason))

    async def dispose(self) -> None:
        """Release the engine."""
        engine = self._engine
        if supports_dispose(engine):
            await engine.dispose()
