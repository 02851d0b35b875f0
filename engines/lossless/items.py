"""What lossless-claw's compaction planner reads: the context as plan items, and what a compaction audits.

Summaries cost what their rendered XML costs; externalised large messages cost their stub.
"""

from __future__ import annotations

from collections.abc import Sequence

from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncConnection

from engines.lossless.assemble import RenderCache, load_render_inputs
from engines.lossless.compaction import SweepOutcome
from engines.lossless.config import LosslessConfig
from engines.lossless.planning import PlanItem
from openclaw_ctx.contract import CompactParams, CompactResult, CompactResultDetail
from openclaw_ctx.messages import AgentMessage, AssistantMessage
from openclaw_ctx.store.models import Summary
from openclaw_ctx.store.repo import MessageItem, ResolvedItem, SessionRow, SummaryItem
from openclaw_ctx.tokens import TokenCounter

__all__ = ["observed_prompt_tokens", "plan_items", "swept_result", "trigger_of"]


def observed_prompt_tokens(messages: list[AgentMessage]) -> int:
    # The provider's own count of the last prompt: input plus cached input of the newest reply.
    for message in reversed(messages):
        if isinstance(message, AssistantMessage) and message.usage is not None:
            u = message.usage
            return u.input + u.cache_read + u.cache_write
    return 0


def trigger_of(params: CompactParams, target: str) -> str:
    # The host names why it compacts (overflow, manual, budget) in runtimeContext; audit that.
    named = (params.runtime_context or {}).get("trigger")
    if isinstance(named, str) and named:
        return named
    return params.force_reason or ("manual" if params.force else target)


async def plan_items(
    conn: AsyncConnection,
    entries: Sequence[ResolvedItem],
    renders: RenderCache,
    counter: TokenCounter,
    config: LosslessConfig,
) -> list[PlanItem]:
    """Context entries as the compaction planner sees them.

    Summaries cost what their rendered XML costs; externalised large messages cost their stub.
    """
    rendered, stubs = await load_render_inputs(conn, entries, renders, counter, config.large_file_token_threshold)
    ids = [e.summary_id for e in entries if isinstance(e, SummaryItem)]
    stats: dict[str, tuple[int, int]] = {}
    for start in range(0, len(ids), 500):
        rows = await conn.execute(
            select(Summary.summary_id, Summary.descendant_token_count, Summary.source_message_token_count).where(
                Summary.summary_id.in_(ids[start : start + 500])
            )
        )
        stats.update({sid: (d, s) for sid, d, s in rows})
    items: list[PlanItem] = []
    for e in entries:
        if isinstance(e, MessageItem):
            stub = stubs.get(e.message_id)
            view = stub.message if stub else e.message
            items.append(PlanItem("message", e.message_id, e.token_count, message=view, entry_id=e.entry_id))
        else:
            desc_tokens, src_tokens = stats.get(e.summary_id, (0, 0))
            items.append(
                PlanItem(
                    "summary",
                    e.summary_id,
                    rendered[e.summary_id].tokens,
                    depth=e.summary.depth,
                    content=e.summary.content,
                    earliest_at=e.summary.earliest_at,
                    latest_at=e.summary.latest_at,
                    descendant_count=e.summary.descendant_count,
                    descendant_token_count=desc_tokens,
                    source_message_token_count=src_tokens,
                )
            )
    return items


def swept_result(
    outcome: SweepOutcome, successor: SessionRow, first_kept_entry_id: str | None, before: int, after: int
) -> CompactResult:
    """What `compact` answers after a sweep was written: the top summary and the successor session."""
    return CompactResult(
        ok=True,
        compacted=True,
        reason=outcome.stop_reason,
        result=CompactResultDetail(
            summary=outcome.created[-1].content,
            first_kept_entry_id=first_kept_entry_id,
            tokens_before=before,
            tokens_after=after,
            details={
                "summaries_created": len(outcome.created),
                "passes": outcome.passes,
                "max_depth": max(n.depth for n in outcome.created),
            },
            session_id=successor.session_id,
            session_file=successor.session_file,
        ),
    )
