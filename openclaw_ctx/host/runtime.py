"""The host runtime: OpenClaw's embedded runner, as a library any agent loop can use.

One turn:
  resolve the engine (once per Runtime) → `bootstrap` the first time the engine sees the session →
  `assemble` (the pipeline messages if it throws) → prepend `systemPromptAddition` → pre-prompt
  overflow precheck (skipped for engines that own compaction unless `preassembly_may_overflow`) →
  the model/tool loop → persist every new message (the host persists, whatever the engine) →
  `afterTurn`, or `ingestBatch`, or `ingest` one by one → built-in auto-compaction for engines that
  do not own compaction → an owning engine's deferred compaction debt, paid in the background after
  the reply (the next turn on the key waits for it; `settle()` and `dispose()` await it).

Overflow recovery: up to 3 compactions through the engine's `compact()`, then one truncation of
oversized tool results, then ContextOverflowError ("… Try /reset …"). A failed turn (overflow, or a
model call that raised) still stores the prompt and any partial reply before the error goes up.
Turns on one session key are serialised; different keys run concurrently.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
import secrets
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, TypeVar

from openclaw_ctx.config import CompactionSettings, OpenClawConfig
from openclaw_ctx.context import pipeline_messages
from openclaw_ctx.contract import (
    AfterTurnParams,
    AssembleParams,
    AssembleResult,
    BootstrapParams,
    CompactParams,
    CompactResult,
    ContextEngine,
    EngineContext,
    IngestBatchParams,
    IngestParams,
    PrepareSubagentSpawnParams,
    SubagentEndedParams,
    SubagentEndReason,
    supports,
)
from openclaw_ctx.contract.host import EMBEDDED_HOST, HostInfo, assert_host_support
from openclaw_ctx.contract.model import Model, ModelRequest, ToolExecutor, ToolSpec
from openclaw_ctx.contract.settings import RuntimeSettings, build_runtime_settings
from openclaw_ctx.errors import ContextOverflowError
from openclaw_ctx.host.precheck import estimate_text_tokens, precheck, reducible_tool_chars, truncate_tool_results
from openclaw_ctx.messages import (
    AgentMessage,
    AssistantMessage,
    TextContent,
    ToolCall,
    ToolResultMessage,
    UserMessage,
    flatten_text,
)
from openclaw_ctx.registry import ResolvedEngine, resolve_context_engine
from openclaw_ctx.store import repo
from openclaw_ctx.store.store import Store
from openclaw_ctx.summarize.base import Summarizer

__all__ = ["OVERFLOW_MESSAGE", "Runtime", "TurnResult"]

log = logging.getLogger(__name__)
T = TypeVar("T")

MAX_OVERFLOW_COMPACTIONS = 3
MAX_TOOL_STEPS = 64
OVERFLOW_MESSAGE = (
    "Context overflow: prompt too large for the model. Try /reset (or /new) to start a fresh session, "
    "or use a larger-context model."
)
EntryIds = Callable[[AgentMessage], str | None]


@dataclass
class TurnResult:
    """What one turn did."""

    session_key: str
    session_id: str
    new_messages: list[AgentMessage]
    assembled_tokens: int
    engine_id: str
    compactions: list[CompactResult] = field(default_factory=list)
    overflow_recoveries: int = 0
    system_prompt: str = ""
    turn_number: int | None = None
    """The key's turn number in the `turns` table (None when the turn stored nothing new)."""


def new_entry_id() -> str:
    """An 8-hex transcript entry id, as OpenClaw writes them."""
    return secrets.token_hex(4)


class Runtime:
    """Runs turns for session keys against one Store and one engine slot.

    Create with :meth:`create`. The engine is resolved once per Runtime (a gateway process in
    OpenClaw's terms); a failing plugin engine is quarantined and turns continue on legacy.
    """

    def __init__(
        self,
        store: Store,
        resolved: ResolvedEngine,
        *,
        config: OpenClawConfig,
        model: Model,
        tools: ToolExecutor | None = None,
        tool_specs: Sequence[ToolSpec] = (),
        context_window: int | None = None,
        max_output_tokens: int | None = None,
        system_prompt: str = "You are a helpful coding agent.",
        host: HostInfo = EMBEDDED_HOST,
        compaction_timeout_s: float | None = None,
    ) -> None:
        self.store = store
        self.resolved = resolved
        self.config = config
        self.model = model
        self.tools = tools
        self.tool_specs = list(tool_specs)
        self.context_window = context_window or model.context_window
        self.max_output_tokens = max_output_tokens
        self.system_prompt = system_prompt
        self.host = host
        self.settings = _scaled_settings(config.agents.defaults.compaction, self.context_window)
        self.compaction_timeout_s = compaction_timeout_s or self.settings.timeout_seconds
        self._locks: dict[str, asyncio.Lock] = {}
        # Deferred compaction paid after the reply, one task per key at most (see `settle`).
        self._maintenance: dict[str, asyncio.Task[CompactResult | None]] = {}
        self._bootstrapped: set[tuple[str, str]] = set()
        self._tools_take_spawn: bool | None = None

    @classmethod
    async def create(
        cls,
        store: Store,
        *,
        config: OpenClawConfig | None = None,
        model: Model,
        summarizer: Summarizer | None = None,
        agent_dir: str | None = None,
        workspace_dir: str | None = None,
        **kwargs: Any,
    ) -> Runtime:
        """Resolve the slot's engine with the store in its factory context, then build the runtime.

        Raises:
            HostRequirementError: the engine needs a capability this host lacks (fails closed, before any work).
        """
        config = config or OpenClawConfig()
        engine_id, _source = config.slot_engine()
        entry = config.entry(engine_id)
        ctx = EngineContext(
            config=entry.config if entry else None,
            agent_dir=agent_dir,
            workspace_dir=workspace_dir,
            store=store,
            openclaw_config=config,
            summarizer=summarizer,
        )
        resolved = await resolve_context_engine(config, ctx)
        host: HostInfo = kwargs.get("host", EMBEDDED_HOST)
        assert_host_support(resolved.engine.info, "agent-run", host)
        return cls(store, resolved, config=config, model=model, **kwargs)

    @property
    def engine(self) -> ContextEngine:
        """The (wrapped) engine turns run on."""
        return self.resolved.engine

    @property
    def owns_compaction(self) -> bool:
        """Whether the active engine manages its own compaction and admission."""
        return bool(self.engine.info.owns_compaction)

    def runtime_settings(self) -> RuntimeSettings:
        """The read-only runtimeSettings snapshot for this runtime's hooks."""
        return build_runtime_settings(
            selected_engine_id=self.resolved.engine_id,
            selection_source=self.resolved.source,
            requested_model=self.model.name,
            resolved_model=self.model.name,
            provider=self.model.provider,
            execution_host_id=self.host.id,
            execution_host_label=self.host.label,
            prompt_token_budget=self.prompt_budget,
            max_output_tokens=self.max_output_tokens,
        )

    @property
    def prompt_budget(self) -> int:
        """Tokens the prompt may use: window minus the compaction reserve."""
        return max(1, self.context_window - self.settings.effective_reserve())

    async def session(self, session_key: str) -> repo.SessionRow:
        """The key's active session, created on first use."""
        return await self._session(session_key)

    async def new_session(self, session_key: str, *, reason: str = "reset") -> repo.SessionRow:
        """`/new` and `/reset`: archive the key's active session and start a fresh, empty one.

        As in OpenClaw the key stays and the session id changes, so the model starts from nothing;
        the old session's messages and summaries stay in the store and in recall across the key.
        """
        async with self._lock(session_key), self.store.transaction() as conn:
            return await repo.start_fresh_session(conn, session_key, reason=reason, engine_id=self.engine.info.id)

    def _lock(self, session_key: str) -> asyncio.Lock:
        return self._locks.setdefault(session_key, asyncio.Lock())

    # --- a turn ---------------------------------------------------------------------------------

    async def run_turn(
        self,
        session_key: str,
        prompt: str | UserMessage,
        *,
        entry_ids: EntryIds | None = None,
        is_heartbeat: bool = False,
    ) -> TurnResult:
        """Run one user turn on `session_key` and persist everything it produced."""
        user = prompt if isinstance(prompt, UserMessage) else UserMessage(content=prompt, timestamp=_now_ms())
        lock = self._lock(session_key)
        await lock.acquire()
        handed_over = False
        try:
            result = await self._run_turn(session_key, user, entry_ids or (lambda _m: None), is_heartbeat)
            # The key's lock passes to the deferred compaction, which releases it when done: the next
            # turn on the key (or /compact, /new) waits for it, the reply does not.
            handed_over = self._schedule_drain(session_key, result.turn_number, lock)
            return result
        finally:
            if not handed_over:
                lock.release()

    async def _run_turn(self, key: str, user: UserMessage, entry_ids: EntryIds, is_heartbeat: bool) -> TurnResult:
        session = await self._session(key)
        # Every compaction rotates the session, whoever triggers it (overflow recovery, an engine's
        # assemble or afterTurn, auto compaction, deferred debt): a changed id means the turn compacted.
        started_in = session.session_id
        await self._bootstrap_once(session)
        compactions: list[CompactResult] = []
        recoveries = 0
        truncated = False
        turn: list[AgentMessage] = []
        while True:
            session = await self._session(key)
            history, known = await self._history(session)
            # The engine fits history into what the in-flight turn (this prompt, and the replies and
            # tool results of an overflowed attempt) leaves of the prompt budget.
            # Never below a quarter of the window: an oversized tool result is the truncation's to
            # shrink, not a reason for the engine to compact the whole history away.
            in_flight = _estimate([user, *turn], {}, "")
            budget = max(self.prompt_budget - in_flight, self.prompt_budget // 4)
            assembled, assembled_ok = await self._assemble(session, history, user, budget)
            system_prompt = _join_prompt(assembled.system_prompt_addition, self.system_prompt)
            outgoing = list(assembled.messages) + [user] + turn
            if truncated:
                outgoing = truncate_tool_results(outgoing)
            estimate = _estimate(outgoing, known, system_prompt)
            if assembled.estimated_tokens:
                estimate = max(estimate, assembled.estimated_tokens + _estimate([user, *turn], known, system_prompt))
            try:
                if self._precheck_applies(assembled, assembled_ok):
                    self._run_precheck(assembled, history, known, outgoing, estimate, system_prompt)
                await self._model_loop(outgoing, turn, system_prompt, key)
                break
            except ContextOverflowError as exc:
                log.info("context overflow on %s: %s", key, exc.detail)
                if recoveries < MAX_OVERFLOW_COMPACTIONS:
                    recoveries += 1
                    result = await self._compact(session, trigger="overflow", target="budget", force=True)
                    compactions.append(result)
                    if result.ok and result.compacted and not _no_progress(result):
                        continue
                    recoveries = MAX_OVERFLOW_COMPACTIONS  # no progress: stop compacting, try truncation
                if not truncated:
                    truncated = True
                    continue
                await self._persist_failed(key, [user, *turn], entry_ids, is_heartbeat, estimate, started_in)
                raise ContextOverflowError(OVERFLOW_MESSAGE, kind="context_overflow") from exc
            except Exception:
                # A failed model call (provider down, key rejected) fails the turn the same way.
                await self._persist_failed(key, [user, *turn], entry_ids, is_heartbeat, estimate, started_in)
                raise
        session = await self._session(key)
        new_messages = [user, *turn]
        stats = _TurnStats(estimate, self.prompt_budget, session.session_id != started_in)
        number = await self._persist(session, new_messages, entry_ids, is_heartbeat, stats)
        await self._after_turn(session, history, new_messages, is_heartbeat)
        auto = await self._auto_compact(key)
        if auto is not None:
            compactions.append(auto)
        persisted_in = session.session_id
        session = await self._session(key)
        if number is not None and not stats.compacted and session.session_id != persisted_in:
            async with self.store.transaction() as conn:
                await repo.mark_turn_compacted(conn, key, number)
        return TurnResult(
            session_key=key,
            session_id=session.session_id,
            new_messages=new_messages,
            assembled_tokens=estimate,
            engine_id=self.engine.info.id,
            compactions=compactions,
            overflow_recoveries=recoveries,
            system_prompt=system_prompt,
            turn_number=number,
        )

    async def _session(self, key: str) -> repo.SessionRow:
        # Reads are cheap and concurrent; take the write lock only to create the key's first session.
        async with self.store.read() as conn:
            session = await repo.active_session(conn, key)
        if session is not None:
            return session
        async with self.store.transaction() as conn:
            return await repo.ensure_session(conn, key, engine_id=self.engine.info.id)

    async def _history(self, session: repo.SessionRow) -> tuple[list[AgentMessage], dict[int, int]]:
        async with self.store.read() as conn:
            entries = await repo.load_context(conn, session.session_id)
        messages = pipeline_messages(entries)
        # Stored counts keyed by object identity: the host's estimate never re-tokenizes history.
        known = {id(m): e.token_count for m, e in zip(messages, entries, strict=True)}
        return messages, known

    async def _bootstrap_once(self, session: repo.SessionRow) -> None:
        if not supports(self.engine, "bootstrap"):
            return
        engine_id = self.engine.info.id
        mark = f"bootstrapped:{session.session_id}"
        if (engine_id, mark) in self._bootstrapped:
            return
        async with self.store.read() as conn:
            if await repo.get_engine_state(conn, engine_id, session.session_key, mark):
                self._bootstrapped.add((engine_id, mark))
                return
        try:
            await self.engine.bootstrap(
                BootstrapParams(
                    session_id=session.session_id,
                    session_key=session.session_key,
                    session_file=session.session_file,
                    runtime_settings=self.runtime_settings(),
                )
            )
        except Exception as exc:  # OpenClaw only warns: a failed bootstrap never blocks the turn
            log.warning("context engine bootstrap failed for %s: %s", session.session_key, exc)
            return
        async with self.store.transaction() as conn:
            await repo.set_engine_state(conn, engine_id, session.session_key, mark, True)
        self._bootstrapped.add((engine_id, mark))

    async def _assemble(
        self, session: repo.SessionRow, history: list[AgentMessage], user: UserMessage, budget: int
    ) -> tuple[AssembleResult, bool]:
        try:
            result = await self.engine.assemble(
                AssembleParams(
                    session_id=session.session_id,
                    session_key=session.session_key,
                    messages=history,
                    token_budget=max(1, budget),
                    available_tools=frozenset(t.name for t in self.tool_specs),
                    model=self.model.name,
                    prompt=flatten_text(user),
                    runtime_settings=self.runtime_settings(),
                )
            )
            return result, True
        except Exception as exc:
            log.warning("context engine assemble failed, using pipeline messages: %s", exc)
            return AssembleResult(messages=history, estimated_tokens=0), False

    def _precheck_applies(self, assembled: AssembleResult, assembled_ok: bool) -> bool:
        if assembled.prompt_authority == "preassembly_may_overflow":
            return True
        return not (self.owns_compaction and assembled_ok)

    def _run_precheck(
        self,
        assembled: AssembleResult,
        history: list[AgentMessage],
        known: dict[int, int],
        outgoing: list[AgentMessage],
        estimate: int,
        system_prompt: str,
    ) -> None:
        if assembled.prompt_authority == "preassembly_may_overflow":
            estimate = max(estimate, _estimate(history, known, system_prompt))
        result = precheck(
            estimate,
            context_window=self.context_window,
            reserve_tokens=self.settings.effective_reserve(),
            reducible_chars=reducible_tool_chars(outgoing),
        )
        if result.route != "fits":
            raise ContextOverflowError("Context overflow: prompt too large for the model (precheck).")

    async def _model_loop(
        self, outgoing: list[AgentMessage], produced: list[AgentMessage], system_prompt: str, key: str
    ) -> None:
        """Model ↔ tools until the model stops asking; appends to `produced` so an overflow keeps progress."""
        messages = list(outgoing)
        if produced and isinstance(produced[-1], AssistantMessage):
            if not any(isinstance(b, ToolCall) for b in produced[-1].content):
                return
        for _ in range(MAX_TOOL_STEPS):
            specs = self._tool_specs(key)
            reply = await self.model.complete(
                ModelRequest(
                    system_prompt=system_prompt,
                    messages=list(messages),
                    tools=specs,
                    max_output_tokens=self.max_output_tokens,
                    session_key=key,
                )
            )
            produced.append(reply)
            messages.append(reply)
            calls = [b for b in reply.content if isinstance(b, ToolCall)]
            handlers = {spec.name: spec.handler for spec in specs if spec.handler is not None}
            if not calls or (self.tools is None and not any(c.name in handlers for c in calls)):
                return
            for call in calls:
                result = await self._execute(call, handlers)
                produced.append(result)
                messages.append(result)
        log.warning("turn on %s stopped after %d tool steps", key, MAX_TOOL_STEPS)

    def _tool_specs(self, key: str) -> list[ToolSpec]:
        """The host's tools plus the active engine's own (lossless-claw's recall tools)."""
        specs = list(self.tool_specs)
        provider = getattr(self.engine, "tools", None)
        if callable(provider) and not getattr(self.engine, "quarantined", False):
            try:
                # An engine that delegates to sub-agents (lcm_expand_query) runs them through this host.
                if self._tools_take_spawn is None:  # asked once: the engine is fixed for this runtime
                    self._tools_take_spawn = "spawn" in inspect.signature(provider).parameters
                specs.extend(provider(key, spawn=self._run_delegated) if self._tools_take_spawn else provider(key))
            except Exception as exc:
                log.warning("context engine tools unavailable for %s: %s", key, exc)
        return specs

    async def _execute(self, call: ToolCall, handlers: dict[str, Any]) -> ToolResultMessage:
        handler = handlers.get(call.name)
        if handler is None:
            if self.tools is None:
                return _tool_error(call, f"no tool named {call.name!r} is available")
            return await self.tools(call)
        try:
            text = await handler(call.arguments)
        except Exception as exc:  # a tool failure is the model's to see, not a crashed turn
            return _tool_error(call, f"{type(exc).__name__}: {exc}")
        return ToolResultMessage(tool_call_id=call.id, tool_name=call.name, content=[TextContent(text=text)])

    async def _persist(
        self,
        session: repo.SessionRow,
        messages: list[AgentMessage],
        entry_ids: EntryIds,
        is_heartbeat: bool,
        stats: _TurnStats,
    ) -> int | None:
        """The turn's persist transaction: its new messages and its `turns` row; returns the turn number.

        A turn whose messages were all stored already (a replayed turn) adds no row and returns None.
        """
        items = [
            repo.NewMessage(message=m, entry_id=entry_ids(m) or new_entry_id(), is_heartbeat=is_heartbeat)
            for m in messages
        ]
        async with self.store.transaction() as conn:
            written = await repo.append_messages(conn, session, items, self.store.counter)
            if not any(r.inserted for r in written):
                return None
            return await repo.record_turn(
                conn,
                session,
                assembled_tokens=stats.assembled_tokens,
                budget=stats.budget,
                compacted=stats.compacted,
            )

    async def _persist_failed(
        self,
        key: str,
        messages: list[AgentMessage],
        entry_ids: EntryIds,
        is_heartbeat: bool,
        estimate: int,
        started_in: str,
    ) -> None:
        """A failed turn still keeps what the user said and any partial reply (as OpenClaw's session does)."""
        try:
            session = await self._session(key)
            stats = _TurnStats(estimate, self.prompt_budget, session.session_id != started_in)
            await self._persist(session, messages, entry_ids, is_heartbeat, stats)
        except Exception as exc:  # the turn's own error is the one to report
            log.warning("could not store the failed turn on %s: %s", key, exc)

    async def _after_turn(
        self,
        session: repo.SessionRow,
        history: list[AgentMessage],
        new_messages: list[AgentMessage],
        is_heartbeat: bool,
    ) -> None:
        engine = self.engine
        try:
            if supports(engine, "after_turn"):
                await engine.after_turn(
                    AfterTurnParams(
                        session_id=session.session_id,
                        session_key=session.session_key,
                        session_file=session.session_file,
                        messages=[*history, *new_messages],
                        pre_prompt_message_count=len(history),
                        is_heartbeat=is_heartbeat,
                        token_budget=self.prompt_budget,
                        runtime_settings=self.runtime_settings(),
                    )
                )
            elif supports(engine, "ingest_batch"):
                await engine.ingest_batch(
                    IngestBatchParams(
                        session_id=session.session_id,
                        session_key=session.session_key,
                        messages=new_messages,
                        is_heartbeat=is_heartbeat,
                    )
                )
            else:
                for message in new_messages:
                    await engine.ingest(
                        IngestParams(
                            session_id=session.session_id,
                            session_key=session.session_key,
                            message=message,
                            is_heartbeat=is_heartbeat,
                        )
                    )
        except Exception as exc:  # finalization failure is reported, never loses the persisted turn
            log.warning("context engine turn finalization failed for %s: %s", session.session_key, exc)

    def _schedule_drain(self, key: str, turn_number: int | None, lock: asyncio.Lock) -> bool:
        """Pay an owning engine's deferred compaction debt in the background, after the reply.

        The reply does not wait for it (reference #313: 3.5–29 s per pass). The task takes over the
        key's held `lock` and releases it when done, so nothing else on the key runs in between.

        Returns:
            True when a task took the lock over (the caller must not release it).
        """
        drain = getattr(self.engine, "drain_debt", None)
        if not callable(drain) or getattr(self.engine, "quarantined", False):
            return False
        self._maintenance[key] = asyncio.create_task(self._drain_debt(key, drain, turn_number, lock))
        return True

    async def _drain_debt(
        self, key: str, drain: Any, turn_number: int | None, lock: asyncio.Lock
    ) -> CompactResult | None:
        started = time.perf_counter()
        try:
            async with asyncio.timeout(self.compaction_timeout_s):
                result: CompactResult | None = await drain(key)
            if result is not None and result.compacted and turn_number is not None:
                # The turn whose debt this was is the one that compacted (its `turns` row says so).
                async with self.store.transaction() as conn:
                    await repo.mark_turn_compacted(conn, key, turn_number)
        except Exception as exc:  # incl. the safety timeout: the debt stays recorded for the next try
            log.warning("deferred compaction failed for %s: %s", key, exc or type(exc).__name__)
            return None
        finally:
            lock.release()
        if result is not None:
            log.info(
                "deferred compaction on %s: ok=%s compacted=%s in %.0f ms",
                key,
                result.ok,
                result.compacted,
                (time.perf_counter() - started) * 1000,
            )
        return result

    async def settle(self, session_key: str | None = None) -> list[CompactResult]:
        """Wait for the background maintenance (deferred compaction) of one key, or of every key.

        A caller cancelled while waiting leaves the work running and still tracked (``dispose``
        awaits it).

        Returns:
            What the finished drains did (those that had a debt to pay).
        """
        keys = [session_key] if session_key is not None else list(self._maintenance)
        pending = {k: t for k in keys if (t := self._maintenance.pop(k, None)) is not None}
        if not pending:
            return []
        try:
            done = await asyncio.shield(asyncio.gather(*pending.values(), return_exceptions=True))
        except asyncio.CancelledError:
            for key, task in pending.items():
                if not task.done():
                    self._maintenance.setdefault(key, task)
            raise
        return [r for r in done if isinstance(r, CompactResult)]

    async def _auto_compact(self, key: str) -> CompactResult | None:
        """The built-in auto-compaction for engines that do not own compaction."""
        if self.owns_compaction or not self.settings.enabled:
            return None
        session = await self._session(key)
        async with self.store.read() as conn:
            tokens = await repo.context_tokens(conn, session.session_id)
        if tokens <= self.context_window - self.settings.effective_reserve():
            return None
        return await self._compact(session, trigger="budget", target="budget", force=False, current=tokens)

    # --- compaction --------------------------------------------------------------------------------

    async def compact(
        self, session_key: str, *, instructions: str | None = None, target: str = "threshold"
    ) -> CompactResult:
        """`/compact [instructions]`: manual compaction through the active engine."""
        async with self._lock(session_key):
            session = await self._session(session_key)
            return await self._compact(session, trigger="manual", target=target, force=True, instructions=instructions)

    async def _compact(
        self,
        session: repo.SessionRow,
        *,
        trigger: str,
        target: str,
        force: bool,
        instructions: str | None = None,
        current: int | None = None,
    ) -> CompactResult:
        if current is None:
            async with self.store.read() as conn:
                current = await repo.context_tokens(conn, session.session_id)
        params: dict[str, Any] = {
            "session_id": session.session_id,
            "session_key": session.session_key,
            "session_file": session.session_file,
            "token_budget": self.prompt_budget,
            "force": force,
            "current_token_count": current,
            "compaction_target": target,
            "custom_instructions": instructions,
            "runtime_context": {"trigger": trigger, "currentTokenCount": current},
        }
        if force and trigger == "manual":
            params["force_reason"] = "manual"
        if self.owns_compaction:
            params["runtime_settings"] = self.runtime_settings()
        started = time.perf_counter()
        try:
            async with asyncio.timeout(self.compaction_timeout_s):
                result = await self.engine.compact(CompactParams(**params))
        except TimeoutError:
            result = CompactResult(ok=False, compacted=False, reason=f"timed out after {self.compaction_timeout_s}s")
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

    # --- sub-agents --------------------------------------------------------------------------------

    async def spawn_subagent(
        self,
        parent_session_key: str,
        child_session_key: str,
        start: Callable[[], Awaitable[T]],
        *,
        context_mode: Literal["isolated", "fork"] = "isolated",
        light_context: bool = False,
        ttl_ms: int | None = None,
    ) -> T:
        """Prepare engine state for a child run, start it, and roll back if starting fails.

        A light-context isolated spawn skips `prepareSubagentSpawn` on purpose (the child starts
        from a light bootstrap context). Call :meth:`end_subagent` when the child finishes.
        """
        preparation = None
        if supports(self.engine, "prepare_subagent_spawn") and not (light_context and context_mode == "isolated"):
            parent = await self._session(parent_session_key)
            preparation = await self.engine.prepare_subagent_spawn(
                PrepareSubagentSpawnParams(
                    parent_session_key=parent_session_key,
                    child_session_key=child_session_key,
                    context_mode=context_mode,
                    parent_session_id=parent.session_id,
                    parent_session_file=parent.session_file,
                    ttl_ms=ttl_ms,
                )
            )
        try:
            return await start()
        except BaseException:
            if preparation is not None:
                await preparation.rollback()
            raise

    async def run_subagent(self, parent_session_key: str, child_session_key: str, prompt: str) -> str:
        """Run a child agent for one turn on its own session key and return its final reply's text.

        The engine prepares the child (`prepareSubagentSpawn`: lossless-claw grants it scoped recall)
        and is told when it ends (`onSubagentEnded`, reason ``completed`` whether it answered or
        failed: the contract has no failure reason).
        """
        if parent_session_key == child_session_key:
            raise ValueError("a sub-agent needs its own session key")
        try:
            result = await self.spawn_subagent(
                parent_session_key, child_session_key, lambda: self.run_turn(child_session_key, prompt)
            )
        finally:
            await self.end_subagent(child_session_key, "completed")
            # A child key is used once: let go of its maintenance and its lock.
            await self.settle(child_session_key)
            if not self._lock(child_session_key).locked():
                self._locks.pop(child_session_key, None)
        replies = [m for m in result.new_messages if isinstance(m, AssistantMessage)]
        return flatten_text(replies[-1]) if replies else ""

    async def _run_delegated(self, task: Any) -> str:
        # The engine's delegation task (an ExpansionTask) names the parent, the child and the prompt.
        return await self.run_subagent(task.parent_session_key, task.child_session_key, task.prompt)

    async def end_subagent(self, child_session_key: str, reason: SubagentEndReason = "completed") -> None:
        """Tell the engine a sub-agent session ended."""
        if supports(self.engine, "on_subagent_ended"):
            await self.engine.on_subagent_ended(SubagentEndedParams(child_session_key=child_session_key, reason=reason))

    async def dispose(self) -> None:
        """Finish background maintenance, then release the engine; the store is the caller's to close."""
        await self.settle()
        if supports(self.engine, "dispose"):
            await self.engine.dispose()


@dataclass(frozen=True)
class _TurnStats:
    """What the `turns` row of a turn records."""

    assembled_tokens: int
    budget: int
    compacted: bool


def _tool_error(call: ToolCall, text: str) -> ToolResultMessage:
    return ToolResultMessage(tool_call_id=call.id, tool_name=call.name, content=[TextContent(text=text)], is_error=True)


def _scaled_settings(settings: CompactionSettings, window: int) -> CompactionSettings:
    """OpenClaw's defaults assume 100k+ windows; keep reserve and keep-recent sensible for small ones."""
    explicit = settings.model_fields_set
    update: dict[str, int] = {}
    if (
        "reserve_tokens" not in explicit
        and "reserve_tokens_floor" not in explicit
        and settings.effective_reserve() > window // 4
    ):
        update.update(reserve_tokens=window // 4, reserve_tokens_floor=0)
    if "keep_recent_tokens" not in explicit and settings.keep_recent_tokens > window // 4:
        update["keep_recent_tokens"] = window // 4
    return settings.model_copy(update=update) if update else settings


def _estimate(messages: Sequence[AgentMessage], known: dict[int, int], system_prompt: str) -> int:
    total = estimate_text_tokens(system_prompt)
    for m in messages:
        stored = known.get(id(m))
        total += stored if stored is not None else estimate_text_tokens(flatten_text(m))
    return total


def _join_prompt(addition: str | None, base: str) -> str:
    return f"{addition}\n\n{base}" if addition else base


def _no_progress(result: CompactResult) -> bool:
    # OpenClaw #150447: a compaction that saved nothing must not burn the recovery budget in a loop.
    detail = result.result
    return detail is not None and detail.tokens_after is not None and detail.tokens_after >= detail.tokens_before


def _now_ms() -> int:
    return int(time.time() * 1000)
