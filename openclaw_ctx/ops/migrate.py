"""Engine migration: move a session key's active context from one engine's projection to the other's.

- legacy → an engine with the adoption capability (lossless-claw): the engine's own
  :meth:`~openclaw_ctx.contract.adoption.AdoptsContext.adopt_context` builds its projection
  (lossless-claw: the DAG from the raw messages, adopting the summaries already there, so the legacy
  summary becomes a node of the DAG, its edges intact). The engine comes through the registry
  (:func:`openclaw_ctx.ops.adopters.adopter_for`); this module never imports it.
- lossless-claw → legacy: the built-in compaction (:func:`openclaw_ctx.compaction.builtin.compact_session`)
  writes ONE legacy summary of the view: every DAG summary in the context and the older raw
  messages; the recent messages after the last summary stay verbatim.

Either way the session rotates (``rotation_reason = 'migration'``, the successor's `engine_id` is
the target engine) in one transaction, and nothing is deleted: every message stays reachable from
the new context through summary edges. A dry run computes the same plan and writes nothing.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from pydantic import BaseModel, Field, computed_field
from sqlalchemy import text

from openclaw_ctx._ids import LEGACY_ENGINE_ID
from openclaw_ctx.compaction import compact_session
from openclaw_ctx.compaction.plan import CompactionPlan, keep_recent_budget, plan_compaction
from openclaw_ctx.config import CompactionSettings
from openclaw_ctx.contract.adoption import DEFAULT_BATCH, AdoptionProgress, AdoptsContext
from openclaw_ctx.errors import CompactionError, ConfigError, NotFoundError
from openclaw_ctx.store import repo
from openclaw_ctx.store.repo import MessageItem, ResolvedItem, SummaryItem
from openclaw_ctx.store.store import Store
from openclaw_ctx.summarize.base import Summarizer

__all__ = [
    "DEFAULT_BATCH",
    "MIGRATION_REASON",
    "MigrationPlan",
    "MigrationResult",
    "current_engine",
    "keys_to_migrate",
    "migrate_key",
    "plan_migration",
]

MIGRATION_REASON = "migration"


def current_engine(session: repo.SessionRow) -> str:
    """The engine whose projection a session's context holds (rows without one are the host default, legacy)."""
    return session.engine_id or LEGACY_ENGINE_ID


def _alias(name: str) -> Any:
    return Field(serialization_alias=name)


class MigrationPlan(BaseModel):
    """What migrating one key would do (all a dry run reports); ``model_dump(by_alias=True)`` is its JSON."""

    session_key: str = _alias("sessionKey")
    session_id: str = _alias("sessionId")
    source: str = _alias("from")
    target: str = _alias("to")
    items: int = _alias("contextItems")
    messages: int = _alias("contextMessages")
    summaries: int = _alias("contextSummaries")
    tokens: int = _alias("contextTokens")
    action: str = ""
    to_summarize_messages: int = Field(0, serialization_alias="summarizeMessages")
    to_summarize_summaries: int = Field(0, serialization_alias="summarizeSummaries")
    kept_messages: int = Field(0, serialization_alias="keptMessages")
    resumable: bool = Field(False, serialization_alias="resumesBackfill")

    @computed_field  # type: ignore[prop-decorator]
    @property
    def changes(self) -> bool:
        """False when the key is already on the target engine."""
        return self.source != self.target

    def to_json(self) -> dict[str, Any]:
        """The camelCase JSON the CLI prints."""
        return self.model_dump(by_alias=True)


class MigrationResult(BaseModel):
    """What migrating one key did; its JSON is the plan's with the outcome beside it."""

    plan: MigrationPlan = Field(exclude=True)
    migrated: bool
    finished: bool = True
    successor_session_id: str | None = Field(None, serialization_alias="successorSessionId")
    summaries_created: int = Field(0, serialization_alias="summariesCreated")
    tokens_after: int | None = Field(None, serialization_alias="tokensAfter")
    notes: list[str] = Field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        """The plan's JSON followed by the outcome's."""
        return {**self.plan.model_dump(by_alias=True), **self.model_dump(by_alias=True)}


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
    adopter: AdoptsContext | None,
    settings: CompactionSettings,
    budget: int,
) -> MigrationPlan:
    """What :func:`migrate_key` would do for this key, computed by the same planners; writes nothing.

    `adopter` is the target engine (from :func:`openclaw_ctx.ops.adopters.adopter_for`) unless the
    target is legacy, whose projection the built-in compaction writes.

    Raises:
        ConfigError: the target is not legacy and no adopting engine was given.
        NotFoundError: the key has no active session.
    """
    if target != LEGACY_ENGINE_ID and adopter is None:
        raise ConfigError(f"migrating to {target!r} needs that engine's adoption capability")
    async with store.read() as conn:
        session = await repo.active_session(conn, session_key)
        if session is None:
            raise NotFoundError(f"session key {session_key!r} has no active session")
        items, messages, tokens = (await conn.execute(_TOTALS, {"sid": session.session_id})).one()
        plan = MigrationPlan(
            session_key=session_key,
            session_id=session.session_id,
            source=current_engine(session),
            target=target,
            items=int(items),
            messages=int(messages),
            summaries=int(items) - int(messages),
            tokens=int(tokens),
        )
        if not plan.changes:
            plan.action = f"nothing: already on {target}"
            return plan
        if adopter is None:
            entries = await repo.load_context(conn, session.session_id)
            _describe_legacy(plan, _legacy_plan(entries, settings, budget))
            return plan
    preview = await adopter.preview_adoption(session_key, budget=budget)
    plan.resumable = preview.resumable
    _describe_adoption(plan, preview.kept_messages)
    return plan


_TOTALS = text(
    "SELECT count(*), coalesce(sum(item_type = 'message'), 0), coalesce(sum(token_count), 0) "
    "FROM context_items WHERE session_id = :sid"
)


def _describe_adoption(plan: MigrationPlan, kept: int) -> None:
    plan.kept_messages = kept
    plan.to_summarize_messages = plan.messages - kept
    plan.to_summarize_summaries = plan.summaries
    plan.action = (
        f"build the DAG: leaf-summarise {plan.to_summarize_messages} raw message(s) outside the fresh tail, "
        f"adopt {plan.summaries} summary(ies), keep {plan.kept_messages} recent message(s); rotate to a "
        f"{plan.target} session"
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
    adopter: AdoptsContext | None,
    settings: CompactionSettings,
    summarizer: Summarizer,
    budget: int,
    batch: int = DEFAULT_BATCH,
    progress: Callable[[AdoptionProgress], None] | None = None,
) -> MigrationResult:
    """Switch one key's active context to `target`'s projection, rotating its session.

    Raises:
        ConfigError: the target is not legacy and no adopting engine was given.
        NotFoundError: the key has no active session.
        CompactionError: the summary could not be written (nothing was changed).
    """
    # The key's lock holds off turns of other processes from planning to the rotation.
    async with store.locks.key(session_key):
        return await _migrate_locked(store, session_key, target, adopter, settings, summarizer, budget, batch, progress)


async def _migrate_locked(
    store: Store,
    session_key: str,
    target: str,
    adopter: AdoptsContext | None,
    settings: CompactionSettings,
    summarizer: Summarizer,
    budget: int,
    batch: int,
    progress: Callable[[AdoptionProgress], None] | None,
) -> MigrationResult:
    plan = await plan_migration(store, session_key, target, adopter=adopter, settings=settings, budget=budget)
    if not plan.changes:
        return MigrationResult(plan=plan, migrated=False)
    if adopter is not None:
        done = await adopter.adopt_context(
            session_key, budget=budget, batch=batch, reason=MIGRATION_REASON, progress=progress
        )
        return MigrationResult(
            plan=plan,
            migrated=True,
            successor_session_id=done.successor_session_id,
            summaries_created=done.summaries_created,
            tokens_after=done.tokens_after,
            notes=done.notes,
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
        engine_id=LEGACY_ENGINE_ID,
        rotation_reason=MIGRATION_REASON,
    )
    if not result.ok or not result.compacted or result.result is None:
        raise CompactionError(f"migrating {plan.session_key!r} to legacy failed, nothing changed: {result.reason}")
    return MigrationResult(
        plan=plan,
        migrated=True,
        successor_session_id=result.result.session_id,
        summaries_created=1,
        tokens_after=result.result.tokens_after,
    )


async def _rotate_as_is(store: Store, plan: MigrationPlan) -> MigrationResult:
    async with store.transaction() as conn:
        session = await repo.get_session(conn, plan.session_id)
        if session.status != "active":
            raise CompactionError(f"session {plan.session_id} was rotated meanwhile; run migrate again")
        entries = await repo.load_context(conn, plan.session_id)
        items = [e.ref for e in entries]
        successor = await repo.rotate_session(conn, session, items, reason=MIGRATION_REASON, engine_id=plan.target)
    return MigrationResult(
        plan=plan, migrated=True, successor_session_id=successor.session_id, tokens_after=sum(t for _, _, t in items)
    )
