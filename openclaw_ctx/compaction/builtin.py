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
import math
import re
import time

from openclaw_ctx.compaction.plan import (
    compose_summary,
    extract_file_ops,
    keep_recent_budget,
    plan_compaction,
    plan_messages,
    should_compact,
    summary_target,
)
from openclaw_ctx.compaction.summarize import FALLBACK_SUMMARIZER, SummaryJob, summarize_plan
from openclaw_ctx.compaction.write import (
    ContextChanged,
    WriteMeta,
    load_previous_rows,
    summary_item_tokens,
    write_compaction,
)
from openclaw_ctx.config import CompactionSettings
from openclaw_ctx.contract import AbortSignal, CompactParams, CompactResult, EngineContext
from openclaw_ctx.errors import NotFoundError, SummarizerAuthError
from openclaw_ctx.store import repo
from openclaw_ctx.store.repo import MessageItem, SummaryItem
from openclaw_ctx.store.store import Store
from openclaw_ctx.summarize.base import Summarizer, reset_spend_guard

__all__ = [
    "FALLBACK_SUMMARIZER",
    "SUMMARY_TIME_SHARE",
    "compact_session",
    "delegate_compaction_to_runtime",
    "should_compact",
    "summary_item_tokens",
]

# Summarisation gets this share of the compaction timeout; the rest is left for the fallback and the write.
SUMMARY_TIME_SHARE = 0.9
MIN_SUMMARIZER_WINDOW = 16_000
DEFAULT_SUMMARIZER_WINDOW = 128_000
_FILE_TAGS = re.compile(r"\n*<(read-files|modified-files)>.*?</\1>", re.DOTALL)


def _not_done(reason: str, *, ok: bool = True) -> CompactResult:
    return CompactResult(ok=ok, compacted=False, reason=reason)


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
            previous_rows = await load_previous_rows(conn, previous_ids)
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
    keep_recent = keep_recent_budget(settings, token_budget)
    plan = plan_compaction(entries, keep_recent)
    if not plan.covered:
        # Say what was measured: "nothing to compact" alone reads as a silent failure.
        raw = [e for e in entries if isinstance(e, MessageItem)]
        raw_tokens = sum(e.token_count for e in raw)
        return _not_done(
            f"nothing to compact: the context's {len(raw)} raw messages ({raw_tokens:,} tokens; "
            f"{tokens_before - raw_tokens:,} more in summaries) are the recent tail kept as they are "
            f"(keepRecentTokens {keep_recent:,})"
        )

    previous = "\n\n".join(_FILE_TAGS.sub("", e.summary.content).strip() for e in plan.previous)
    prev_details: dict[str, list[str]] = {"readFiles": [], "modifiedFiles": []}
    for e in plan.previous:
        details = previous_rows.get(e.summary_id, (None, 0))[0]
        if isinstance(details, dict):
            for key in prev_details:
                prev_details[key] += [str(p) for p in details.get(key) or []]
    ops = extract_file_ops(plan_messages(plan.covered), prev_details)
    job = SummaryJob(
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
        made = await summarize_plan(job, plan, previous or None, timeout_s)
    except SummarizerAuthError as exc:
        return _not_done(f"summarizer auth failed: {exc.detail}", ok=False)
    if abort_signal is not None:
        abort_signal.raise_if_aborted()
    content = compose_summary(made.history, made.prefix, ops)
    meta = WriteMeta(tokens_before, trigger, engine_id, started_at, t0, previous_rows, rotation_reason)
    try:
        return await write_compaction(store, session, entries, plan, made, content, ops, meta)
    except ContextChanged as exc:
        return _not_done(str(exc), ok=False)


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
