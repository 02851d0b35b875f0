"""Replay an OpenClaw JSONL transcript turn by turn through the runtime.

The scripted model answers with the transcript's own assistant messages (their `usage` as the
transcript recorded it) and the scripted tools with its own tool results, so the store ends up
holding every message of the transcript (under its original entry ids) while the selected engine
assembles and compacts as it would live. The replay's own measurements are the `turns` rows: the
report's tokens per turn are their `prompt_tokens`, the figure `openclaw-ctx stats` reads.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from openclaw_ctx.config import OpenClawConfig
from openclaw_ctx.errors import ContextOverflowError, EngineError
from openclaw_ctx.host.runtime import Runtime
from openclaw_ctx.host.scripted import ScriptedModel, ScriptedTools
from openclaw_ctx.messages import AgentMessage, AssistantMessage, ToolResultMessage, UserMessage
from openclaw_ctx.registry import list_quarantines
from openclaw_ctx.store import repo
from openclaw_ctx.store.store import Store
from openclaw_ctx.summarize.base import Summarizer

if TYPE_CHECKING:
    pass

__all__ = ["ReplayReport", "Turn", "replay_transcript", "split_turns"]


@dataclass
class Turn:
    """One user message and the transcript messages that answered it, with their entry ids."""

    user: UserMessage | None
    replies: list[AssistantMessage] = field(default_factory=list)
    results: list[ToolResultMessage] = field(default_factory=list)
    others: list[AgentMessage] = field(default_factory=list)
    """Messages of other roles (bashExecution, custom, …), persisted by the host as they come."""


@dataclass
class ReplayReport:
    """What a replay did."""

    transcript: str
    engine_id: str
    budget: int
    turns: int
    failed_turns: int
    transcript_messages: int
    messages_stored: int
    compactions: int
    sessions_in_chain: int
    context_tokens: list[int]
    """`turns.prompt_tokens` of the turns this replay ran: the prompt tokens the model was sent."""
    seconds: float
    session_key: str
    summarizer: str
    skipped_turns: int = 0
    """Turns whose every message the key already stored (a second replay of one file skips them all)."""
    final_context_tokens: int = 0
    """Tokens of the key's active context at the end."""
    problems: list[str] = field(default_factory=list)
    """What the replay could not use, as ``file:line: reason``: unreadable lines, a broken parent chain."""

    def as_dict(self) -> dict[str, Any]:
        """JSON-friendly form: min/median/max of the per-turn prompt tokens, and the final context."""
        tokens = self.context_tokens or [0]
        return {
            "transcript": self.transcript,
            "engine": self.engine_id,
            "budget": self.budget,
            "session_key": self.session_key,
            "summarizer": self.summarizer,
            "turns": self.turns,
            "failed_turns": self.failed_turns,
            "skipped_turns": self.skipped_turns,
            "transcript_messages": self.transcript_messages,
            "messages_stored": self.messages_stored,
            "compactions": self.compactions,
            "sessions_in_chain": self.sessions_in_chain,
            "context_tokens": {
                "min": min(tokens),
                "median": int(statistics.median(tokens)),
                "max": max(tokens),
                "final": self.final_context_tokens,
            },
            "seconds": round(self.seconds, 2),
            "problems": self.problems,
        }


def split_turns(messages: list[tuple[str, AgentMessage]]) -> tuple[list[Turn], dict[int, str]]:
    """Group (entry id, message) pairs into turns; returns the turns and an id(message) → entry id map."""
    turns: list[Turn] = []
    entry_of: dict[int, str] = {}
    current = Turn(user=None)
    for entry_id, message in messages:
        entry_of[id(message)] = entry_id
        if isinstance(message, UserMessage):
            if current.user is not None or current.replies or current.results or current.others:
                turns.append(current)
            current = Turn(user=message)
        elif isinstance(message, AssistantMessage):
            current.replies.append(message)
        elif isinstance(message, ToolResultMessage):
            current.results.append(message)
        else:
            current.others.append(message)
    if current.user is not None or current.replies or current.results or current.others:
        turns.append(current)
    return turns, entry_of


async def replay_transcript(
    store: Store,
    path: str | Path,
    *,
    engine: str = "legacy",
    budget: int = 32_000,
    session_key: str | None = None,
    config: OpenClawConfig | None = None,
    summarizer: Summarizer | None = None,
    progress: Callable[[int, int], None] | None = None,
) -> ReplayReport:
    """Replay `path` into `store` with `engine` and a context window of `budget` tokens.

    Raises:
        EngineError: `engine` cannot run (not installed, disabled, or its factory failed); nothing is written.
        OSError: the transcript cannot be read.
    """
    from openclaw_ctx.summarize import default_summarizer
    from openclaw_ctx.transcripts import CompactionEntry, context_message, read_transcript

    started = time.perf_counter()
    transcript = read_transcript(Path(path))
    # The active branch, minus the transcript's own compactions: the engine compacts for itself.
    pairs = [
        (entry.id, message)
        for entry in transcript.active_branch()
        if not isinstance(entry, CompactionEntry) and (message := context_message(entry)) is not None
    ]
    turns, entry_of = split_turns(pairs)
    problems = [str(error) for error in transcript.errors]
    key = session_key or f"replay:{transcript.header.id if transcript.header else Path(path).stem}"
    config = (config or OpenClawConfig()).with_engine(engine)
    summarizer = summarizer or default_summarizer()
    model = ScriptedModel(context_window=budget, name="scripted-replay", counter=store.counter)
    tools = ScriptedTools()
    runtime = await Runtime.create(store, config=config, model=model, tools=tools, summarizer=summarizer)
    if runtime.resolved.fallback_reason is not None:
        # A live host falls back to legacy and goes on; a replay measures one engine, so it stops first.
        await runtime.dispose()
        why = runtime.resolved.fallback_reason
        record = next((q for q in list_quarantines() if q.engine_id == engine), None)
        detail = f"{why}: {record.reason}" if record is not None else why
        raise EngineError(f"engine {engine!r} cannot run ({detail}); nothing was replayed")
    compactions = failed = skipped = 0
    async with store.read() as conn:
        already = await repo.stored_entry_ids(conn, key, entry_of.values())
        turns_before = await repo.last_turn(conn, key)
    for index, turn in enumerate(turns):
        done = _already_stored(turn, entry_of, already)
        if done:
            # A replay that adds nothing changes nothing: no turn, no compaction, no new session.
            skipped += 1
        elif turn.user is None:
            await _persist_direct(store, runtime, key, [*turn.replies, *turn.results, *turn.others], entry_of)
        else:
            if turn.others:
                await _persist_direct(store, runtime, key, turn.others, entry_of)
            model.extend(turn.replies)
            tools.results.update({r.tool_call_id: r for r in turn.results})
            try:
                result = await runtime.run_turn(key, turn.user, entry_ids=lambda m: entry_of.get(id(m)))
                compactions += sum(1 for c in result.compactions if c.ok and c.compacted)
            except ContextOverflowError:
                failed += 1
            # The reply is out; let deferred compaction finish so each turn's figures are settled.
            compactions += sum(1 for c in await runtime.settle(key) if c.ok and c.compacted)
            leftovers: list[AgentMessage] = [*model.drain(), *tools.drain()]
            if leftovers:
                await _persist_direct(store, runtime, key, leftovers, entry_of)
        if progress:
            progress(index + 1, len(turns))
    await runtime.dispose()
    async with store.read() as conn:
        chain = await repo.session_chain(conn, key)
        stored = await _stored_count(conn, key)
        audit = await _compaction_count(conn, key)
        sent = await repo.prompt_tokens_after(conn, key, turns_before)
    return ReplayReport(
        skipped_turns=skipped,
        transcript=str(path),
        engine_id=runtime.engine.info.id,
        budget=budget,
        turns=len(turns),
        failed_turns=failed,
        transcript_messages=len(pairs),
        messages_stored=stored,
        compactions=max(compactions, audit),
        sessions_in_chain=len(chain),
        context_tokens=sent,
        final_context_tokens=await _context_tokens(store, key),
        seconds=time.perf_counter() - started,
        session_key=key,
        summarizer=summarizer.name,
        problems=problems,
    )


def _already_stored(turn: Turn, entry_of: dict[int, str], stored: set[str]) -> bool:
    messages: list[AgentMessage] = [*([turn.user] if turn.user else []), *turn.replies, *turn.results, *turn.others]
    ids = [entry_of.get(id(m)) for m in messages]
    return bool(ids) and all(i is not None and i in stored for i in ids)


async def _persist_direct(
    store: Store, runtime: Runtime, key: str, messages: list[AgentMessage], entry_of: dict[int, str]
) -> None:
    """Messages outside the model loop (leading or stray ones) are persisted by the host as they are."""
    if not messages:
        return
    async with store.transaction() as conn:
        session = await repo.ensure_session(conn, key, engine_id=runtime.engine.info.id)
        await repo.append_messages(
            conn, session, [repo.NewMessage(m, entry_id=entry_of.get(id(m))) for m in messages], store.counter
        )


async def _context_tokens(store: Store, key: str) -> int:
    async with store.read() as conn:
        session = await repo.active_session(conn, key)
        return await repo.context_tokens(conn, session.session_id) if session else 0


async def _stored_count(conn: Any, key: str) -> int:
    from sqlalchemy import func, select

    from openclaw_ctx.store.models import Message

    return int(await conn.scalar(select(func.count()).select_from(Message).where(Message.session_key == key)) or 0)


async def _compaction_count(conn: Any, key: str) -> int:
    from sqlalchemy import func, select

    from openclaw_ctx.store.models import Compaction

    query = select(func.count()).select_from(Compaction).where(Compaction.session_key == key, Compaction.compacted == 1)
    return int(await conn.scalar(query) or 0)
