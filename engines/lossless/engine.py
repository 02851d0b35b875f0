"""The lossless-claw context engine: the lifecycle hooks, compaction writes, and deferred debt.

Compaction plans in memory (:mod:`engines.lossless.compaction`) and then writes everything in one
transaction: the new summary nodes and edges, the successor session with its full context item
list and the `compactions` audit row (`repo.commit_compaction`), and the cleared debt. A summarizer auth
failure writes nothing. Deferred mode records a `compaction_debt` row in `engine_state` after the
turn instead of compacting inline; :meth:`LosslessContextEngine.drain_debt` and an over-budget
`assemble` pay it, and it survives a restart.
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import TYPE_CHECKING, Any, ClassVar

from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncConnection

from engines.lossless.assemble import AssemblyPlan, RenderCache, build_assembly, live_suffix, load_render_inputs
from engines.lossless.compaction import SweepOutcome, sweep
from engines.lossless.config import DEFAULT_TOKEN_BUDGET, LosslessConfig, resolve_config
from engines.lossless.debt import DEBT_STATE, read_debt, record_debt, write_debt
from engines.lossless.info import lossless_info
from engines.lossless.ingest import (
    BOOTSTRAP_STATE,
    ENGINE_ID,
    bootstrap_session,
    commit_turn_messages,
    ingest_messages,
    session_key_of,
)
from engines.lossless.items import observed_prompt_tokens, plan_items, swept_result, trigger_of
from engines.lossless.large_content import externalise_session
from engines.lossless.migration import ContextAdoption
from engines.lossless.planning import PlanItem, SweepSettings, total_tokens
from engines.lossless.recall_access import RecallAccess
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
    CompactResultDetail,
    EngineContext,
    EngineInfo,
    IngestBatchParams,
    IngestBatchResult,
    IngestParams,
    IngestResult,
    MaintainParams,
    MaintainResult,
)
from openclaw_ctx.errors import AbortError, EngineError, SummarizerAuthError
from openclaw_ctx.store import repo
from openclaw_ctx.store.repo import ItemRef, ResolvedItem, SessionRow, SummaryItem
from openclaw_ctx.summarize.base import Summarizer, reset_spend_guard
from openclaw_ctx.summarize.extractive import ExtractiveSummarizer

if TYPE_CHECKING:
    from engines.lossless.grants import GrantStore

__all__ = ["DEBT_STATE", "DEFAULT_TOKEN_BUDGET", "LosslessContextEngine", "create_engine"]

log = logging.getLogger(__name__)


class LosslessContextEngine(ContextAdoption, RecallAccess):
    """Lossless Context Management: a DAG of summaries over an immutable message store."""

    tools_accept_spawn: ClassVar[bool] = True
    """`tools()` takes the host's `spawn` callback (lcm_expand_query runs its sub-agent through the host)."""

    def __init__(self, ctx: EngineContext) -> None:
        self.config: LosslessConfig = resolve_config(ctx.config)
        if ctx.store is None:
            raise EngineError("lossless-claw needs the host's Store (EngineContext.store is None)")
        self.store = ctx.store
        self.counter = ctx.store.counter
        self.summarizer: Summarizer = ctx.summarizer or ExtractiveSummarizer(self.counter)
        self._ctx = ctx
        self._renders = RenderCache()
        self._successor: dict[str, str] = {}
        self._locks: dict[str, asyncio.Lock] = {}
        self._grants: GrantStore | None = None
        self._info = lossless_info()

    @property
    def info(self) -> EngineInfo:
        """`lossless-claw`; owns compaction; needs assemble-before-prompt for agent runs."""
        return self._info

    def _lock(self, key: str) -> asyncio.Lock:
        return self._locks.setdefault(key, asyncio.Lock())

    def _writes_allowed(self, key: str) -> bool:
        return not (self.config.is_ignored(key) or self.config.is_stateless(key))

    # --- ingest and bootstrap --------------------------------------------------------------

    async def ingest(self, params: IngestParams) -> IngestResult:
        """Store one message unless its entry id is already stored (then ``ingested=False``)."""
        outcome = await ingest_messages(
            self.store,
            self.config,
            session_id=params.session_id,
            session_key=params.session_key,
            messages=[params.message],
            entry_ids=[params.entry_id],
            is_heartbeat=params.is_heartbeat,
        )
        return IngestResult(ingested=outcome.inserted > 0)

    async def ingest_batch(self, params: IngestBatchParams) -> IngestBatchResult:
        """Store a turn's messages in one transaction, skipping those already stored."""
        outcome = await ingest_messages(
            self.store,
            self.config,
            session_id=params.session_id,
            session_key=params.session_key,
            messages=params.messages,
            entry_ids=params.entry_ids,
            is_heartbeat=params.is_heartbeat,
        )
        return IngestBatchResult(ingested_count=outcome.inserted)

    async def commit_turn(self, params: CommitTurnParams) -> CommitTurnResult:
        """Store a whole turn once per advancement key, then evaluate the threshold as after any turn."""
        status, turn = await commit_turn_messages(self.store, self.config, params)
        if turn is not None:
            await self.after_turn(turn)
        return CommitTurnResult(status=status)

    async def bootstrap(self, params: BootstrapParams) -> BootstrapResult:
        """Adopt the session's existing rows and context (e.g. after legacy ran it)."""
        return await bootstrap_session(self.store, self.config, params)

    # --- after the turn: threshold and debt ---------------------------------------------------

    async def after_turn(self, params: AfterTurnParams) -> None:
        """Externalise large new content, then evaluate the threshold: record debt, or compact inline."""
        if params.is_heartbeat:
            return
        async with self.store.transaction() as conn:
            key = await session_key_of(conn, params.session_id, params.session_key)
            if not self._writes_allowed(key):
                return
            session = await repo.active_session(conn, key)
            if session is None:
                return
            await externalise_session(
                conn, session.session_id, key, self.config.large_file_token_threshold, self.counter
            )
            stored = await repo.context_tokens(conn, session.session_id)
            observed = observed_prompt_tokens(params.messages[params.pre_prompt_message_count :])
            budget = self.config.budget(params.token_budget)
            pressure = max(stored, observed)
            if pressure <= self.config.threshold_tokens(budget):
                return
            if self.config.proactive_threshold_compaction_mode == "deferred":
                await record_debt(conn, key, session.session_id, budget, pressure)
                return
        await self._compact(key, budget, "threshold", force=False, trigger="threshold", observed=pressure)

    async def pending_debt(self, session_key: str) -> dict[str, Any] | None:
        """The recorded compaction debt of a key, if any."""
        return await read_debt(self.store, session_key)

    async def drain_debt(self, session_key: str) -> CompactResult | None:
        """Pay a key's deferred compaction debt now (call after the reply is delivered); None if none."""
        debt = await self.pending_debt(session_key)
        if debt is None:
            return None
        result = await self._compact(
            session_key,
            self.config.budget(int(debt.get("token_budget") or 0)),
            "threshold",
            force=False,
            trigger="deferred",
            observed=int(debt.get("projected_tokens") or 0),
        )
        if result.ok and not result.compacted:
            await write_debt(self.store, session_key, None)
        elif not result.ok:
            attempts = int(debt.get("attempts", 0)) + 1
            await write_debt(self.store, session_key, {**debt, "attempts": attempts, "last_error": result.reason})
        return result

    async def maintain(self, params: MaintainParams) -> MaintainResult:
        """Pay the deferred debt when the host opts this run into it (its background maintenance);
        the host's transcript is never rewritten, so ``changed`` stays false."""
        allowed = (params.runtime_context or {}).get("allowDeferredCompactionExecution") is True
        async with self.store.read() as conn:
            key = await session_key_of(conn, params.session_id, params.session_key)
        if not allowed or not self._writes_allowed(key):
            return MaintainResult(reason="nothing to do: deferred compaction not allowed in this run")
        result = await self.drain_debt(key)
        if result is None:
            return MaintainResult(reason="nothing to do: no compaction debt")
        return MaintainResult(reason="paid the compaction debt" if result.ok else f"compaction failed: {result.reason}")

    # --- compaction ----------------------------------------------------------------------

    async def compact(self, params: CompactParams) -> CompactResult:
        """Threshold target: full sweeps. Budget target: repeat until under the budget (bounded)."""
        async with self.store.read() as conn:
            key = await session_key_of(conn, params.session_id, params.session_key)
        if self.config.is_ignored(key):
            from openclaw_ctx.compaction import delegate_compaction_to_runtime

            return await delegate_compaction_to_runtime(params, self._ctx)
        if self.config.is_stateless(key):
            return CompactResult(ok=True, compacted=False, reason="stateless session: lossless state is read-only")
        target = params.compaction_target or ("budget" if params.force_reason == "preflight_required" else "threshold")
        if params.force_reason == "manual":
            reset_spend_guard(self.summarizer, key)
        return await self._compact(
            key,
            self.config.budget(params.token_budget),
            target,
            force=params.force,
            trigger=trigger_of(params, target),
            observed=params.current_token_count or 0,
            instructions=params.custom_instructions or "",
            abort=params.abort_signal,
        )

    async def _load_plan_items(
        self, conn: AsyncConnection, session: SessionRow
    ) -> tuple[list[ResolvedItem], list[PlanItem]]:
        entries = await repo.load_context(conn, session.session_id)
        items = await plan_items(conn, entries, self._renders, self.counter, self.config)
        return entries, items

    async def _compact(
        self,
        key: str,
        budget: int,
        target: str,
        *,
        force: bool,
        trigger: str,
        observed: int = 0,
        instructions: str = "",
        abort: Any = None,
    ) -> CompactResult:
        async with self._lock(key):
            started = time.monotonic()
            async with self.store.read() as conn:
                session = await repo.active_session(conn, key)
                if session is None:
                    return CompactResult(ok=True, compacted=False, reason="no session for this key yet")
                entries, items = await self._load_plan_items(conn, session)
            before = max(total_tokens(items), observed)
            limit = self.config.threshold_tokens(budget) if target == "threshold" else budget
            if not force and before <= limit:
                reason = "below threshold" if target == "threshold" else "already within budget"
                return CompactResult(
                    ok=True,
                    compacted=False,
                    reason=reason,
                    result=CompactResultDetail(tokens_before=before, tokens_after=before),
                )
            settings = SweepSettings(
                self.config,
                budget,
                "budget" if target == "budget" else "threshold",
                force,
                instructions,
                abort,
                session_key=key,
            )
            try:
                outcome = await sweep(items, settings, self.summarizer, self.counter)
            except SummarizerAuthError as exc:
                log.warning("lossless-claw: summarizer auth failed for %s; nothing written: %s", key, exc)
                return CompactResult(ok=False, compacted=False, reason=f"summarizer auth failed: {exc}")
            except AbortError as exc:
                return CompactResult(ok=False, compacted=False, reason=f"aborted: {exc}")
            if not outcome.created:
                return CompactResult(
                    ok=True,
                    compacted=False,
                    reason=outcome.stop_reason,
                    result=CompactResultDetail(tokens_before=before, tokens_after=before),
                )
            last_ordinal = entries[-1].ordinal if entries else -1
            return await self._write(session, outcome, before, last_ordinal, trigger, started)

    async def _write(
        self, session: SessionRow, outcome: SweepOutcome, before: int, last_ordinal: int, trigger: str, started: float
    ) -> CompactResult:
        async with self.store.transaction() as conn:
            current = await repo.active_session(conn, session.session_key)
            if current is None or current.session_id != session.session_id:
                return CompactResult(ok=False, compacted=False, reason="session rotated concurrently; retry")
            # Messages the host appended while the sweep ran stay at the end, untouched.
            extra = (
                await conn.execute(
                    text(
                        "SELECT item_type, COALESCE(message_id, summary_id), token_count FROM context_items "
                        "WHERE session_id = :sid AND ordinal > :last ORDER BY ordinal"
                    ),
                    {"sid": session.session_id, "last": last_ordinal},
                )
            ).all()
            items = [ItemRef(i.kind, i.ref, i.tokens) for i in outcome.items]
            items += [ItemRef(kind, int(ref) if kind == "message" else ref, tokens) for kind, ref, tokens in extra]
            first_kept = next((i for i in outcome.items if i.kind == "message"), None)
            record = repo.CompactionRecord(
                engine_id=ENGINE_ID,
                trigger=trigger,
                tokens_before=before,
                duration_ms=int((time.monotonic() - started) * 1000),
                reason=outcome.stop_reason,
                first_kept_message_id=int(first_kept.ref) if first_kept else None,
                first_kept_entry_id=first_kept.entry_id if first_kept else None,
                details={"passes": outcome.passes, "depths": sorted({n.depth for n in outcome.created})},
            )
            successor = await repo.commit_compaction(conn, session, outcome.created, items, record)
            after = sum(item.tokens for item in items)
            await repo.set_engine_state(conn, ENGINE_ID, session.session_key, DEBT_STATE, None)
            mark = await repo.get_engine_state(conn, ENGINE_ID, session.session_key, BOOTSTRAP_STATE)
            if isinstance(mark, dict):
                await repo.set_engine_state(
                    conn, ENGINE_ID, session.session_key, BOOTSTRAP_STATE, {**mark, "session_id": successor.session_id}
                )
        for sid, rendered in outcome.rendered.items():
            self._renders.put(sid, rendered)
        self._successor[session.session_id] = successor.session_id
        return swept_result(outcome, successor, first_kept.entry_id if first_kept else None, before, after)

    # --- assembly ------------------------------------------------------------------------

    def _current_id(self, session_id: str) -> str:
        while session_id in self._successor:
            session_id = self._successor[session_id]
        return session_id

    async def _load_for_assembly(self, key: str, session_id: str) -> tuple[str, list[ResolvedItem], AssemblyPlan]:
        async with self.store.read() as conn:
            sid = self._current_id(session_id)
            entries = await repo.load_context(conn, sid)
            if not entries:
                # Stale or unknown id (rotated by another process, or a first turn): ask the store.
                active = await repo.active_session(conn, key)
                if active is not None and active.session_id != sid:
                    sid = active.session_id
                    entries = await repo.load_context(conn, sid)
            rendered, stubs = await load_render_inputs(
                conn, entries, self._renders, self.counter, self.config.large_file_token_threshold
            )
        plan = AssemblyPlan(0, self.config.fresh_tail_count, 0, rendered, stubs)
        return sid, entries, plan

    async def assemble(self, params: AssembleParams) -> AssembleResult:
        """The context within the budget: summaries as untrusted XML, the fresh tail always kept."""
        key = params.session_key or params.session_id
        if self.config.is_ignored(key):
            return AssembleResult(messages=params.messages, estimated_tokens=0)
        budget = self.config.budget(params.token_budget)
        sid, entries, plan = await self._load_for_assembly(key, params.session_id)
        stored = sum(
            plan.rendered[e.summary_id].tokens if isinstance(e, SummaryItem) else e.token_count for e in entries
        )
        if stored > budget and self._writes_allowed(key):
            # Pressure over the budget: pay the (deferred) compaction before the prompt.
            result = await self._compact(
                key, budget, "threshold", force=False, trigger="assemble-pressure", observed=stored
            )
            if result.compacted:
                sid, entries, plan = await self._load_for_assembly(key, sid)
        plan.budget = budget
        plan.fresh_tail_max_tokens = self.config.tail_max_tokens(budget)
        plan.live = live_suffix(params.messages, entries)
        return build_assembly(entries, plan, self.counter)

    async def dispose(self) -> None:
        """Nothing to release: the Store belongs to the host."""
        self._renders = RenderCache()


def create_engine(ctx: EngineContext | None = None) -> LosslessContextEngine:
    """The factory registered under `lossless-claw`.

    Raises:
        ConfigError: unknown or ill-typed config keys (the registry quarantines with this reason).
        EngineError: no Store in the context.
    """
    return LosslessContextEngine(ctx or EngineContext())
