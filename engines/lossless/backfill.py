"""Bulk backfill: build the lossless-claw DAG over a key's whole context in bounded, resumable batches.

The active session's context items are read a page at a time (``--batch`` raw items). Each batch
runs the lossless engine's own sweep (:func:`engines.lossless.compaction.sweep`) over a *window*:
the summaries built so far plus the raw messages still outside a summary, then the new page. Leaf
passes summarise the raw messages outside the window's fresh tail; condensed passes fold summaries
as they accumulate; summaries already in the context (a legacy summary, earlier DAG nodes) are
adopted as nodes of the DAG. Each batch commits, in one transaction, its new summary nodes with
their edges and the progress record (``engine_state``: engine ``openclaw-ctx``, name ``backfill``):
the read cursor and the window. An interrupted backfill resumes from the last committed batch and
ends exactly where an uninterrupted one would.

If the session rotates between runs (a running agent compacted it), the next run starts over: the
nodes the abandoned run wrote were never part of any context, so they are deleted (in the same
transaction that resets the progress) rather than left to cover their messages a second time.

When every page is consumed, one transaction rotates the session: the successor holds the final
window (the DAG's top summaries and the fresh tail) and belongs to ``lossless-claw``; a
``compactions`` row records it. Nothing is deleted: the old session, its items and every message stay.

Sweeps run without their wall-clock deadline and iteration cap here: a batch is bounded by its size,
and a time limit would make the result depend on the machine.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import func, select
from sqlalchemy.ext.asyncio import AsyncConnection

from engines.lossless.assemble import RenderCache
from engines.lossless.compaction import sweep
from engines.lossless.config import LosslessConfig
from engines.lossless.ingest import ENGINE_ID as LOSSLESS
from engines.lossless.items import plan_items
from engines.lossless.planning import PlanItem, SweepSettings
from openclaw_ctx.contract.adoption import DEFAULT_BATCH, AdoptionProgress, AdoptionReport
from openclaw_ctx.errors import CompactionError, NotFoundError
from openclaw_ctx.store import repo
from openclaw_ctx.store.models import ContextItem, Message, Summary
from openclaw_ctx.store.repo import ItemRef, MessageItem, ResolvedItem, SessionRow, SummaryItem, SummaryRef
from openclaw_ctx.store.store import Store
from openclaw_ctx.summarize.base import Summarizer

__all__ = [
    "STATE_ENGINE",
    "STATE_NAME",
    "backfill_key",
    "pending_backfill",
]

STATE_ENGINE = "openclaw-ctx"
STATE_NAME = "backfill"
_UNBOUNDED = {
    "max_sweep_iterations": 1_000_000_000,
    "sweep_deadline_ms": 1_000_000_000_000,
    "compact_until_under_deadline_ms": 1_000_000_000_000,
}

WindowRef = ItemRef


@dataclass
class _State:
    session_id: str
    cursor: int
    window: list[WindowRef]
    batch: int
    budget: int
    batches: int = 0
    created: list[str] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return {
            "session_id": self.session_id,
            "cursor": self.cursor,
            "window": [list(w) for w in self.window],
            "batch": self.batch,
            "budget": self.budget,
            "batches": self.batches,
            "created": self.created,
        }

    @classmethod
    def from_json(cls, raw: dict[str, Any]) -> _State:
        window: list[WindowRef] = [
            ItemRef("message", int(ref), int(tokens))
            if kind == "message"
            else ItemRef("summary", str(ref), int(tokens))
            for kind, ref, tokens in raw["window"]
        ]
        return cls(
            session_id=str(raw["session_id"]),
            cursor=int(raw["cursor"]),
            window=window,
            batch=int(raw["batch"]),
            budget=int(raw["budget"]),
            batches=int(raw.get("batches", 0)),
            created=[str(s) for s in raw.get("created", [])],
        )


async def pending_backfill(conn: AsyncConnection, session_key: str) -> dict[str, Any] | None:
    """The stored progress of an interrupted backfill of a key, if any."""
    raw = await repo.get_engine_state(conn, STATE_ENGINE, session_key, STATE_NAME)
    return raw if isinstance(raw, dict) else None


async def backfill_key(
    store: Store,
    session_key: str,
    *,
    config: LosslessConfig,
    summarizer: Summarizer,
    budget: int,
    batch: int = DEFAULT_BATCH,
    reason: str = "backfill",
    stop_after: int | None = None,
    progress: Callable[[AdoptionProgress], None] | None = None,
) -> AdoptionReport:
    """Build the lossless DAG over the key's active context and rotate it to a lossless-claw session.

    Args:
        store: The store.
        session_key: Whose context.
        config: The lossless-claw configuration (fan-ins, chunk sizes, fresh tail).
        summarizer: Writes the leaf and condensed summaries.
        budget: The context window the DAG is shaped for (thresholds, fresh-tail cap).
        batch: Context items read per batch (a resumed run keeps the batch and budget it started with).
        reason: The successor's `rotation_reason` and the audit row's trigger.
        stop_after: Stop (resumably) after this many batches in this run.
        progress: Called after every committed batch.

    Raises:
        NotFoundError: the key has no active session.
        CompactionError: the session was rotated by someone else mid-way (the next run starts over).
    """
    if batch < 1:
        raise ValueError("batch must be at least 1")
    session, state, resumed, total, before, notes = await _start(store, session_key, batch, budget)
    report = AdoptionReport(
        session_key=session_key,
        source_session_id=session.session_id,
        finished=False,
        resumed=resumed,
        items_total=total,
        tokens_before=before,
    )
    report.notes += notes
    sweep_config = config.model_copy(update=_UNBOUNDED)
    done_now = 0
    while stop_after is None or done_now < stop_after:
        async with store.read() as conn:
            page = await repo.load_context(conn, session.session_id, after=state.cursor, limit=state.batch)
            if not page:
                break
            entries = await _window_entries(conn, state.window) + page
            items = await plan_items(conn, entries, RenderCache(), store.counter, config)
        outcome = await sweep(items, SweepSettings(sweep_config, state.budget), summarizer, store.counter)
        async with store.transaction() as conn:
            await _check_active(conn, session, state)
            for node in outcome.created:
                await repo.insert_summary(conn, session, node)
            state.cursor = page[-1].ordinal
            state.window = [_ref(i) for i in outcome.items]
            state.batches += 1
            state.created += [n.summary_id for n in outcome.created]
            await repo.set_engine_state(conn, STATE_ENGINE, session_key, STATE_NAME, state.to_json())
            done = await _items_upto(conn, session.session_id, state.cursor)
        done_now += 1
        if progress is not None:
            progress(AdoptionProgress(session_key, done, max(total, done), state.batches, len(state.created)))
    report.batches, report.summaries_created = state.batches, len(state.created)
    if stop_after is not None and done_now >= stop_after and await _has_more(store, session, state):
        report.notes.append(f"stopped after {done_now} batch(es); run again to resume")
        return report
    return await _finish(store, session, state, report, reason)


async def _start(
    store: Store, key: str, batch: int, budget: int
) -> tuple[SessionRow, _State, bool, int, int, list[str]]:
    async with store.transaction() as conn:
        session = await repo.active_session(conn, key)
        if session is None:
            raise NotFoundError(f"session key {key!r} has no active session")
        raw = await pending_backfill(conn, key)
        resumed = raw is not None and raw.get("session_id") == session.session_id
        notes: list[str] = []
        if resumed:
            assert raw is not None
            state = _State.from_json(raw)
        else:
            if raw is not None:
                stale = _State.from_json(raw)
                dropped = await repo.discard_unpublished_summaries(conn, stale.created)
                notes.append(
                    f"the session rotated since the interrupted backfill ({stale.batches} batch(es)); "
                    f"started over and dropped its {dropped} unpublished summary(ies)"
                )
            state = _State(session.session_id, -1, [], batch, budget)
            await repo.set_engine_state(conn, STATE_ENGINE, key, STATE_NAME, state.to_json())
        total = await _items_upto(conn, session.session_id, None)
        before = await repo.context_tokens(conn, session.session_id)
    return session, state, resumed, total, before, notes


async def _items_upto(conn: AsyncConnection, session_id: str, ordinal: int | None) -> int:
    query = select(func.count()).select_from(ContextItem).where(ContextItem.session_id == session_id)
    if ordinal is not None:
        query = query.where(ContextItem.ordinal <= ordinal)
    return int(await conn.scalar(query) or 0)


async def _has_more(store: Store, session: SessionRow, state: _State) -> bool:
    async with store.read() as conn:
        return bool(await repo.load_context(conn, session.session_id, after=state.cursor, limit=1))


async def _check_active(conn: AsyncConnection, session: SessionRow, state: _State) -> None:
    current = await repo.active_session(conn, session.session_key)
    if current is None or current.session_id != state.session_id:
        # The next run sees progress of a rotated session, drops its nodes and starts over.
        raise CompactionError(
            f"session key {session.session_key!r} was rotated by someone else during the backfill "
            "(a compaction by a running agent?); nothing of this batch was written; run the backfill again"
        )


def _ref(item: PlanItem) -> WindowRef:
    if item.kind == "message":
        return ItemRef("message", int(item.ref), item.tokens)
    return ItemRef("summary", str(item.ref), item.tokens)


_SUMMARY_COLUMNS = (
    Summary.summary_id,
    Summary.kind,
    Summary.depth,
    Summary.content,
    Summary.descendant_count,
    Summary.earliest_at,
    Summary.latest_at,
    Summary.summarizer,
    Summary.fallback_level,
    Summary.descendant_token_count,
    Summary.source_message_token_count,
)


async def _summary_rows(conn: AsyncConnection, ids: Sequence[str]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for start in range(0, len(ids), 500):
        rows = await conn.execute(select(*_SUMMARY_COLUMNS).where(Summary.summary_id.in_(ids[start : start + 500])))
        out.update({r.summary_id: r for r in rows})
    return out


def _summary_ref(row: Any) -> SummaryRef:
    names = ("kind", "depth", "content", "descendant_count", "earliest_at", "latest_at", "summarizer", "fallback_level")
    return SummaryRef(row.summary_id, *(getattr(row, name) for name in names))


async def _window_entries(conn: AsyncConnection, window: Sequence[WindowRef]) -> list[ResolvedItem]:
    """The carried window as context entries (ordinals are placeholders: the window precedes the page)."""
    message_ids = [int(ref) for kind, ref, _ in window if kind == "message"]
    messages = await repo.load_messages(conn, message_ids)
    entry_ids: dict[int, str | None] = {}
    for start in range(0, len(message_ids), 500):
        rows = await conn.execute(
            select(Message.message_id, Message.entry_id).where(Message.message_id.in_(message_ids[start : start + 500]))
        )
        entry_ids.update({int(mid): eid for mid, eid in rows})
    summaries = await _summary_rows(conn, [str(ref) for kind, ref, _ in window if kind == "summary"])
    out: list[ResolvedItem] = []
    for i, (kind, ref, tokens) in enumerate(window):
        ordinal = i - len(window) - 1
        if kind == "message":
            mid = int(ref)
            out.append(MessageItem(ordinal, tokens, mid, messages[mid], entry_ids.get(mid), None))
        else:
            out.append(SummaryItem(ordinal, tokens, _summary_ref(summaries[str(ref)])))
    return out


async def _finish(
    store: Store, session: SessionRow, state: _State, report: AdoptionReport, reason: str
) -> AdoptionReport:
    """The one rotating transaction: the final window becomes a lossless-claw successor session."""
    started = time.perf_counter()
    async with store.transaction() as conn:
        await _check_active(conn, session, state)
        if await repo.load_context(conn, session.session_id, after=state.cursor, limit=1):
            raise CompactionError(
                f"session key {session.session_key!r} received new messages while the backfill finished; run it again"
            )
        if state.cursor < 0:
            # An empty context: nothing was read, the successor is empty too.
            state.window = []
        window = [repo.ItemRef(kind, ref, tokens) for kind, ref, tokens in state.window]
        after = sum(item.tokens for item in window)
        if not state.created and session.engine_id == LOSSLESS:
            # Already a lossless-claw session and nothing to summarise (a finished backfill run again):
            # a rotation would add a session and change nothing.
            await repo.set_engine_state(conn, STATE_ENGINE, session.session_key, STATE_NAME, None)
            report.finished, report.tokens_after, report.successor_session_id = True, after, session.session_id
            report.notes.append("nothing to do: already on lossless-claw, nothing to summarise; not rotated")
            return report
        if not state.created:
            # Nothing was summarised (an empty or all-fresh context): a plain rotation, no audit row.
            successor = await repo.rotate_session(conn, session, window, reason=reason, engine_id=LOSSLESS)
        else:
            depths = await conn.execute(select(func.max(Summary.depth)).where(Summary.summary_id.in_(state.created)))
            report.max_depth = depths.scalar()
            first_kept = next((int(item.ref) for item in window if item.kind == "message"), None)
            first_entry = await conn.scalar(select(Message.entry_id).where(Message.message_id == first_kept))
            record = repo.CompactionRecord(
                engine_id=LOSSLESS,
                trigger=reason,
                tokens_before=report.tokens_before,
                duration_ms=int((time.perf_counter() - started) * 1000),
                reason=f"{reason}: {state.batches} batch(es)",
                rotation_reason=reason,
                first_kept_message_id=first_kept,
                first_kept_entry_id=first_entry,
                details={"batches": state.batches, "batch": state.batch, "budget": state.budget},
                prior_summary_ids=tuple(state.created),
            )
            # The summaries were committed batch by batch; this transaction rotates and audits.
            successor = await repo.commit_compaction(conn, session, [], window, record)
        await repo.set_engine_state(conn, STATE_ENGINE, session.session_key, STATE_NAME, None)
    report.finished = True
    report.tokens_after = after
    report.successor_session_id = successor.session_id
    return report
