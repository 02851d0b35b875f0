"""Writing one lossless summary: the source text of a chunk, and the summarizer with escalation.

Escalation goes normal → aggressive → the deterministic fallback, so a failing summarizer still yields a
node (marked in `fallback_level`); an auth failure is never papered over.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime

from engines.lossless.planning import PlanItem, SweepSettings
from engines.lossless.prompts import (
    EXPAND_FOOTER,
    SYSTEM_PROMPT,
    condensed_prompt,
    condensed_target_tokens,
    leaf_prompt,
    leaf_target_tokens,
)
from openclaw_ctx.errors import SummarizerAuthError, SummarizerError
from openclaw_ctx.messages import AgentMessage, ToolResultMessage, flatten_text
from openclaw_ctx.summarize.base import Summarizer, SummaryOutput, SummaryRequest
from openclaw_ctx.summarize.fallback import deterministic_fallback, truncate_to_tokens
from openclaw_ctx.tokens import TokenCounter

__all__ = ["header_time", "leaf_topics", "message_source", "summarize_with_escalation"]


# --- summarizing with escalation ----------------------------------------------------------------


@dataclass(frozen=True)
class _Summarized:
    text: str
    summarizer: str
    model: str | None
    fallback_level: str


async def _attempt(summarizer: Summarizer, request: SummaryRequest) -> SummaryOutput | None:
    # `summaryTimeoutMs` bounds every summarizer, whatever its own transport does: a hung call
    # escalates like a failed one instead of holding the key's lock forever.
    try:
        async with asyncio.timeout(request.timeout_s):
            out = await summarizer.summarize(request)
    except SummarizerAuthError:
        raise
    except (SummarizerError, TimeoutError):
        return None
    return out if out.text.strip() else None


def _with_footer(text: str, fallback_topics: str) -> str:
    return text if EXPAND_FOOTER in text else f"{text.rstrip()}\n{EXPAND_FOOTER} {fallback_topics}"


async def summarize_with_escalation(
    summarizer: Summarizer,
    counter: TokenCounter,
    settings: SweepSettings,
    *,
    depth: int,
    leaf: bool,
    source: str,
    previous: str | None,
    topics: str,
    room: int,
) -> _Summarized:
    # `room`: what the sources cost in context minus the new node's XML wrapper. A summary is only
    # accepted when it is smaller than that, so every pass shrinks the context (convergence).
    config, call_instructions = settings.config, settings.call_instructions
    input_tokens = counter.count(source)
    limit = max(1, min(input_tokens, room))
    target = 0
    for aggressive, level in ((False, "none"), (True, "aggressive")):
        if leaf:
            target = leaf_target_tokens(input_tokens, config.leaf_target_tokens, aggressive=aggressive)
            prompt = leaf_prompt(
                source,
                previous_context=previous,
                target_tokens=target,
                aggressive=aggressive,
                custom_instructions=config.custom_instructions,
                call_instructions=call_instructions,
            )
        else:
            target = condensed_target_tokens(config.condensed_target_tokens, aggressive=aggressive)
            prompt = condensed_prompt(
                source,
                depth=depth,
                previous_context=previous,
                target_tokens=target,
                aggressive=aggressive,
                custom_instructions=config.custom_instructions,
                call_instructions=call_instructions,
            )
        # A summary at or over `limit` is refused, so asking for more than that only wastes an attempt.
        target = max(1, min(target, limit - 1))
        request = SummaryRequest(
            kind="leaf" if leaf else "condensed",
            source_text=source,
            target_tokens=target,
            system_prompt=SYSTEM_PROMPT,
            prompt=prompt,
            # previous_context is context for a model only: a summarizer that merges
            # `previous_summary` into its output would repeat earlier leaves in every new one.
            previous_summary=None,
            custom_instructions="\n".join(p for p in (config.custom_instructions, call_instructions) if p) or None,
            depth=depth,
            aggressive=aggressive,
            timeout_s=config.summary_timeout_ms / 1000,
            # Provider summarizers count their spend guard per session key.
            metadata={"session_key": settings.session_key} if settings.session_key else {},
        )
        out = await _attempt(summarizer, request)
        if out is None:
            continue
        text = out.text.strip()
        tokens = counter.count(text)
        if tokens >= limit:
            continue
        cap = int(config.summary_max_overage_factor * target)
        if tokens > cap:
            text = truncate_to_tokens(text, target, counter).rstrip() + f"\n[Capped from {tokens} tokens to ~{target}]"
            level = "capped"
        model = out.model or config.summary_model or None
        return _Summarized(_with_footer(text, topics), out.summarizer or summarizer.name, model, level)
    cap = min(config.fallback_max_tokens, max(64, limit // 2))
    text = deterministic_fallback(source, cap, counter)
    return _Summarized(_with_footer(text, topics), "deterministic-fallback", None, "deterministic")


# --- source text ------------------------------------------------------------------------------


def header_time(ms: int | None) -> str:
    if ms is None:
        return "unknown time"
    return datetime.fromtimestamp(ms / 1000, UTC).strftime("%Y-%m-%d %H:%M UTC")


def message_source(message: AgentMessage) -> str:
    tool = f" | tool={message.tool_name}" if isinstance(message, ToolResultMessage) and message.tool_name else ""
    body = flatten_text(message, include_thinking=False).replace("[image]", "[Media attachment]")
    return f"[{header_time(getattr(message, 'timestamp', None))} | {message.role}{tool}]\n{body}"


def leaf_topics(chunk: Sequence[PlanItem]) -> str:
    tools = sorted({m.tool_name for i in chunk if isinstance(m := i.message, ToolResultMessage) and m.tool_name})
    extra = f" (tool output of {', '.join(tools)})" if tools else ""
    return f"the exact wording of {len(chunk)} messages{extra}"
