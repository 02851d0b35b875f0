"""``expand``: walk a summary down to its sources (and the original messages) within a token cap."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any, Literal

from sqlalchemy import bindparam, text
from sqlalchemy.ext.asyncio import AsyncConnection

from openclaw_ctx.errors import RecallQueryError
from openclaw_ctx.recall.source import Source, camel_keys, reading
from openclaw_ctx.recall.subtree import MAX_WALK, Subtree, load_subtree

__all__ = ["ExpandEntry", "ExpandResult", "expand"]


@dataclass(frozen=True)
class ExpandEntry:
    """One expanded item. With ``include_messages`` summaries are headers only (`text` empty, 0 tokens)."""

    kind: Literal["summary", "message"]
    id: str
    level: int
    token_count: int
    text: str
    depth: int | None = None
    summary_kind: str | None = None
    role: str | None = None
    seq: int | None = None


@dataclass
class ExpandResult:
    """What :func:`expand` returned, what it cites, and whether the cap or the depth stopped it."""

    summary_id: str
    entries: list[ExpandEntry]
    token_cap: int
    truncated: bool
    depth_limited: bool
    more_ids: list[str]

    @property
    def total_tokens(self) -> int:
        """Stored token counts of everything returned."""
        return sum(e.token_count for e in self.entries)

    @property
    def cited_ids(self) -> list[str]:
        """Ids of every entry returned, in order."""
        return [e.id for e in self.entries]

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form."""
        return {
            "summaryId": self.summary_id,
            "entries": [camel_keys(asdict(e)) for e in self.entries],
            "citedIds": self.cited_ids,
            "totalTokens": self.total_tokens,
            "tokenCap": self.token_cap,
            "truncated": self.truncated,
            "depthLimited": self.depth_limited,
            "moreIds": self.more_ids,
        }

    def render(self) -> str:
        """Plain text for a model or a terminal."""
        lines = [
            f"expand {self.summary_id}: {len(self.entries)} entries, {self.total_tokens} tokens (cap {self.token_cap})"
        ]
        for e in self.entries:
            if e.kind == "summary":
                lines.append(f"## {e.id} ({e.summary_kind}, depth {e.depth}, level {e.level})")
            else:
                lines.append(f"### {e.id} ({e.role}, seq {e.seq})")
            if e.text:
                lines.append(e.text)
        if self.truncated:
            lines.append(f"[truncated at the token cap; not expanded: {', '.join(self.more_ids)}]")
        if self.depth_limited:
            lines.append("[deeper sources exist below max depth; expand the listed summaries to go further]")
        lines.append("Cited IDs: " + (", ".join(self.cited_ids) or "none"))
        return "\n".join(lines)


async def expand(
    source: Source,
    summary_id: str,
    *,
    token_cap: int = 4000,
    include_messages: bool = False,
    max_depth: int = 3,
) -> ExpandResult:
    """Walk down a summary's sources within a token cap, nearest first, returned in tree order.

    What the summary covers directly (its source summaries, or with `include_messages` its own
    messages) is kept before anything a level further down; an item that does not fit the cap is
    left out (listed in `more_ids`) and smaller ones after it still come back.

    Args:
        source: the store or an open connection.
        summary_id: the ``sum_…`` node to open.
        token_cap: the returned stored tokens never exceed this (`truncated` is set when something was left out).
        include_messages: return the original message texts (exactly as stored) of every leaf
            reached; summaries along the way are then headers only.
        max_depth: how many summary levels below `summary_id` to walk (1..64).

    Raises:
        NotFoundError: no such summary.
        RecallQueryError: a cap or depth out of range.
    """
    if not isinstance(token_cap, int) or token_cap < 1:
        raise RecallQueryError(f"token_cap must be a positive integer, got {token_cap!r}")
    if not isinstance(max_depth, int) or not 1 <= max_depth <= MAX_WALK:
        raise RecallQueryError(f"max_depth must be an integer from 1 to {MAX_WALK}, got {max_depth!r}")
    async with reading(source) as conn:
        tree = await load_subtree(conn, summary_id.strip(), max_depth)
        plan, depth_limited = _expansion_plan(tree, include_messages, max_depth)
        kept = _within_cap(plan, token_cap)
        chosen = [item for i, item in enumerate(plan) if i in kept]
        more = [
            ref if isinstance(ref, str) else f"msg_{ref}" for i, (_k, ref, _l, _t) in enumerate(plan) if i not in kept
        ]
        entries = await _fetch_entries(conn, tree, chosen, include_messages)
    return ExpandResult(summary_id, entries, token_cap, bool(more), depth_limited, more)


def _within_cap(plan: list[tuple[str, str | int, int, int]], token_cap: int) -> set[int]:
    """The plan items returned: nearest the summary first (what it covers directly, then one level
    down, ...), each one that still fits the cap, so one large message never hides the rest."""
    kept: set[int] = set()
    used = 0
    for i in sorted(range(len(plan)), key=lambda i: (plan[i][2], i)):
        if used + plan[i][3] <= token_cap:
            kept.add(i)
            used += plan[i][3]
    return kept


def _expansion_plan(
    tree: Subtree, include_messages: bool, max_depth: int
) -> tuple[list[tuple[str, str | int, int, int]], bool]:
    plan: list[tuple[str, str | int, int, int]] = []
    seen: set[str] = {tree.root}
    depth_limited = False

    def visit(sid: str, level: int) -> None:
        nonlocal depth_limited
        for src in tree.sources.get(sid, []):
            if src not in tree.nodes or level >= max_depth:
                depth_limited = True
                continue
            if src in seen:
                continue
            seen.add(src)
            plan.append(("summary", src, level + 1, 0 if include_messages else tree.nodes[src][2]))
            visit(src, level + 1)
        if include_messages:
            plan.extend(("message", mid, level + 1, tree.message_tokens[mid]) for mid in tree.messages.get(sid, []))

    visit(tree.root, 0)
    return plan, depth_limited


async def _fetch_entries(
    conn: AsyncConnection, tree: Subtree, chosen: list[tuple[str, str | int, int, int]], include_messages: bool
) -> list[ExpandEntry]:
    summary_ids = [ref for kind, ref, _l, _t in chosen if kind == "summary" and not include_messages]
    message_ids = [ref for kind, ref, _l, _t in chosen if kind == "message"]
    contents: dict[str, str] = {}
    if summary_ids:
        sql = text("SELECT summary_id, content FROM summaries WHERE summary_id IN :ids").bindparams(
            bindparam("ids", expanding=True)
        )
        contents = {r[0]: r[1] for r in await conn.execute(sql, {"ids": summary_ids})}
    messages: dict[int, Any] = {}
    if message_ids:
        sql = text("SELECT message_id, role, seq, text FROM messages WHERE message_id IN :ids").bindparams(
            bindparam("ids", expanding=True)
        )
        messages = {r.message_id: r for r in await conn.execute(sql, {"ids": message_ids})}
    out = []
    for kind, ref, level, tokens in chosen:
        if kind == "summary":
            assert isinstance(ref, str)
            node = tree.nodes[ref]
            out.append(ExpandEntry("summary", ref, level, tokens, contents.get(ref, ""), node[1], node[0]))
        else:
            assert isinstance(ref, int)
            m = messages[ref]
            out.append(ExpandEntry("message", f"msg_{ref}", level, tokens, m.text, role=m.role, seq=m.seq))
    return out
