"""The host runtime: OpenClaw's embedded runner, as a library any agent loop can use.

One turn:
  resolve the engine (once per Runtime) → `bootstrap` the first time the engine sees the session →
  `assemble` (the pipeline messages if it throws) → prepend `systemPromptAddition` → pre-prompt
  overflow precheck (skipped for engines that own compaction unless `preassembly_may_overflow`) →
  the model/tool loop → persist every new message (the host persists, whatever the engine) →
  `commitTurn`, or `afterTurn`, or `ingestBatch`, or `ingest` one by one → built-in auto-compaction for engines that
  do not own compaction → an owning engine's deferred compaction debt, paid in the background after
  the reply (the next turn on the key waits for it; `settle()` and `dispose()` await it).

This module is the facade; its rooms are :mod:`~openclaw_ctx.host.turn` (a turn's attempts and
overflow recovery), :mod:`~openclaw_ctx.host.hooks` (every engine call and its failure policy),
:mod:`~openclaw_ctx.host.tools` (the model/tool loop), :mod:`~openclaw_ctx.host.scheduler` (per-key
locks and deferred compaction), :mod:`~openclaw_ctx.host.subagents` and
:mod:`~openclaw_ctx.host.sessions` (the store reads and writes). Turns on one session key are
serialised; different keys run concurrently.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, Literal, TypeVar

from openclaw_ctx.config import CompactionSettings, OpenClawConfig
from openclaw_ctx.contract import (
    AssembleResult,
    CompactResult,
    ContextEngine,
    EngineContext,
    SubagentEndReason,
)
from openclaw_ctx.contract.host import EMBEDDED_HOST, HostInfo, assert_host_support
from openclaw_ctx.contract.model import Model, ToolExecutor, ToolSpec
from openclaw_ctx.contract.settings import RuntimeSettings, build_runtime_settings
from openclaw_ctx.host import turn
from openclaw_ctx.host.hooks import EngineHooks
from openclaw_ctx.host.scheduler import Drain, KeyScheduler
from openclaw_ctx.host.sessions import EntryIds, Sessions, Writes, new_entry_id
from openclaw_ctx.host.subagents import Subagents
from openclaw_ctx.host.tools import ToolLoop
from openclaw_ctx.host.turn import OVERFLOW_MESSAGE, TurnResult
from openclaw_ctx.host.vector_upkeep import VectorUpkeep
from openclaw_ctx.messages import AgentMessage, UserMessage, parse_message
from openclaw_ctx.registry import ResolvedEngine, resolve_context_engine
from openclaw_ctx.store import repo
from openclaw_ctx.store.store import Store
from openclaw_ctx.summarize.base import Summarizer

__all__ = ["OVERFLOW_MESSAGE", "Runtime", "TurnResult", "new_entry_id"]

T = TypeVar("T")


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
        model: Model | None = None,
        tools: ToolExecutor | None = None,
        tool_specs: Sequence[ToolSpec] = (),
        context_window: int | None = None,
        max_output_tokens: int | None = None,
        system_prompt: str = "You are a helpful coding agent.",
        host: HostInfo = EMBEDDED_HOST,
        compaction_timeout_s: float | None = None,
        embed_vectors: bool = True,
    ) -> None:
        self.store = store
        self.resolved = resolved
        self.config = config
        if model is None and context_window is None:
            raise ValueError("a Runtime without a model needs context_window (the window the caller's model has)")
        self.model = model
        """The model turns call; None for a runtime that only records and assembles turns run elsewhere."""
        self.tools = tools
        self.tool_specs = list(tool_specs)
        self.context_window = context_window or (model.context_window if model is not None else 0)
        self.max_output_tokens = max_output_tokens
        self.system_prompt = system_prompt
        self.host = host
        self.settings = _scaled_settings(config.agents.defaults.compaction, self.context_window)
        self.compaction_timeout_s = compaction_timeout_s or self.settings.timeout_seconds
        self.sessions = Sessions(store, lambda: self.engine.info.id)
        self.hooks = EngineHooks(self)
        self.tool_loop = ToolLoop(self)
        self.scheduler = KeyScheduler(store.locks)
        self.subagents = Subagents(self)
        self.vectors = VectorUpkeep(store, enabled=embed_vectors and not store.read_only)
        """Embeds each turn's new rows after the reply (``embed_vectors=False`` leaves it to ``openclaw-ctx embed``)."""

    @classmethod
    async def create(
        cls,
        store: Store,
        *,
        config: OpenClawConfig | None = None,
        model: Model | None = None,
        summarizer: Summarizer | None = None,
        agent_dir: str | None = None,
        workspace_dir: str | None = None,
        **kwargs: Any,
    ) -> Runtime:
        """Resolve the slot's engine with the store in its factory context, then build the runtime.

        Without a `model` (then give `context_window`) the runtime is memory for an agent loop that
        calls its model itself: :meth:`record_turn` stores each turn, :meth:`assemble` gives the view.

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
            requested_model=self.model.name if self.model else None,
            resolved_model=self.model.name if self.model else None,
            provider=self.model.provider if self.model else None,
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
        return await self.sessions.active(session_key)

    async def new_session(self, session_key: str, *, reason: str = "reset") -> repo.SessionRow:
        """`/new` and `/reset`: archive the key's active session and start a fresh, empty one.

        As in OpenClaw the key stays and the session id changes, so the model starts from nothing;
        the old session's messages and summaries stay in the store and in recall across the key.
        """
        async with self.scheduler.hold(session_key):
            return await self.sessions.start_fresh(session_key, reason)

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
        return await self._turn_on(
            session_key, lambda: turn.run(self, session_key, user, entry_ids or (lambda _m: None), is_heartbeat)
        )

    async def record_turn(
        self,
        session_key: str,
        messages: Sequence[AgentMessage],
        *,
        entry_ids: EntryIds | None = None,
        is_heartbeat: bool = False,
        writes: Writes | None = None,
    ) -> TurnResult:
        """Store one turn an agent loop ran elsewhere (its own model call), as :meth:`run_turn` stores its own.

        The messages are persisted in order, the engine is told (``commitTurn`` / ``afterTurn`` /
        ingest), and compaction follows as after any turn: the built-in one when the context is over
        budget, an owning engine's deferred debt in the background. Messages already stored under
        the same entry ids are skipped, so recording a turn again changes nothing. `writes` runs
        inside the turn's persist transaction (an adapter's own state, a staleness check that
        raises to refuse the turn): the messages and the writes commit together or not at all.
        """
        return await self._turn_on(
            session_key,
            lambda: turn.record(
                self, session_key, list(messages), entry_ids or (lambda _m: None), is_heartbeat, writes
            ),
        )

    async def _turn_on(self, session_key: str, work: Callable[[], Awaitable[TurnResult]]) -> TurnResult:
        """Run one turn's `work` holding the key's lock, which then passes to the turn's deferred compaction."""
        result: TurnResult | None = None

        def deferred() -> Drain | None:
            return self.hooks.deferred_compaction(session_key, result.turn_number if result else None)

        # The key's lock passes to the deferred compaction, which releases it when done: the next
        # turn on the key (or /compact, /new) waits for it, the reply does not.
        async with self.scheduler.turn(session_key, hand_over=deferred):
            result = await work()
        self.vectors.touch(session_key)
        return result

    async def assemble(
        self, session_key: str, *, prompt: str | None = None, budget: int | None = None
    ) -> tuple[AssembleResult, repo.SessionRow | None]:
        """What the model would be sent next turn on `session_key`: the engine's budgeted view.

        Waits for the key's background compaction first. A key with no session yet gives an empty
        view and creates nothing.

        Returns:
            The engine's AssembleResult (summaries included as the engine renders them) and the
            session it came from (None for an unknown key).
        """
        async with self.scheduler.hold(session_key):
            async with self.store.read() as conn:
                session = await repo.active_session(conn, session_key)
            if session is None:
                return AssembleResult(messages=[], estimated_tokens=0), None
            history, _known = await self.sessions.history(session)
            user = UserMessage(content=prompt, timestamp=_now_ms()) if prompt is not None else None
            result, _from_engine = await self.hooks.assemble(session, history, user, budget or self.prompt_budget)
            return result, session

    async def settle(self, session_key: str | None = None) -> list[CompactResult]:
        """Wait for background maintenance (deferred compaction, then vector upkeep) of one key, or of all.

        A caller cancelled while waiting leaves the work running and still tracked (``dispose``
        awaits it).

        Returns:
            What the finished drains did (those that had a debt to pay).
        """
        done = await self.scheduler.settle(session_key)
        await self.vectors.settle()
        return done

    async def compact(
        self, session_key: str, *, instructions: str | None = None, target: str = "threshold"
    ) -> CompactResult:
        """`/compact [instructions]`: manual compaction through the active engine.

        Raises:
            NotFoundError: the key has no session (a typo must not create an empty one).
        """
        async with self.scheduler.hold(session_key):
            async with self.store.read() as conn:
                session = await repo.require_active_session(conn, session_key)
            return await self.hooks.compact(
                session, trigger="manual", target=target, force=True, instructions=instructions
            )

    async def retract_newest(self, session_key: str) -> AgentMessage | None:
        """Take back the newest message of the key's conversation (an agent SDK's ``pop_item``).

        The row stays in the store, off the active branch (recall and ``sql`` still find it); it
        leaves the context. None when the conversation is empty.
        """
        async with self.scheduler.hold(session_key):
            async with self.store.transaction() as conn:
                taken = await repo.retract_newest(conn, session_key)
        return parse_message(taken[1]) if taken is not None else None

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
        return await self.subagents.spawn(
            parent_session_key,
            child_session_key,
            start,
            context_mode=context_mode,
            light_context=light_context,
            ttl_ms=ttl_ms,
        )

    async def run_subagent(self, parent_session_key: str, child_session_key: str, prompt: str) -> str:
        """Run a child agent for one turn on its own session key and return its final reply's text.

        The engine prepares the child (`prepareSubagentSpawn`: lossless-claw grants it scoped recall)
        and is told when it ends (`onSubagentEnded`, reason ``completed`` whether it answered or
        failed: the contract has no failure reason).
        """
        return await self.subagents.run(parent_session_key, child_session_key, prompt)

    async def end_subagent(self, child_session_key: str, reason: SubagentEndReason = "completed") -> None:
        """Tell the engine a sub-agent session ended."""
        await self.hooks.subagent_ended(child_session_key, reason)

    async def dispose(self) -> None:
        """Finish background maintenance, then release the engine; the store is the caller's to close."""
        await self.settle()
        await self.hooks.dispose()


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


def _now_ms() -> int:
    return int(time.time() * 1000)
