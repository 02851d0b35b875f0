"""Budgeted assembly: the session's context items as the messages the model sees.

One indexed read (:func:`openclaw_ctx.store.repo.load_context`) gives the ordered items with their
stored token counts. Summaries are rendered once per process as user-role untrusted XML and cached
(nodes are immutable), so the assembled prefix is byte-identical turn to turn between compactions.
The protected fresh tail is always included; when the rest does not fit, the oldest items go first.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncConnection

from engines.lossless.large_content import StubbedMessage, load_stubs, may_be_large
from engines.lossless.prompts import RECALL_POLICY
from openclaw_ctx.compaction.pairing import repair_tool_pairing
from openclaw_ctx.context import render_summary_xml
from openclaw_ctx.contract import AssembleResult
from openclaw_ctx.messages import AgentMessage, ToolResultMessage, UserMessage, to_wire, tool_call_ids
from openclaw_ctx.store.models import SummaryParent
from openclaw_ctx.store.repo import MessageItem, ResolvedItem, SummaryItem, SummaryRef, message_token_count
from openclaw_ctx.tokens import TokenCounter

__all__ = [
    "AssemblyPlan",
    "RenderCache",
    "RenderedSummary",
    "build_assembly",
    "fresh_tail_start",
    "live_suffix",
    "load_render_inputs",
    "render_summary",
]

TailItem = tuple[AgentMessage | None, int]
"""(message, tokens) for a raw message item, (None, tokens) for a summary item."""


def fresh_tail_start(items: Sequence[TailItem], count: int, max_tokens: int | None = None) -> int:
    """Index where the protected fresh tail begins.

    Walks back over raw messages protecting the last `count` (optionally capped by `max_tokens`,
    always at least one), then extends back to the newest user message, then further back so that no
    tool result in the tail is separated from the assistant message that called it.
    """
    n = len(items)
    start = n
    seen = tokens = 0
    for i in range(n - 1, -1, -1):
        message, tok = items[i]
        if message is None:
            continue
        if seen >= count or (max_tokens is not None and seen > 0 and tokens + tok > max_tokens):
            break
        seen += 1
        tokens += tok
        start = i
    last_user = next((i for i in range(n - 1, -1, -1) if items[i][0] is not None and items[i][0].role == "user"), None)  # type: ignore[union-attr]
    if last_user is not None and last_user < start:
        start = last_user
    callers: dict[str, int] = {}
    for i, (message, _) in enumerate(items):
        if message is not None:
            for cid in tool_call_ids(message):
                callers[cid] = i
    moved = True
    while moved:
        moved = False
        for i in range(start, n):
            message = items[i][0]
            if isinstance(message, ToolResultMessage):
                caller = callers.get(message.tool_call_id)
                if caller is not None and caller < start:
                    start, moved = caller, True
                    break
    return start


@dataclass(frozen=True)
class RenderedSummary:
    """A summary node as shown to the model, and what it costs."""

    xml: str
    tokens: int

    def message(self) -> UserMessage:
        """A fresh user message carrying the XML (a new object each time; the text is shared)."""
        return UserMessage(content=self.xml)


def render_summary(summary: SummaryRef, parent_ids: Sequence[str], counter: TokenCounter) -> RenderedSummary:
    """Render a node as untrusted XML and count the tokens of the message that carries it."""
    xml = render_summary_xml(summary, parent_ids)
    return RenderedSummary(xml, message_token_count(UserMessage(content=xml), counter))


class RenderCache:
    """Rendered summaries by id (bounded LRU); summary nodes never change once written."""

    def __init__(self, capacity: int = 8192) -> None:
        self._items: OrderedDict[str, RenderedSummary] = OrderedDict()
        self._capacity = capacity

    def get(self, summary_id: str) -> RenderedSummary | None:
        """The cached rendering, if any."""
        hit = self._items.get(summary_id)
        if hit is not None:
            self._items.move_to_end(summary_id)
        return hit

    def put(self, summary_id: str, rendered: RenderedSummary) -> None:
        """Remember a rendering."""
        self._items[summary_id] = rendered
        self._items.move_to_end(summary_id)
        while len(self._items) > self._capacity:
            self._items.popitem(last=False)


@dataclass
class AssemblyPlan:
    """Everything :func:`build_assembly` needs beyond the entries."""

    budget: int
    fresh_tail_count: int
    fresh_tail_max_tokens: int
    rendered: dict[str, RenderedSummary]
    stubs: dict[int, StubbedMessage] = field(default_factory=dict)
    live: list[AgentMessage] = field(default_factory=list)


async def load_render_inputs(
    conn: AsyncConnection,
    entries: Sequence[ResolvedItem],
    cache: RenderCache,
    counter: TokenCounter,
    large_threshold: int,
) -> tuple[dict[str, RenderedSummary], dict[int, StubbedMessage]]:
    """Renderings of the entries' summaries and stubs of their externalised messages.

    Steady state costs no query: renderings come from the cache, and the stub lookup runs only when
    some message is large enough to have been externalised.
    """
    rendered: dict[str, RenderedSummary] = {}
    missing: list[SummaryItem] = []
    for entry in entries:
        if isinstance(entry, SummaryItem):
            hit = cache.get(entry.summary_id)
            if hit is None:
                missing.append(entry)
            else:
                rendered[entry.summary_id] = hit
    if missing:
        parents: dict[str, list[str]] = {}
        ids = [e.summary_id for e in missing]
        rows = await conn.execute(
            select(SummaryParent.summary_id, SummaryParent.source_summary_id)
            .where(SummaryParent.summary_id.in_(ids))
            .order_by(SummaryParent.summary_id, SummaryParent.ordinal)
        )
        for sid, source in rows:
            parents.setdefault(sid, []).append(source)
        for entry in missing:
            node = render_summary(entry.summary, parents.get(entry.summary_id, []), counter)
            cache.put(entry.summary_id, node)
            rendered[entry.summary_id] = node
    candidates = {
        e.message_id: e.message
        for e in entries
        if isinstance(e, MessageItem) and may_be_large(e.message, large_threshold)
    }
    stubs = await load_stubs(conn, candidates) if candidates else {}
    return rendered, stubs


def live_suffix(
    pipeline: Sequence[AgentMessage], entries: Sequence[ResolvedItem], window: int = 64
) -> list[AgentMessage]:
    """Messages the host passed that the store does not hold yet (they follow its newest message)."""
    stored = [e.message for e in entries if isinstance(e, MessageItem)]
    if not stored:
        return list(pipeline) if not entries else []
    newest = to_wire(stored[-1])
    lowest = max(-1, len(pipeline) - 1 - window)
    for i in range(len(pipeline) - 1, lowest, -1):
        if to_wire(pipeline[i]) == newest:
            return list(pipeline[i + 1 :])
    return []


def _view(entry: ResolvedItem, plan: AssemblyPlan) -> tuple[AgentMessage, int]:
    if isinstance(entry, SummaryItem):
        node = plan.rendered[entry.summary_id]
        return node.message(), node.tokens
    stub = plan.stubs.get(entry.message_id)
    if stub is not None:
        return stub.message, stub.token_count
    return entry.message, entry.token_count


def _evict_oldest(prefix: list[tuple[AgentMessage, int]], room: int) -> list[tuple[AgentMessage, int]]:
    # Keep the newest items that fit, stopping at the first that does not (the order stays intact).
    kept = 0
    used = 0
    for _message, tokens in reversed(prefix):
        if used + tokens > room:
            break
        used += tokens
        kept += 1
    out = prefix[len(prefix) - kept :]
    # A result whose calling assistant message was evicted would be an orphan: drop it too.
    while out and isinstance(out[0][0], ToolResultMessage):
        out = out[1:]
    return out


def build_assembly(entries: Sequence[ResolvedItem], plan: AssemblyPlan, counter: TokenCounter) -> AssembleResult:
    """Assemble `entries` within ``plan.budget`` (pure: no I/O).

    Returns:
        The result; ``estimated_tokens`` is the sum of the returned messages' token counts, which
        exceeds the budget only when the fresh tail alone does (``diagnostics`` then says so). The
        prompt authority stays ``assembled``: this view hides no overflow risk of the raw history,
        and ``preassembly_may_overflow`` would make the host's precheck weigh the whole un-windowed
        history, which fails every turn of a long session.
    """
    views = [_view(e, plan) for e in entries]
    tail_at = fresh_tail_start(
        [(v[0] if isinstance(e, MessageItem) else None, v[1]) for e, v in zip(entries, views, strict=True)],
        plan.fresh_tail_count,
        plan.fresh_tail_max_tokens,
    )
    live = [(m, message_token_count(m, counter)) for m in plan.live]
    tail = views[tail_at:] + live
    tail_tokens = sum(t for _, t in tail)
    prefix = views[:tail_at]
    prefix_tokens = sum(t for _, t in prefix)
    room = max(0, plan.budget - tail_tokens)
    kept = prefix if prefix_tokens <= room else _evict_oldest(prefix, room)
    chosen = kept + tail
    cost = {id(m): t for m, t in chosen}
    messages = repair_tool_pairing([m for m, _ in chosen])
    estimated = sum(cost[id(m)] if id(m) in cost else message_token_count(m, counter) for m in messages)
    overflow = tail_tokens > plan.budget
    addition = RECALL_POLICY
    diagnostics: dict[str, Any] = {
        "items": len(entries),
        "evicted_items": len(prefix) - len(kept),
        "tail_items": len(tail),
        "tail_tokens": tail_tokens,
        "budget": plan.budget,
        "tail_overflow": overflow,
    }
    if overflow:
        addition += (
            f"\n\nNote: the protected recent messages alone take {tail_tokens} tokens, over the "
            f"{plan.budget}-token budget; the prompt may overflow."
        )
    return AssembleResult(
        messages=messages,
        estimated_tokens=estimated,
        system_prompt_addition=addition,
        diagnostics=diagnostics,
    )
