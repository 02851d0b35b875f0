"""Summarising the planned part of a legacy compaction: chunked, iterative, with a split-turn prefix.

Any summarizer failure but an auth failure or an abort falls back to the deterministic summary, so
a compaction that got this far always has a text to write.
"""

from __future__ import annotations

import asyncio
import math
from collections.abc import Awaitable
from dataclasses import dataclass, field
from typing import TypeVar

from openclaw_ctx.compaction.plan import (
    CompactionPlan,
    adaptive_chunk_ratio,
    chunk_messages,
    is_oversized,
    max_chunk_tokens,
    oversized_note,
    plan_messages,
)
from openclaw_ctx.config import CompactionSettings
from openclaw_ctx.contract import AbortSignal
from openclaw_ctx.errors import AbortError, SummarizerAuthError, SummarizerError
from openclaw_ctx.messages import AgentMessage
from openclaw_ctx.summarize.base import Summarizer, SummaryKind, SummaryRequest
from openclaw_ctx.summarize.fallback import deterministic_fallback
from openclaw_ctx.summarize.prompts import (
    SYSTEM_PROMPT,
    history_prompt,
    serialize_for_summary,
    serialize_message,
    turn_prefix_prompt,
)
from openclaw_ctx.tokens import TokenCounter

__all__ = ["FALLBACK_SUMMARIZER", "Summaries", "SummaryJob", "summarize_plan"]

FALLBACK_SUMMARIZER = "deterministic-fallback"
T = TypeVar("T")


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


@dataclass
class Summaries:
    """The texts a compaction writes and who made them (the fallback says why it was used)."""

    history: str
    prefix: str | None
    summarizer: str
    model: str | None = None
    fallback_level: str = "none"
    fallback_reason: str | None = None


@dataclass
class SummaryJob:
    """One compaction's summarizer calls: prompts, the abort signal, and the names/models that answered."""

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


async def summarize_plan(
    job: SummaryJob, plan: CompactionPlan, previous: str | None, timeout_s: float | None
) -> Summaries:
    """Summarise the plan's history and split-turn prefix; any failure but auth/abort falls back."""
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
        return Summaries(text, None, FALLBACK_SUMMARIZER, None, "deterministic", reason)
    name = "+".join(dict.fromkeys(job.names)) or job.summarizer.name
    return Summaries(history, prefix, name, job.models[-1] if job.models else None)
