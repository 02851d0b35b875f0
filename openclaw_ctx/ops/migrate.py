"""Engine migration: move a session key's active context from one engine's projection to the other's.

- legacy → lossless-claw: :func:`engines.lossless.backfill.backfill_key` builds the DAG from the raw
  messages in the context (leaf summaries, then condensed ones), adopting the summaries already
  there (the legacy summary becomes a node of the DAG, its edges intact).
- lossless-claw → legacy: the built-in compaction (:func:`openclaw_ctx.compaction.builtin.compact_session`)
  writes ONE legacy summary of the view: every DAG summary in the context and the older raw
  messages; the recent messages after the last summary stay verbatim.

Either way the session rotates (``rotation_reason = 'migration'``, the successor's `engine_id` is
the target engine) in one transaction, and nothing is deleted: every message stays reachable from
the new context through summary edges. A dry run computes the same plan and writes nothing.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal

from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncConnection

from engines.lossless.assemble import fresh_tail_start
from engines.lossless.backfill import DEFAULT_BATCH, BackfillProgress, backfill_key, pending_backfill
from engines.lossless.config import LosslessConfig
from openclaw_ctx.compaction import compact_session
from openclaw_ctx.compaction.plan import CompactionPlan, keep_recent_budget, plan_compaction
from openclaw_ctx.config import CompactionSettings
from openclaw_ctx.errors import CompactionError, ConfigError, NotFoundError
from openclaw_ctx.store import repo
from openclaw_ctx.store.repo import MessageItem, ResolvedItem, SummaryItem
from openclaw_ctx.store.store import Store
from openclaw_ctx.summarize.base import Summarizer

__all__ = [
    "ENGINES",
    "MIGRATION_REASON",
    "MigrationPlan",
    "MigrationResult",
    "current_engine",
    "keys_to_migrate",
    "migrate_key",
    "plan_migration",
]

EngineId = Literal["legacy", "lossless-claw"]
ENGINES: tuple[EngineId, ...] = ("legacy", "lossless-claw")
MIGRATION_REASON = "migration"


def current_engine(session: repo.SessionRow) -> str:
    """The engine whose projection a session's context holds (rows without one are the host default, legacy)."""
    return session.engine_id or "legacy"


def _check_target(target: str) -> EngineId:
    for engine in ENGINES:
        if engine == target:
            return engine
    raise ConfigError(f"unknown engine {target!r}: migrate moves between {' and '.join(ENGINES)}")


@dataclass
class MigrationPlan:
    """What migrating one key would do (all a dry run reports)."""

    session_key: str
    session_id: str
    source: str
    target: str
    items: int
    messages: int
    summaries: int
    tokens: int
    action: str
    to_summarize_messages: int = 0
    to_summarize_summaries: int = 0
    kept_messages: int = 0
    resumable: bool = False

    @property
    def changes(self) -> bool:
        """False when the key is already on the target engine."""
        return self.source != self.target

    def to_json(self) -> dict[str, Any]:
        """A JSON-ready dict."""
        return {
            "sessionKey": self.session_key,
            "sessionId": self.session_id,
            "from": self.source,
            "to": self.target,
            "changes": self.changes,
            "contextItems": self.items,
            "contextMessages": self.messages,
            "contextSummaries": self.summaries,
            "contextTokens": self.tokens,
            "summarizeMessages": self.to_summarize_messages,
            "summarizeSummaries": self.to_summarize_summaries,
            "keptMessages": self.kept_messages,
            "resumesBackfill": self.resumable,
            "action": self.action,
        }


@dataclass
class MigrationResult:
    """What migrating one key did."""

    plan: MigrationPlan
    migrated: bool
    successor_session_id: str | None = None
    summaries_created: int = 0
    tokens_after: int | None = None
    finished: bool = True
    notes: list[str] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        """A JSON-ready dict."""
        return {
            **self.plan.to_json(),
            "migrated": self.migrated,
            "finished": self.finished,
            "successorSessionId": self.successor_session_id,
            "summariesCreated": self.summaries_created,
            "tokensAfter": self.tokens_after,
            "notes": self.notes,
        }


async def keys_to_migrate(store: Store) -> list[str]:
    """Every session key with an active session, in key order."""
    async with store.read() as conn:
        rows = await conn.execute(text("SELECT session_key FROM sessions WHERE status = 'active' ORDER BY session_key"))
        return [str(r[0]) for r in rows]


def _legacy_keep(entries: list[ResolvedItem], settings: CompactionSettings, budget: int) -> int:
    """Recent tokens to keep verbatim so that no DAG summary survives in the kept part.

    The keep-recent budget is capped at what follows the last summary; when that would cover no
    message at all, everything is summarised (one summary, nothing kept).
    """
    last = max((i for i, e in enumerate(entries) if isinstance(e, SummaryItem)), default=-1)
    after = sum(e.token_count for e in entries[last + 1 :])
    keep = min(keep_recent_budget(settings, budget), after)
    if last >= 0 and not plan_compaction(entries, keep).covered:
        return 0
    return keep


def _legacy_plan(entries: list[ResolvedItem], settings: CompactionSettings, budget: int) -> CompactionPlan | None:
    """The built-in compaction's plan for the view, or None when the view already is a legacy projection.

    A view with no DAG summary and at most one (legacy) summary carries over as it is; so does a
    view whose summaries cover no message to summarise alongside them (nothing for the summarizer).
    """
    summaries = [e for e in entries if isinstance(e, SummaryItem)]
    if len(summaries) <= 1 and all(e.summary.kind == "legacy" for e in summaries):
        return None
    plan = plan_compaction(entries, _legacy_keep(entries, settings, budget))
    return plan if plan.covered else None


async def plan_migration(
    store: Store,
    session_key: str,
    target: str,
    *,
    lossless: LosslessConfig,
    settings: CompactionSettings,
    budget: int,
) -> MigrationPlan:
    """What :func:`migrate_key` would do for this key, computed by the same planners; writes nothing.

    Raises:
        ConfigError: `target` is not an engine migrate knows.
        NotFoundError: the key has no active session.
    """
    engine = _check_target(target)
    async with store.read() as conn:
        session = await repo.active_session(conn, session_key)
        if session is None:
            raise NotFoundError(f"session key {session_key!r} has no active session")
        items, messages, tokens = (await conn.execute(_TOTALS, {"sid": session.session_id})).one()
        pending = await pending_backfill(conn, session_key)
        plan = MigrationPlan(
            session_key,
            session.session_id,
            current_engine(session),
            engine,
            int(items),
            int(messages),
            int(items) - int(messages),
            int(tokens),
            action="",
            resumable=pending is not None and pending.get("session_id") == session.session_id,
        )
        if not plan.changes:
            plan.action = f"nothing: already on {engine}"
        elif engine == "lossless-claw":
            kept = await _tail_messages(conn, session.session_id, lossless, budget)
            _describe_lossless(plan, kept)
        else:
            entries = await repo.load_context(conn, session.session_id)
            _describe_legacy(plan, _legacy_plan(entries, settings, budget))
    return plan


_TOTALS = text(
    "SELECT count(*), coalesce(sum(item_type = 'message'), 0), coalesce(sum(token_count), 0) "
    "FROM context_items WHERE session_id = :sid"
)
_PAGE_START = text("SELECT ordinal FROM context_items WHERE session_id = :sid ORDER BY ordinal DESC LIMIT 1 OFFSET :n")


async def _tail_messages(conn: AsyncConnection, session_id: str, config: LosslessConfig, budget: int) -> int:
    """Raw messages in the fresh tail lossless-claw would protect, reading only the end of a long context."""
    size = 8 * config.fresh_tail_count + 256
    while True:
        boundary = await conn.scalar(_PAGE_START, {"sid": session_id, "n": size})
        entries = await repo.load_context(conn, session_id, after=boundary)
        view = [(e.message if isinstance(e, MessageItem) else None, e.token_count) for e in entries]
        tail = fresh_tail_start(view, config.fresh_tail_count, config.tail_max_tokens(budget))
        # A tail reaching the page's first item may reach further back: read a larger page.
        if tail > 0 or boundary is None:
            return sum(1 for e in entries[tail:] if isinstance(e, MessageItem))
        size *= 4


def _describe_lossless(plan: MigrationPlan, kept: int) -> None:
    plan.kept_messages = kept
    plan.to_summarize_messages = plan.messages - kept
    plan.to_summarize_summaries = plan.summaries
    plan.action = (
        f"build the DAG: leaf-summarise {plan.to_summarize_messages} raw message(s) outside the fresh tail, "
        f"adopt {plan.summaries} summary(ies), keep {plan.kept_messages} recent message(s); rotate to a "
        "lossless-claw session"
    )


def _describe_legacy(plan: MigrationPlan, compaction: CompactionPlan | None) -> None:
    if compaction is None:
        plan.kept_messages = plan.messages
        plan.action = (
            f"nothing to summarise: keep the view as it is ({plan.messages} message(s), {plan.summaries} "
            "summary(ies)); rotate to a legacy session"
        )
        return
    plan.to_summarize_messages = len(compaction.covered)
    plan.to_summarize_summaries = len(compaction.previous)
    plan.kept_messages = sum(1 for e in compaction.kept if isinstance(e, MessageItem))
    plan.action = (
        f"write one legacy summary of {plan.to_summarize_summaries} summary(ies) and "
        f"{plan.to_summarize_messages} message(s), keep {plan.kept_messages} recent message(s); "
        "rotate to a legacy session"
    )


async def migrate_key(
    store: Store,
    session_key: str,
    target: str,
    *,
    lossless: LosslessConfig,
    settings: CompactionSettings,
    summarizer: Summarizer,
    budget: int,
    batch: int = DEFAULT_BATCH,
    progress: Callable[[BackfillProgress], None] | None = None,
) -> MigrationResult:
    """Switch one key's active context to `target`'s projection, rotating its session.

    Raises:
        ConfigError: `target` is not an engine migrate knows.
        NotFoundError: the key has no active session.
        CompactionError: the summary could not be written (nothing was changed).
    """
    plan = await plan_migration(store, session_key, target, lossless=lossless, settings=settings, budget=budget)
    if not plan.changes:
        return MigrationResult(plan, migrated=False)
    if plan.target == "lossless-claw":
        done = await backfill_key(
            store,
            session_key,
            config=lossless,
            summarizer=summarizer,
            budget=budget,
            batch=batch,
            reason=MIGRATION_REASON,
            progress=progress,
        )
        return MigrationResult(
            plan, True, done.successor_session_id, done.summaries_created, done.tokens_after, notes=done.notes
        )
    return await _to_legacy(store, plan, settings, summarizer, budget)


async def _to_legacy(
    store: Store, plan: MigrationPlan, settings: CompactionSettings, summarizer: Summarizer, budget: int
) -> MigrationResult:
    async with store.read() as conn:
        entries = await repo.load_context(conn, plan.session_id)
    if _legacy_plan(entries, settings, budget) is None:
        return await _rotate_as_is(store, plan)
    keep = _legacy_keep(entries, settings, budget)
    result = await compact_session(
        store,
        plan.session_id,
        settings=settings.model_copy(update={"keep_recent_tokens": keep}),
        summarizer=summarizer,
        token_budget=budget,
        custom_instructions=None,
        force=True,
        trigger=MIGRATION_REASON,
        engine_id="legacy",
        rotation_reason=MIGRATION_REASON,
    )
    if not result.ok or not result.compacted or result.result is None:
        raise CompactionError(f"migrating {plan.session_key!r} to legacy failed, nothing changed: {result.reason}")
    return MigrationResult(plan, True, result.result.session_id, 1, result.result.tokens_after)


async def _rotate_as_is(store: Store, plan: MigrationPlan) -> MigrationResult:
    async with store.transaction() as conn:
        session = await repo.get_session(conn, plan.session_id)
        if session.status != "active":
            raise CompactionError(f"session {plan.session_id} was rotated meanwhile; run migrate again")
        entries = await repo.load_context(conn, plan.session_id)
        items = [e.ref for e in entries]
        successor = await repo.rotate_session(conn, session, items, reason=MIGRATION_REASON, engine_id=plan.target)
    return MigrationResult(plan, True, successor.session_id, 0, sum(t for _, _, t in items))
