"""One turn: its attempts (assemble → precheck → model/tool loop), overflow recovery, and what it stores.

Overflow recovery: up to 3 compactions through the engine's `compact()`, then one truncation of
oversized tool results, then ContextOverflowError ("… Try /reset …"). A compaction that saved nothing
ends the compactions early. A failed turn (overflow, or a model call that raised) still stores the
prompt and any partial reply before the error goes up.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from openclaw_ctx.contract import AssembleResult, CompactResult
from openclaw_ctx.errors import ContextOverflowError, EngineError
from openclaw_ctx.host.precheck import estimate_text_tokens, precheck, reducible_tool_chars, truncate_tool_results
from openclaw_ctx.host.sessions import EntryIds, TurnStats, Writes
from openclaw_ctx.host.tools import SentPrompts
from openclaw_ctx.messages import AgentMessage, UserMessage, flatten_text
from openclaw_ctx.store import repo

if TYPE_CHECKING:
    from openclaw_ctx.host.runtime import Runtime

__all__ = ["MAX_OVERFLOW_COMPACTIONS", "OVERFLOW_MESSAGE", "Turn", "TurnResult", "run"]

log = logging.getLogger("openclaw_ctx.host.runtime")

MAX_OVERFLOW_COMPACTIONS = 3
OVERFLOW_MESSAGE = (
    "Context overflow: prompt too large for the model. Try /reset (or /new) to start a fresh session, "
    "or use a larger-context model."
)


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


@dataclass
class Turn:
    """One turn's attempt state, carried from one attempt to the next."""

    key: str
    user: UserMessage
    entry_ids: EntryIds
    is_heartbeat: bool
    started_in: str
    """The session the turn began in: every compaction rotates it, so a changed id means the turn compacted."""
    sent: SentPrompts
    """The prompts the turn's model calls were sent, over all its attempts."""
    produced: list[AgentMessage] = field(default_factory=list)
    """Replies and tool results so far; an overflowed attempt keeps them for the next."""
    compactions: list[CompactResult] = field(default_factory=list)
    recoveries: int = 0
    truncated: bool = False
    recorded: list[AgentMessage] | None = None
    """A turn run elsewhere (:func:`record`): its messages, as given, instead of the prompt and replies."""

    @property
    def messages(self) -> list[AgentMessage]:
        """What the turn adds to the session: the prompt, then everything produced."""
        if self.recorded is not None:
            return self.recorded
        return [self.user, *self.produced]

    def may_compact(self) -> bool:
        """Whether overflow recovery may compact once more (and counts the attempt)."""
        if self.recoveries >= MAX_OVERFLOW_COMPACTIONS:
            return False
        self.recoveries += 1
        return True

    def compacted(self, result: CompactResult) -> bool:
        """Record a recovery compaction; True when it made room (no progress stops the compactions)."""
        self.compactions.append(result)
        if result.ok and result.compacted and not _no_progress(result):
            return True
        self.recoveries = MAX_OVERFLOW_COMPACTIONS
        return False

    def may_truncate(self) -> bool:
        """Whether the one truncation of oversized tool results is still to be tried (and takes it)."""
        if self.truncated:
            return False
        self.truncated = True
        return True


@dataclass(frozen=True)
class _Attempt:
    """What one attempt assembled and is about to send."""

    history: list[AgentMessage]
    known: dict[int, int]
    """Stored token counts of `history`, keyed by object identity."""
    assembled: AssembleResult
    assembled_ok: bool
    """False when assemble failed and the pipeline messages stand in."""
    outgoing: list[AgentMessage]
    system_prompt: str
    estimate: int


async def run(runtime: Runtime, key: str, user: UserMessage, entry_ids: EntryIds, is_heartbeat: bool) -> TurnResult:
    """Run one turn to its end: attempts until the model finishes, then persist and finalize."""
    if runtime.model is None:
        raise EngineError("this Runtime was created without a model: it records turns (record_turn), it cannot run one")
    session = await runtime.sessions.active(key)
    turn = Turn(
        key, user, entry_ids, is_heartbeat, started_in=session.session_id, sent=SentPrompts(runtime.store.counter)
    )
    await runtime.hooks.bootstrap_once(session)
    await runtime.hooks.maintain(session)
    attempt = await _attempts(runtime, turn)
    result = await _finish(runtime, turn, attempt.history, attempt.estimate, turn.sent.figure)
    result.system_prompt = attempt.system_prompt
    return result


async def record(
    runtime: Runtime,
    key: str,
    messages: list[AgentMessage],
    entry_ids: EntryIds,
    is_heartbeat: bool,
    writes: Writes | None = None,
) -> TurnResult:
    """Store a turn whose model call happened elsewhere: persist and finalize it as :func:`run` does."""
    session = await runtime.sessions.active(key)
    await runtime.hooks.bootstrap_once(session)
    await runtime.hooks.maintain(session)
    # The pre-turn history is loaded (and parsed) only for an engine whose afterTurn reads it.
    if runtime.hooks.finalize_reads_history():
        history, known = await runtime.sessions.history(session)
        estimate = _estimate([*history, *messages], known, "")
    else:
        history = []
        estimate = await runtime.sessions.context_tokens(session) + _estimate(messages, {}, "")
    turn = Turn(
        key,
        UserMessage(content=""),
        entry_ids,
        is_heartbeat,
        started_in=session.session_id,
        sent=SentPrompts(runtime.store.counter),
        recorded=messages,
    )
    return await _finish(runtime, turn, history, estimate, None, writes)


async def _finish(
    runtime: Runtime,
    turn: Turn,
    history: list[AgentMessage],
    estimate: int,
    prompt_tokens: int | None,
    writes: Writes | None = None,
) -> TurnResult:
    """Persist the turn, tell the engine, then the compaction that follows any turn."""
    sessions, key = runtime.sessions, turn.key
    session = await sessions.active(key)
    stats = TurnStats(estimate, runtime.prompt_budget, session.session_id != turn.started_in, prompt_tokens)
    persisted = await sessions.persist(session, turn.messages, turn.entry_ids, turn.is_heartbeat, stats, writes)
    number = persisted.number
    await runtime.hooks.finalize_turn(session, history, turn.messages, persisted.entry_ids, turn.is_heartbeat)
    await runtime.hooks.maintain(session)
    auto = await _auto_compact(runtime, key)
    if auto is not None:
        turn.compactions.append(auto)
    persisted_in = session.session_id
    session = await sessions.active(key)
    if number is not None and not stats.compacted and session.session_id != persisted_in:
        await sessions.mark_compacted(key, number)
    return TurnResult(
        session_key=key,
        session_id=session.session_id,
        new_messages=turn.messages,
        assembled_tokens=estimate,
        engine_id=runtime.engine.info.id,
        compactions=turn.compactions,
        overflow_recoveries=turn.recoveries,
        turn_number=number,
    )


async def _attempts(runtime: Runtime, turn: Turn) -> _Attempt:
    while True:
        session = await runtime.sessions.active(turn.key)
        attempt = await _assemble(runtime, session, turn)
        try:
            _precheck(runtime, attempt)
            turn.sent.know(attempt.history, attempt.known)
            await runtime.tool_loop.run(attempt.outgoing, turn.produced, attempt.system_prompt, turn.key, turn.sent)
            return attempt
        except ContextOverflowError as exc:
            log.info("context overflow on %s: %s", turn.key, exc.detail)
            if turn.may_compact():
                result = await runtime.hooks.compact(session, trigger="overflow", target="budget", force=True)
                if turn.compacted(result):
                    continue
            if turn.may_truncate():
                continue
            await _persist_failed(runtime, turn, attempt.estimate)
            raise ContextOverflowError(OVERFLOW_MESSAGE, kind="context_overflow") from exc
        except Exception:
            # A failed model call (provider down, key rejected) fails the turn the same way.
            await _persist_failed(runtime, turn, attempt.estimate)
            raise


async def _assemble(runtime: Runtime, session: repo.SessionRow, turn: Turn) -> _Attempt:
    history, known = await runtime.sessions.history(session)
    in_flight = turn.messages
    # The engine fits history into what the in-flight turn (this prompt, and the replies and tool
    # results of an overflowed attempt) leaves of the prompt budget. Never below a quarter of the
    # window: an oversized tool result is the truncation's to shrink, not a reason for the engine
    # to compact the whole history away.
    budget = max(runtime.prompt_budget - _estimate(in_flight, {}, ""), runtime.prompt_budget // 4)
    assembled, assembled_ok = await runtime.hooks.assemble(session, history, turn.user, budget)
    system_prompt = _join_prompt(assembled.system_prompt_addition, runtime.system_prompt)
    outgoing = [*assembled.messages, *in_flight]
    if turn.truncated:
        outgoing = truncate_tool_results(outgoing)
    estimate = _estimate(outgoing, known, system_prompt)
    if assembled.estimated_tokens:
        estimate = max(estimate, assembled.estimated_tokens + _estimate(in_flight, known, system_prompt))
    return _Attempt(history, known, assembled, assembled_ok, outgoing, system_prompt, estimate)


def _precheck(runtime: Runtime, attempt: _Attempt) -> None:
    """The pre-prompt overflow check (skipped for an engine that owns compaction and assembled the prompt)."""
    assembled = attempt.assembled
    may_overflow = assembled.prompt_authority == "preassembly_may_overflow"
    if not may_overflow and runtime.owns_compaction and attempt.assembled_ok:
        return
    estimate = attempt.estimate
    if may_overflow:
        estimate = max(estimate, _estimate(attempt.history, attempt.known, attempt.system_prompt))
    result = precheck(
        estimate,
        context_window=runtime.context_window,
        reserve_tokens=runtime.settings.effective_reserve(),
        reducible_chars=reducible_tool_chars(attempt.outgoing),
    )
    if result.route != "fits":
        raise ContextOverflowError("Context overflow: prompt too large for the model (precheck).")


async def _auto_compact(runtime: Runtime, key: str) -> CompactResult | None:
    """The built-in auto-compaction for engines that do not own compaction (None when not due)."""
    if runtime.owns_compaction or not runtime.settings.enabled:
        return None
    session = await runtime.sessions.active(key)
    tokens = await runtime.sessions.context_tokens(session)
    if tokens <= runtime.context_window - runtime.settings.effective_reserve():
        return None
    return await runtime.hooks.compact(session, trigger="budget", target="budget", force=False, current=tokens)


async def _persist_failed(runtime: Runtime, turn: Turn, estimate: int) -> None:
    """A failed turn still keeps what the user said and any partial reply (as OpenClaw's session does)."""
    try:
        session = await runtime.sessions.active(turn.key)
        stats = TurnStats(estimate, runtime.prompt_budget, session.session_id != turn.started_in, turn.sent.figure)
        await runtime.sessions.persist(session, turn.messages, turn.entry_ids, turn.is_heartbeat, stats)
    except Exception as exc:  # the turn's own error is the one to report
        log.warning("could not store the failed turn on %s: %s", turn.key, exc)


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
