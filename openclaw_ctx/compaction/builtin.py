"""The built-in (legacy) summarising compaction, and the bridge engines call to reach it.

:func:`compact_session` loads a session's context, plans the cut (:mod:`openclaw_ctx.compaction.plan`),
summarises the older part (chunked, iterative over the previous summary, with a split-turn prefix),
and then writes everything in ONE transaction (:func:`~openclaw_ctx.store.repo.commit_compaction`):
the `legacy` summary row with edges to every message it covers and to the summary it updates, the
successor session with its context items, and the `compactions` audit row. A crash at any point
leaves the store as before or fully after.

A summarizer auth failure writes nothing; any other summarizer failure or timeout still compacts,
with the deterministic fallback summary (``fallback_level="deterministic"``).
"""

from __future__ import annotations

import asyncio
import json
import math
import re
import time
from collections.abc import Awaitable
from dataclasses import dataclass, field
from typing import Any, TypeVar

from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncConnection

from openclaw_ctx._time import iso_from_ms
from openclaw_ctx.compaction.plan import (
    CompactionPlan,
    adaptive_chunk_ratio,
    chunk_messages,
    compose_summary,
    extract_file_ops,
    is_oversized,
    keep_recent_budget,
    max_chunk_tokens,
    oversized_note,
    plan_compaction,
    plan_messages,
    should_compact,
    summary_target,
)
from openclaw_ctx.config import CompactionSettings
from openclaw_ctx.contract import AbortSignal, CompactParams, CompactResult, CompactResultDetail, EngineContext
from openclaw_ctx.errors import AbortError, NotFoundError, SummarizerAuthError, SummarizerError
from openclaw_ctx.messages import AgentMessage
from openclaw_ctx.store import repo
from openclaw_ctx.store.models import ContextItem, Summary
from openclaw_ctx.store.repo import ItemRef, MessageItem, ResolvedItem, SummaryItem
from openclaw_ctx.store.store import Store
from openclaw_ctx.summarize.base import Summarizer, SummaryKind, SummaryRequest, reset_spend_guard
from openclaw_ctx.summarize.fallback import deterministic_fallback
from openclaw_ctx.summarize.prompts import (
    SYSTEM_PROMPT,
    history_prompt,
    serialize_for_summary,
    serialize_message,
    turn_prefix_prompt,
)
from openclaw_ctx.tokens import TokenCounter

__all__ = [
    "FALLBACK_SUMMARIZER",
    "SUMMARY_TIME_SHARE",
    "compact_session",
    "delegate_compaction_to_runtime",
    "should_compact",
    "summary_item_tokens",
]

FALLBACK_SUMMARIZER = "deterministic-fallback"
SUMMARY_PREFIX = "The conversation history before this point was compacted into the following summary:\n\n<summary>\n"
SUMMARY_SUFFIX = "\n</summary>"
# Summarisation gets this share of the compaction timeout; the rest is left for the fallback and the write.
SUMMARY_TIME_SHARE = 0.9
MIN_SUMMARIZER_WINDOW = 16_000
DEFAULT_SUMMARIZER_WINDOW = 128_000
_FILE_TAGS = re.compile(r"\n*<(read-files|modified-files)>.*?</\1>", re.DOTALL)
T = TypeVar("T")


def summary_item_tokens(content: str, counter: TokenCounter) -> int:
    """Tokens of a legacy summary as the model sees it (the compactionSummary user message)."""
    return counter.count(SUMMARY_PREFIX + content + SUMMARY_SUFFIX) + 4


def _not_done(reason: str, *, ok: bool = True) -> CompactResult:
    return CompactResult(ok=ok, compacted=False, reason=reason)


async def _abortable(awaitable: Awaitable[T], signal: AbortSignal | None) -> T:
    """Await `awaitable`, cancelling it and raising the abort reason if `signal` fires first."""
    if signal is None:
        return await awaitable
    signal.raise_if_aborted()
    task = asyncio.ensure_future(awaitable)
    waiter = asyncio.ensure_future(signal.wait())
    try:
        await asyncio.wait({task, waiter}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        waiter.cancel()
        if not task.done():
            task.cancel()
    if task.done() and not task.cancelled():
        return task.result()
    signal.raise_if_aborted()
    raise AbortError("operation aborted")


# --- summarisation ----------------------------------------------------------------------------------


@dataclass
class _Summaries:
    history: str
    prefix: str | None
    summarizer: str
    model: str | None = None
    fallback_level: str = "none"
    fallback_reason: str | None = None


@dataclass
class _Job:
    summarizer: Summarizer
    settings: CompactionSettings
    custom_instructions: str | None
    target: int
    window: int
    counter: TokenCounter
    abort_signal: AbortSignal | None
    session_key: str
    names: list[str] = field(default_factory=list)
    models: list[str] = field(default_factory=list)

    async def call(self, kind: SummaryKind, source: str, previous: str | None, target: int) -> str:
        policy = self.settings.identifier_policy
        custom_ids = self.settings.identifier_instructions
        if kind == "turn_prefix":
            prompt = turn_prefix_prompt(source, identifier_policy=policy, identifier_instructions=custom_ids)
        else:
            prompt = history_prompt(
                source,
                previous,
                self.custom_instructions,
                identifier_policy=policy,
                identifier_instructions=custom_ids,
            )
        request = SummaryRequest(
            kind=kind,
            source_text=source,
            target_tokens=target,
            system_prompt=SYSTEM_PROMPT,
            prompt=prompt,
            previous_summary=previous,
            custom_instructions=self.custom_instructions,
            # What a provider's spend guard counts calls against.
            metadata={"session_key": self.session_key},
        )
        output = await _abortable(self.summarizer.summarize(request), self.abort_signal)
        self.names.append(output.summarizer)
        if output.model:
            self.models.append(output.model)
        if not output.text.strip():
            raise SummarizerError(f"{output.summarizer} returned an empty summary")
        return output.text

    def pieces(self, messages: list[AgentMessage]) -> list[tuple[AgentMessage, str, int]]:
        out = []
        for message in messages:
            text = serialize_message(message)
            tokens = math.ceil(len(text) / 4)
            if is_oversized(tokens, self.window):
                text = oversized_note(message, tokens)
                tokens = math.ceil(len(text) / 4)
            out.append((message, text, tokens))
        return out

    async def history(self, messages: list[AgentMessage], previous: str | None) -> str:
        """Chunked, sequential summarisation: each chunk updates the summary of the ones before."""
        if not messages:
            return previous or "No prior history."
        pieces = self.pieces(messages)
        text_of = {id(m): t for m, t, _ in pieces}
        tokens_of = {id(m): n for m, _, n in pieces}
        total = sum(tokens_of.values())
        ratio = adaptive_chunk_ratio(total, len(messages), self.window)
        chunks = chunk_messages(messages, max_chunk_tokens(self.window, ratio), lambda m: tokens_of[id(m)])
        summary = previous
        for chunk in chunks:
            source = "\n\n".join(text_of[id(m)] for m in chunk if text_of[id(m)])
            summary = await self.call("history", source, summary, self.target)
        assert summary is not None
        return summary


async def _summarize(job: _Job, plan: CompactionPlan, previous: str | None, timeout_s: float | None) -> _Summaries:
    history_msgs = plan_messages(plan.history + plan.orphans)
    prefix_msgs = plan_messages(plan.prefix)
    try:
        async with asyncio.timeout(timeout_s):
            history = await job.history(history_msgs, previous)
            prefix = None
            if prefix_msgs:
                source = serialize_for_summary(prefix_msgs)
                prefix = await job.call("turn_prefix", source, None, max(128, job.target // 2))
    except SummarizerAuthError:
        raise
    except AbortError:
        raise
    except Exception as exc:  # any other failure still compacts, with the deterministic fallback
        reason = "timed out" if isinstance(exc, TimeoutError) else f"{type(exc).__name__}: {exc}"
        source = serialize_for_summary(history_msgs + prefix_msgs)
        if previous:
            source = f"{previous}\n\n{source}"
        text = deterministic_fallback(source, job.target, job.counter)
        return _Summaries(text, None, FALLBACK_SUMMARIZER, None, "deterministic", reason)
    name = "+".join(dict.fromkeys(job.names)) or job.summarizer.name
    return _Summaries(history, prefix, name, job.models[-1] if job.models else None)


# --- loading and writing ----------------------------------------------------------------------------


async def _previous_rows(conn: AsyncConnection, ids: list[str]) -> dict[str, tuple[Any, int]]:
    if not ids:
        return {}
    rows = await conn.execute(
        select(Summary.summary_id, Summary.details_json, Summary.descendant_token_count).where(
            Summary.summary_id.in_(ids)
        )
    )
    return {sid: (json.loads(raw) if raw else None, int(dtc or 0)) for sid, raw, dtc in rows}


def _time_range(plan: CompactionPlan) -> tuple[str | None, str | None]:
    stamps = [iso_from_ms(getattr(e.message, "timestamp", None)) for e in plan.covered]
    stamps += [e.summary.earliest_at for e in plan.previous]
    stamps += [e.summary.latest_at for e in plan.previous]
    known = sorted(s for s in stamps if s)
    return (known[0], known[-1]) if known else (None, None)


class _Conflict(Exception):
    """The session changed between planning and writing; nothing is written."""


async def _check_unchanged(conn: AsyncConnection, session_id: str, entries: list[ResolvedItem]) -> list[ItemRef]:
    """Verify the planned context is still the session's; return items appended since (carried over)."""
    session = await repo.get_session(conn, session_id)
    if session.status != "active":
        raise _Conflict(f"session {session_id} was {session.status} during compaction")
    rows = (
        await conn.execute(
            select(
                ContextItem.ordinal,
                ContextItem.message_id,
                ContextItem.summary_id,
                ContextItem.item_type,
                ContextItem.token_count,
            )
            .where(ContextItem.session_id == session_id)
            .order_by(ContextItem.ordinal)
        )
    ).all()
    stored = [(r[0], _row_ref(r[1], r[2], r[3], r[4])) for r in rows]
    if stored[: len(entries)] != [(e.ordinal, e.ref) for e in entries]:
        raise _Conflict(f"the context of session {session_id} changed during compaction")
    return [ref for _, ref in stored[len(entries) :]]


def _row_ref(message_id: int | None, summary_id: str | None, item_type: str, tokens: int) -> ItemRef:
    if item_type == "message":
        return ItemRef("message", int(message_id or 0), int(tokens))
    return ItemRef("summary", str(summary_id), int(tokens))


async def compact_session(
    store: Store,
    session_id: str,
    *,
    settings: CompactionSettings,
    summarizer: Summarizer,
    token_budget: int | None,
    custom_instructions: str | None,
    force: bool,
    trigger: str,
    engine_id: str = "legacy",
    abort_signal: AbortSignal | None = None,
    timeout_s: float | None = None,
    current_token_count: int | None = None,
    rotation_reason: str = "compaction",
) -> CompactResult:
    """Compact one session: summarise history before the cut, rotate to a successor session.

    Args:
        store: The store holding the session.
        session_id: The (active) session to compact.
        settings: `agents.defaults.compaction`.
        summarizer: Writes the summary (auth failure: nothing written; other failure: fallback).
        token_budget: The context budget the compaction works towards (None: no threshold check).
        custom_instructions: Extra focus for the summary (`/compact <text>`).
        force: Compact even below the threshold.
        trigger: Recorded in the audit row (`manual`, `budget`, `overflow`, ...).
        engine_id: Recorded on the successor session and the audit row.
        abort_signal: Aborting raises AbortError; nothing is written.
        timeout_s: Deadline for summarisation; when it passes, the deterministic fallback is used.
        current_token_count: Observed context tokens (default: the stored counts).
        rotation_reason: The successor's `rotation_reason` (`migration` when an engine switch writes it).

    Returns:
        The CompactResult; on success `result.session_id/session_file` name the successor.
    """
    started_at, t0 = repo.utc_now(), time.perf_counter()
    if abort_signal is not None:
        abort_signal.raise_if_aborted()
    try:
        async with store.read() as conn:
            session = await repo.get_session(conn, session_id)
            entries = await repo.load_context(conn, session_id)
            previous_ids = [e.summary_id for e in entries if isinstance(e, SummaryItem)]
            previous_rows = await _previous_rows(conn, previous_ids)
    except NotFoundError as exc:
        return _not_done(exc.detail, ok=False)
    if session.status != "active":
        return _not_done(f"session {session_id} is {session.status}, not active", ok=False)
    tokens_before = current_token_count or sum(e.token_count for e in entries)
    if not force:
        if not settings.enabled:
            return _not_done("compaction disabled")
        if token_budget and not should_compact(tokens_before, token_budget, settings):
            limit = token_budget - settings.effective_reserve()
            return _not_done(f"below threshold ({tokens_before} <= {limit} tokens)")
    plan = plan_compaction(entries, keep_recent_budget(settings, token_budget))
    if not plan.covered:
        return _not_done("nothing to compact")

    previous = "\n\n".join(_FILE_TAGS.sub("", e.summary.content).strip() for e in plan.previous)
    prev_details: dict[str, list[str]] = {"readFiles": [], "modifiedFiles": []}
    for e in plan.previous:
        details = previous_rows.get(e.summary_id, (None, 0))[0]
        if isinstance(details, dict):
            for key in prev_details:
                prev_details[key] += [str(p) for p in details.get(key) or []]
    ops = extract_file_ops(plan_messages(plan.covered), prev_details)
    job = _Job(
        summarizer,
        settings,
        custom_instructions,
        summary_target(settings, token_budget),
        max(MIN_SUMMARIZER_WINDOW, token_budget or DEFAULT_SUMMARIZER_WINDOW),
        store.counter,
        abort_signal,
        session.session_key,
    )
    if trigger == "manual":
        reset_spend_guard(summarizer, session.session_key)
    try:
        made = await _summarize(job, plan, previous or None, timeout_s)
    except SummarizerAuthError as exc:
        return _not_done(f"summarizer auth failed: {exc.detail}", ok=False)
    if abort_signal is not None:
        abort_signal.raise_if_aborted()
    content = compose_summary(made.history, made.prefix, ops)
    meta = _Meta(tokens_before, trigger, engine_id, started_at, t0, previous_rows, rotation_reason)
    try:
        return await _write(store, session, entries, plan, made, content, ops, meta)
    except _Conflict as exc:
        return _not_done(str(exc), ok=False)


@dataclass(frozen=True)
class _Meta:
    tokens_before: int
    trigger: str
    engine_id: str
    started_at: str
    t0: float
    previous_rows: dict[str, tuple[Any, int]]
    rotation_reason: str = "compaction"


async def _write(
    store: Store,
    session: repo.SessionRow,
    entries: list[ResolvedItem],
    plan: CompactionPlan,
    made: _Summaries,
    content: str,
    ops: Any,
    meta: _Meta,
) -> CompactResult:
    """The one transaction: summary + edges, successor session + its context, audit row."""
    covered = plan.covered
    summary_tokens = summary_item_tokens(content, store.counter)
    source_tokens = sum(e.token_count for e in covered)
    earliest, latest = _time_range(plan)
    first_kept = next((e for e in plan.kept if isinstance(e, MessageItem)), None)
    details = {
        **ops.details(),
        "splitTurn": plan.cut.is_split_turn,
        "firstKeptEntryId": first_kept.entry_id if first_kept else None,
    }
    if plan.cut.error:
        details["cutNote"] = plan.cut.error
    if made.fallback_reason:
        details["fallbackReason"] = made.fallback_reason
    summary = repo.NewSummary(
        kind="legacy",
        content=content,
        token_count=summary_tokens,
        summarizer=made.summarizer,
        model=made.model,
        fallback_level=made.fallback_level,
        source_message_ids=[e.message_id for e in covered],
        source_summary_ids=[e.summary_id for e in plan.previous],
        earliest_at=earliest,
        latest_at=latest,
        descendant_count=len(covered) + sum(e.summary.descendant_count for e in plan.previous),
        descendant_token_count=source_tokens
        + sum(meta.previous_rows.get(e.summary_id, (None, 0))[1] for e in plan.previous),
        source_message_token_count=source_tokens,
        details=details,
    )
    async with store.transaction() as conn:
        appended = await _check_unchanged(conn, session.session_id, entries)
        kept = [e.ref for e in plan.kept]
        items = [ItemRef("summary", summary.summary_id, summary_tokens), *kept, *appended]
        record = repo.CompactionRecord(
            engine_id=meta.engine_id,
            trigger=meta.trigger,
            tokens_before=meta.tokens_before,
            duration_ms=int((time.perf_counter() - meta.t0) * 1000),
            rotation_reason=meta.rotation_reason,
            first_kept_message_id=first_kept.message_id if first_kept else None,
            first_kept_entry_id=first_kept.entry_id if first_kept else None,
            started_at=meta.started_at,
            details={**details, "summarizer": made.summarizer, "fallbackLevel": made.fallback_level},
        )
        successor = await repo.commit_compaction(conn, session, [summary], items, record)
    tokens_after = sum(item.tokens for item in items)
    return CompactResult(
        ok=True,
        compacted=True,
        result=CompactResultDetail(
            summary=content,
            first_kept_entry_id=first_kept.entry_id if first_kept else None,
            tokens_before=meta.tokens_before,
            tokens_after=tokens_after,
            details=ops.details(),
            session_id=successor.session_id,
            session_file=successor.session_file,
        ),
    )


# --- the bridge -------------------------------------------------------------------------------------


def _current_tokens(params: CompactParams) -> int | None:
    if params.current_token_count is not None:
        return params.current_token_count
    raw = (params.runtime_context or {}).get("currentTokenCount")
    if isinstance(raw, int | float) and not isinstance(raw, bool) and math.isfinite(raw) and raw > 0:
        return math.floor(raw)
    return None


async def delegate_compaction_to_runtime(params: CompactParams, ctx: EngineContext) -> CompactResult:
    """The runtime's built-in compaction, for legacy and any engine that does not own compaction.

    Takes the store, summarizer (default: the embedded extractive one) and `agents.defaults.compaction`
    from `ctx`; `currentTokenCount` falls back to `runtime_context["currentTokenCount"]`;
    `compaction_target` is ignored, as in OpenClaw. Aborts propagate as AbortError.

    Args:
        params: The engine's compact() parameters.
        ctx: The engine's factory context.

    Returns:
        The CompactResult (a timeout is ``ok=False`` with a reason, and nothing is written).
    """
    if ctx.store is None:
        return _not_done("no store in the engine context; the built-in compaction needs one", ok=False)
    from openclaw_ctx.summarize.extractive import ExtractiveSummarizer

    summarizer = ctx.summarizer or ExtractiveSummarizer()
    config = ctx.openclaw_config
    settings = config.agents.defaults.compaction if config is not None else CompactionSettings()
    context = params.runtime_context or {}
    trigger = str(context.get("trigger") or ("manual" if params.force else "budget"))
    try:
        async with asyncio.timeout(settings.timeout_seconds):
            return await compact_session(
                ctx.store,
                params.session_id,
                settings=settings,
                summarizer=summarizer,
                token_budget=params.token_budget,
                custom_instructions=params.custom_instructions,
                force=params.force,
                trigger=trigger,
                abort_signal=params.abort_signal,
                timeout_s=settings.timeout_seconds * SUMMARY_TIME_SHARE,
                current_token_count=_current_tokens(params),
            )
    except TimeoutError:
        return _not_done(f"compaction timed out after {settings.timeout_seconds}s", ok=False)
