"""A session key's summary DAG in networkx: load it, validate it, export it.

Nodes are ``sum_…`` summaries and ``msg_<id>`` messages; an edge goes from a summary to each of its
sources (summary or message), carrying the source's ordinal. The graph's ``context`` attribute is
the key's current context (its active session's items, in order). :func:`validate` checks what the
lossless promise rests on: the DAG is acyclic, depths are consistent, every message of the key is
covered by exactly one leaf/legacy summary or is still raw in the context and is reachable from the
context, and every context item resolves within the key. :func:`deep_check` runs it for every key.
"""

from __future__ import annotations

import html
import re
from dataclasses import dataclass
from typing import Any, Literal

import networkx as nx
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncConnection

from openclaw_ctx.errors import RecallQueryError
from openclaw_ctx.store import ReadSource, reading
from openclaw_ctx.store.repo import HOST_ROTATION_REASON

__all__ = ["FORMATS", "Problem", "deep_check", "export", "load_dag", "validate"]

FORMATS = ("dot", "graphml", "mermaid")


@dataclass(frozen=True)
class Problem:
    """One thing wrong with a key's DAG or context; `subject` is the node or item it concerns."""

    code: str
    session_key: str
    subject: str
    detail: str
    severity: Literal["error", "warning"] = "error"

    def __str__(self) -> str:
        return f"[{self.severity}] {self.session_key} {self.subject}: {self.code}: {self.detail}"


_SUMMARIES = text(
    "SELECT summary_id, session_id, kind, depth, token_count, descendant_count, earliest_at, latest_at "
    "FROM summaries WHERE session_key = :k"
)
_SUMMARY_EDGES = text(
    "SELECT sp.summary_id, sp.source_summary_id, sp.ordinal, src.session_key, src.kind, src.depth "
    "FROM summaries AS s CROSS JOIN summary_parents AS sp ON sp.summary_id = s.summary_id "
    "LEFT JOIN summaries AS src ON src.summary_id = sp.source_summary_id WHERE s.session_key = :k"
)
_MESSAGE_EDGES = text(
    "SELECT sm.summary_id, sm.message_id, sm.ordinal, m.session_key "
    "FROM summaries AS s CROSS JOIN summary_messages AS sm ON sm.summary_id = s.summary_id "
    "LEFT JOIN messages AS m ON m.message_id = sm.message_id WHERE s.session_key = :k"
)
# Out of context by OpenClaw's own rules, not lost: a message before the last `reset` on an imported
# transcript's branch (path order is file order), or one marked excludeFromContext.
_MESSAGES = text(
    "WITH resets AS (SELECT session_id, max(line_no) AS line_no FROM transcript_entries "
    "WHERE entry_type = 'reset' AND on_active_branch = 1 "
    "AND session_id IN (SELECT session_id FROM sessions WHERE session_key = :k) GROUP BY session_id) "
    "SELECT m.message_id, m.session_id, m.seq, m.role, m.token_count, m.on_active_branch, "
    "coalesce(te.line_no < r.line_no, 0) AS before_reset, "
    "coalesce(json_extract(m.message_json, '$.excludeFromContext') IS 1, 0) AS excluded "
    "FROM messages AS m LEFT JOIN resets AS r ON r.session_id = m.session_id "
    "LEFT JOIN transcript_entries AS te ON r.line_no IS NOT NULL AND te.session_id = m.session_id "
    "AND te.entry_id = m.entry_id WHERE m.session_key = :k"
)
_SESSIONS = text(
    "SELECT session_id, status, parent_session_id, rotation_reason FROM sessions WHERE session_key = :k "
    "ORDER BY created_at, session_id"
)
_CONTEXT = text(
    "SELECT ci.session_id, ci.ordinal, ci.item_type, ci.message_id, ci.summary_id, "
    "m.session_key AS message_key, s.session_key AS summary_key, "
    "m.message_id IS NOT NULL AS message_ok, s.summary_id IS NOT NULL AS summary_ok "
    "FROM sessions AS se CROSS JOIN context_items AS ci ON ci.session_id = se.session_id "
    "LEFT JOIN messages AS m ON m.message_id = ci.message_id "
    "LEFT JOIN summaries AS s ON s.summary_id = ci.summary_id "
    "WHERE se.session_key = :k ORDER BY ci.session_id, ci.ordinal"
)


def _msg(message_id: int) -> str:
    return f"msg_{message_id}"


def _origin(key: str, found_key: str | None) -> dict[str, Any]:
    """Marks for an edge target outside the key's own rows: missing entirely, or of another key."""
    if found_key is None:
        return {"missing": True}
    return {} if found_key == key else {"foreign_key": found_key}


async def _load(conn: AsyncConnection, key: str, include_messages: bool) -> tuple[nx.DiGraph[str], list[Any]]:
    graph: nx.DiGraph[str] = nx.DiGraph(session_key=key)
    for r in await conn.execute(_SUMMARIES, {"k": key}):
        graph.add_node(
            r.summary_id,
            type="summary",
            kind=r.kind,
            depth=r.depth,
            tokens=r.token_count,
            session_id=r.session_id,
            descendant_count=r.descendant_count,
            earliest_at=r.earliest_at,
            latest_at=r.latest_at,
        )
    for r in await conn.execute(_SUMMARY_EDGES, {"k": key}):
        if r.source_summary_id not in graph:
            graph.add_node(
                r.source_summary_id, type="summary", kind=r.kind, depth=r.depth, **_origin(key, r.session_key)
            )
        graph.add_edge(r.summary_id, r.source_summary_id, ordinal=r.ordinal)
    if include_messages:
        for r in await conn.execute(_MESSAGES, {"k": key}):
            graph.add_node(
                _msg(r.message_id),
                type="message",
                role=r.role,
                seq=r.seq,
                tokens=r.token_count,
                session_id=r.session_id,
                off_branch=not r.on_active_branch or None,
                out_of_context=bool(r.before_reset or r.excluded) or None,
            )
    for r in await conn.execute(_MESSAGE_EDGES, {"k": key}):
        node = _msg(r.message_id)
        if node not in graph:
            graph.add_node(node, type="message", **_origin(key, r.session_key))
        graph.add_edge(r.summary_id, node, ordinal=r.ordinal)
    sessions = list(await conn.execute(_SESSIONS, {"k": key}))
    current = next(
        (s.session_id for s in sessions if s.status == "active"), sessions[-1].session_id if sessions else None
    )
    contexts = list(await conn.execute(_CONTEXT, {"k": key}))
    graph.graph["current_session_id"] = current
    graph.graph["parents"] = {s.session_id: (s.parent_session_id, s.rotation_reason) for s in sessions}
    graph.graph["context"] = [
        _msg(c.message_id) if c.item_type == "message" else c.summary_id for c in contexts if c.session_id == current
    ]
    return graph, contexts


async def load_dag(source: ReadSource, session_key: str, *, include_messages: bool = True) -> nx.DiGraph[str]:
    """The DAG of one session key (all its sessions), with its current context as ``graph['context']``.

    Args:
        source: the store or an open connection.
        session_key: whose DAG.
        include_messages: add every message of the key as a node (covered ones are added anyway).
    """
    async with reading(source) as conn:
        graph, _contexts = await _load(conn, session_key, include_messages)
    return graph


async def validate(source: ReadSource, session_key: str | None = None) -> list[Problem]:
    """Check one key's DAG and contexts (every key when `session_key` is None); [] means healthy."""
    async with reading(source) as conn:
        if session_key is None:
            keys = [r[0] for r in await conn.execute(text("SELECT DISTINCT session_key FROM sessions ORDER BY 1"))]
        else:
            keys = [session_key]
        problems: list[Problem] = []
        for key in keys:
            graph, contexts = await _load(conn, key, include_messages=True)
            problems.extend(_check(graph, contexts))
    return problems


async def deep_check(source: ReadSource) -> list[Problem]:
    """:func:`validate` over every session key in the store (``doctor --deep``)."""
    return await validate(source, None)


def _check(graph: nx.DiGraph[str], contexts: list[Any]) -> list[Problem]:
    key: str = graph.graph["session_key"]
    out: list[Problem] = []

    def add(code: str, subject: str, detail: str, severity: Literal["error", "warning"] = "error") -> None:
        out.append(Problem(code, key, subject, detail, severity))

    if not nx.is_directed_acyclic_graph(graph):
        cycle = [a for a, _b in nx.find_cycle(graph)]
        add("cycle", cycle[0], "summary sources loop back: " + " → ".join([*cycle, cycle[0]]))
    for node, data in graph.nodes(data=True):
        if "foreign_key" in data:
            add("cross_key_edge", node, f"a summary of this key uses a source of key {data['foreign_key']}")
        elif data.get("missing"):
            add("dangling_edge", node, "a summary edge points at a row that does not exist")
        if data["type"] == "summary" and "tokens" in data:
            out.extend(_check_summary(graph, key, node, data))
    out.extend(_check_coverage(graph, key))
    out.extend(_check_context(graph, key, contexts))
    return out


def _check_summary(graph: nx.DiGraph[str], key: str, node: str, data: dict[str, Any]) -> list[Problem]:
    problems = []
    sources = [graph.nodes[s] for s in graph.successors(node) if graph.nodes[s]["type"] == "summary"]
    if data["tokens"] is None or data["tokens"] <= 0:
        problems.append(Problem("token_count", key, node, f"token count {data['tokens']} is not positive"))
    if data["kind"] == "leaf":
        if data["depth"] != 0:
            problems.append(Problem("depth", key, node, f"a leaf has depth {data['depth']}, expected 0"))
        if sources:
            problems.append(Problem("leaf_sources", key, node, "a leaf summary has source summaries"))
    elif data["kind"] == "condensed" and not sources:
        problems.append(Problem("depth", key, node, "a condensed summary has no source summaries"))
    elif sources:  # condensed, or a legacy summary that updated earlier ones
        if all(s.get("depth") is not None for s in sources):
            expected = max(s["depth"] for s in sources) + 1
            if data["depth"] != expected:
                problems.append(Problem("depth", key, node, f"depth {data['depth']}, expected {expected}"))
    return problems


def _check_coverage(graph: nx.DiGraph[str], key: str) -> list[Problem]:
    context: list[str] = graph.graph["context"]
    raw = {n for n in context if n.startswith("msg_")}
    reachable: set[str] = set(raw)
    for node in context:
        if node in graph and not node.startswith("msg_"):
            reachable.add(node)
            reachable |= nx.descendants(graph, node)
    lineage = _lineage(graph)
    problems = []
    for node, data in graph.nodes(data=True):
        # An imported transcript's abandoned branches are kept but were never in any context.
        if data["type"] != "message" or "foreign_key" in data or data.get("missing") or data.get("off_branch"):
            continue
        covers = [p for p in graph.predecessors(node) if graph.nodes[p].get("kind") in ("leaf", "legacy")]
        if len(covers) > 1:
            problems.append(Problem("covered_twice", key, node, "covered by " + ", ".join(sorted(covers))))
        if data.get("session_id") not in lineage or data.get("out_of_context"):
            continue  # an earlier life of the key (before /new, /reset, a host rotation): history, not context
        if not covers and node not in raw:
            problems.append(Problem("uncovered", key, node, "neither summarized nor raw in the current context"))
        elif node not in reachable:
            problems.append(Problem("unreachable", key, node, "not reachable from the current context by expansion"))
        elif covers and node in raw and any(c in reachable for c in covers):
            problems.append(
                Problem(
                    "duplicated_in_context", key, node, "raw in the context and also under a summary in it", "warning"
                )
            )
    return problems


def _lineage(graph: nx.DiGraph[str]) -> set[str]:
    """The sessions whose messages the current context must still reach: the current one and its ancestors.

    The walk stops at a fresh start (`/new`, `/reset`: no parent) and at an imported OpenClaw rotation:
    what the model sees there is what OpenClaw rebuilds from the successor's transcript, which may leave
    out messages of its predecessor. Those are history (stored, searchable, exported), not context, and
    no rotation of ours dropped them.
    """
    parents: dict[str, tuple[str | None, str | None]] = graph.graph.get("parents", {})
    session: str | None = graph.graph.get("current_session_id")
    out: set[str] = set()
    while session is not None and session not in out:
        out.add(session)
        parent, reason = parents.get(session, (None, None))
        session = None if reason == HOST_ROTATION_REASON else parent
    return out


def _check_context(graph: nx.DiGraph[str], key: str, contexts: list[Any]) -> list[Problem]:
    problems = []
    for c in contexts:
        subject = f"{c.session_id}#{c.ordinal}"
        if c.item_type == "message":
            if not c.message_ok:
                problems.append(Problem("context_unresolved", key, subject, f"message {c.message_id} does not exist"))
            elif c.message_key != key:
                problems.append(
                    Problem("context_cross_key", key, subject, f"message {c.message_id} is of {c.message_key}")
                )
        elif not c.summary_ok:
            problems.append(Problem("context_unresolved", key, subject, f"summary {c.summary_id} does not exist"))
        elif c.summary_key != key:
            problems.append(Problem("context_cross_key", key, subject, f"summary {c.summary_id} is of {c.summary_key}"))
    return problems


# --- export ------------------------------------------------------------------------------------


def _label(node: str, data: dict[str, Any]) -> str:
    if data["type"] == "summary":
        label = f"{node}\n{data.get('kind')} d{data.get('depth')} {data.get('tokens', '?')} tok"
        if data.get("earliest_at") or data.get("latest_at"):
            label += f"\n{data.get('earliest_at') or '?'} → {data.get('latest_at') or '?'}"
        return label
    return f"{node}\n{data.get('role', '?')} #{data.get('seq', '?')}"


def export(graph: nx.DiGraph[str], fmt: str) -> str:
    """The graph as Graphviz DOT, GraphML or a Mermaid flowchart.

    Raises:
        RecallQueryError: an unknown format (svg needs graphviz and is not offered here).
    """
    if fmt == "dot":
        return _dot(graph)
    if fmt == "graphml":
        return _graphml(graph)
    if fmt == "mermaid":
        return _mermaid(graph)
    raise RecallQueryError(f"format must be one of {', '.join(FORMATS)}; got {fmt!r}")


def _dot(graph: nx.DiGraph[str]) -> str:
    def q(value: str) -> str:
        return '"' + value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n") + '"'

    context = set(graph.graph.get("context", []))
    lines = [f"digraph {q('lcm ' + str(graph.graph.get('session_key', '')))} {{", "  rankdir=TB;"]
    for node, data in graph.nodes(data=True):
        shape = "box" if data["type"] == "summary" else "ellipse"
        extra = ", penwidth=2" if node in context else ""
        lines.append(f"  {q(node)} [label={q(_label(node, data))}, shape={shape}{extra}];")
    for a, b in graph.edges():
        lines.append(f"  {q(a)} -> {q(b)};")
    lines.append("}")
    return "\n".join(lines) + "\n"


def _graphml(graph: nx.DiGraph[str]) -> str:
    # GraphML holds scalars only: drop None, stringify the context list.
    clean: nx.DiGraph[str] = nx.DiGraph()
    clean.graph.update(
        session_key=str(graph.graph.get("session_key", "")), context=" ".join(graph.graph.get("context", []))
    )
    for node, data in graph.nodes(data=True):
        clean.add_node(node, **{k: v for k, v in data.items() if v is not None})
    for a, b, data in graph.edges(data=True):
        clean.add_edge(a, b, **{k: v for k, v in data.items() if v is not None})
    return "\n".join(nx.generate_graphml(clean)) + "\n"


def _mermaid(graph: nx.DiGraph[str]) -> str:
    def ident(node: str) -> str:
        return re.sub(r"\W", "_", node)

    lines = ["flowchart TD"]
    for node, data in graph.nodes(data=True):
        label = html.escape(_label(node, data)).replace("\n", "<br/>")
        shape = f'["{label}"]' if data["type"] == "summary" else f'("{label}")'
        lines.append(f"  {ident(node)}{shape}")
    for a, b in graph.edges():
        lines.append(f"  {ident(a)} --> {ident(b)}")
    return "\n".join(lines) + "\n"
