"""The DAG below one summary, loaded in one recursive query: nodes, ordered edges, message costs."""

from __future__ import annotations

from dataclasses import dataclass, field

from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncConnection

from openclaw_ctx.errors import NotFoundError

__all__ = ["MAX_WALK", "SUBTREE_SQL", "Subtree", "load_subtree", "preorder"]

# One recursive walk down the DAG, join order pinned (CROSS JOIN) so every step is an index search
# on summary_parents / summary_messages by summary_id (lossless-claw PR #1155: a plain JOIN let the
# planner scan summary_messages once per lineage row).
SUBTREE_SQL = """
WITH RECURSIVE sub(sid, lvl) AS (
    SELECT :root, 0
    UNION
    SELECT sp.source_summary_id, sub.lvl + 1
    FROM sub CROSS JOIN summary_parents AS sp ON sp.summary_id = sub.sid
    WHERE sub.lvl < :max_lvl
)
SELECT 'node' AS t, sub.sid AS a, NULL AS b, s.kind AS kind, s.depth AS depth, s.token_count AS tokens,
       sub.lvl AS ord
FROM sub CROSS JOIN summaries AS s ON s.summary_id = sub.sid
UNION ALL
SELECT 'edge', sp.summary_id, sp.source_summary_id, NULL, NULL, NULL, sp.ordinal
FROM (SELECT DISTINCT sid FROM sub) AS d CROSS JOIN summary_parents AS sp ON sp.summary_id = d.sid
UNION ALL
SELECT 'msg', sm.summary_id, CAST(sm.message_id AS TEXT), NULL, NULL, m.token_count, sm.ordinal
FROM (SELECT DISTINCT sid FROM sub) AS d CROSS JOIN summary_messages AS sm ON sm.summary_id = d.sid
CROSS JOIN messages AS m ON m.message_id = sm.message_id
"""

MAX_WALK = 64


@dataclass
class Subtree:
    """The DAG below one summary: nodes, ordered edges to source summaries and to messages."""

    root: str
    nodes: dict[str, tuple[str, int, int, int]] = field(default_factory=dict)  # id -> kind, depth, tokens, level
    sources: dict[str, list[str]] = field(default_factory=dict)
    messages: dict[str, list[int]] = field(default_factory=dict)
    message_tokens: dict[int, int] = field(default_factory=dict)

    def costs(self) -> dict[str, tuple[int, int]]:
        """Per node: (tokens of every summary below it, tokens of every message below it)."""
        memo: dict[str, tuple[set[str], set[int]]] = {}

        def below(sid: str, trail: frozenset[str]) -> tuple[set[str], set[int]]:
            if sid in memo:
                return memo[sid]
            summaries: set[str] = set()
            msgs: set[int] = set(self.messages.get(sid, ()))
            for src in self.sources.get(sid, ()):
                if src in trail or src not in self.nodes:
                    continue  # a cycle is inspect.dag.validate's to report; costs stay finite
                sub_s, sub_m = below(src, trail | {src})
                summaries |= sub_s | {src}
                msgs |= sub_m
            memo[sid] = (summaries, msgs)
            return memo[sid]

        out = {}
        for sid in self.nodes:
            s_ids, m_ids = below(sid, frozenset({sid}))
            out[sid] = (
                sum(self.nodes[s][2] for s in s_ids),
                sum(self.message_tokens.get(m, 0) for m in m_ids),
            )
        return out


async def load_subtree(conn: AsyncConnection, summary_id: str, max_levels: int = MAX_WALK) -> Subtree:
    """Everything below `summary_id` down to `max_levels` summary levels (one query).

    Raises:
        NotFoundError: no such summary.
    """
    tree = Subtree(summary_id)
    edges: list[tuple[str, str, int]] = []
    msgs: list[tuple[str, int, int]] = []
    rows = await conn.execute(text(SUBTREE_SQL), {"root": summary_id, "max_lvl": max_levels})
    for t, a, b, kind, depth, tokens, ord_ in rows:
        if t == "node":
            known = tree.nodes.get(a)
            if known is None or ord_ < known[3]:
                tree.nodes[a] = (kind, depth, tokens, ord_)
        elif t == "edge":
            edges.append((a, b, ord_))
        else:
            msgs.append((a, int(b), ord_))
            tree.message_tokens[int(b)] = tokens
    if summary_id not in tree.nodes:
        raise NotFoundError(f"no summary with id {summary_id!r}")
    for a, b, _ord in sorted(edges, key=lambda e: (e[0], e[2])):
        tree.sources.setdefault(a, []).append(b)
    for a, mid, _ord in sorted(msgs, key=lambda e: (e[0], e[2])):
        tree.messages.setdefault(a, []).append(mid)
    return tree


def preorder(tree: Subtree) -> list[tuple[str, int]]:
    """The tree's nodes depth-first from the root, each once, with its level below the root."""
    out: list[tuple[str, int]] = []
    seen: set[str] = set()
    stack = [(tree.root, 0)]
    while stack:
        sid, level = stack.pop()
        if sid in seen or sid not in tree.nodes:
            continue
        seen.add(sid)
        out.append((sid, level))
        stack.extend((src, level + 1) for src in reversed(tree.sources.get(sid, [])))
    return out
