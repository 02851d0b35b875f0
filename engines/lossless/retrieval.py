"""Recall over the shared store: grep, describe and expand, across a key's rotation chain or every key.

All functions take a :class:`Store` (a read snapshot is opened) or an open :class:`AsyncConnection`.
A session key's history is every session of that key, so scoping is by ``session_key``, never by
``session_id``. Message ids are spelled ``msg_<message_id>``; summary ids are ``sum_…``.

Search strategy (see ``benchmarks.md`` §4.4): FTS5 drives the query (``CROSS JOIN`` pins it as the
outer loop) and recency is ``ORDER BY rowid DESC``, which exits early; a key scope is a rowid range
plus a per-row key check, never an ``IN``-subquery; bm25 ranks only a LIMIT-ed set of the newest
matches, so a very common term cannot score the whole index.
"""

from __future__ import annotations

import json
import re
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from typing import Any, Literal

from sqlalchemy import bindparam, text
from sqlalchemy.ext.asyncio import AsyncConnection

from engines.lossless import fts
from engines.lossless.fts import RecallQueryError, SearchRow
from engines.lossless.large_content import load_large_content
from openclaw_ctx.errors import NotFoundError
from openclaw_ctx.store.repo import Driver
from openclaw_ctx.store.store import Store

__all__ = [
    "ExpandEntry",
    "ExpandResult",
    "FileDescription",
    "GrepHit",
    "GrepHits",
    "ManifestLine",
    "MessageDescription",
    "RecallQueryError",
    "Source",
    "Subtree",
    "SummaryDescription",
    "covering_summaries",
    "describe",
    "expand",
    "grep",
    "load_subtree",
    "parse_message_id",
    "reading",
]

Source = Store | AsyncConnection
Mode = Literal["full_text", "regex"]
Scope = Literal["messages", "summaries", "both"]
Sort = Literal["recency", "relevance", "hybrid"]

MAX_LIMIT = 200


@asynccontextmanager
async def reading(source: Source) -> AsyncIterator[AsyncConnection]:
    """A connection for reads: the given one, or a fresh read snapshot of the store."""
    if isinstance(source, AsyncConnection):
        yield source
    else:
        async with source.read() as conn:
            yield conn


def parse_message_id(value: str | int) -> int | None:
    """The integer id of ``msg_<n>`` / ``<n>`` / an int, or None if `value` is not a message id."""
    if isinstance(value, int):
        return value
    match = re.fullmatch(r"(?:msg_|msg#)?(\d+)", value.strip())
    return int(match.group(1)) if match else None


@dataclass(frozen=True)
class GrepHit:
    """One search hit: a message or a summary, where it lives, and a snippet.

    For a message hit, `covering_summary_id` is the leaf/legacy summary over it and
    `context_summary_id` the node of the key's active context that reaches it (None while the
    message is still raw in the context, `in_context` then says so).
    """

    id: str
    kind: Literal["message", "summary"]
    session_key: str
    session_id: str
    time: str | None
    snippet: str
    seq: int | None = None
    role: str | None = None
    depth: int | None = None
    summary_kind: str | None = None
    score: float | None = None
    covering_summary_id: str | None = None
    context_summary_id: str | None = None
    in_context: bool = False

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form (camelCase keys, as the tools and `--json` print)."""
        return camel_keys(asdict(self))


def _camel(name: str) -> str:
    head, *rest = name.split("_")
    return head + "".join(p.title() for p in rest)


def camel_keys(value: dict[str, Any], keep: tuple[str, ...] = ()) -> dict[str, Any]:
    """`value` with camelCase keys, recursing into dicts and lists except under the `keep` keys."""

    def convert(item: Any) -> Any:
        if isinstance(item, dict):
            return {_camel(k): v if k in keep else convert(v) for k, v in item.items()}
        if isinstance(item, list):
            return [convert(v) for v in item]
        return item

    result: dict[str, Any] = convert(value)
    return result


class GrepHits(list[GrepHit]):
    """The hits, plus how they were found: `strategy` (fts | like | regex) and `complete`.

    `complete` is False when a regex scan stopped at its row bound before reaching the oldest rows.
    """

    def __init__(self, hits: list[GrepHit], *, strategy: str, complete: bool = True) -> None:
        super().__init__(hits)
        self.strategy = strategy
        self.complete = complete


# --- grep --------------------------------------------------------------------------------------


async def grep(
    source: Source,
    pattern: str,
    *,
    mode: Mode = "full_text",
    scope: Scope = "both",
    session_key: str | None = None,
    since: str | datetime | None = None,
    before: str | datetime | None = None,
    limit: int = 50,
    sort: Sort = "recency",
) -> GrepHits:
    """Search messages and/or summaries of one session key (every session of it), or of all keys.

    Args:
        source: the store or an open connection.
        pattern: words (full_text: AND of quoted phrases, a trailing ``*`` is a prefix) or a Python regex.
        mode: ``full_text`` (FTS5; CJK text or an FTS failure falls back to LIKE, AND semantics) or ``regex``.
        scope: ``messages``, ``summaries`` or ``both``.
        session_key: limit to this key's history; None searches every key.
        since: only items at or after this ISO-8601 time.
        before: only items strictly before this ISO-8601 time.
        limit: 1..200 hits.
        sort: ``recency`` (newest first), ``relevance`` (bm25) or ``hybrid`` (bm25 damped by age).

    Returns:
        The hits, best first.

    Raises:
        RecallQueryError: an empty pattern, an invalid regex, or an argument out of range.
    """
    _check_choice("mode", mode, ("full_text", "regex"))
    _check_choice("scope", scope, ("messages", "summaries", "both"))
    _check_choice("sort", sort, ("recency", "relevance", "hybrid"))
    if not isinstance(limit, int) or isinstance(limit, bool) or not 1 <= limit <= MAX_LIMIT:
        raise RecallQueryError(f"limit must be an integer from 1 to {MAX_LIMIT}, got {limit!r}")
    if not pattern or not pattern.strip():
        raise RecallQueryError("the search pattern is empty")
    window = fts.TimeWindow(_iso(since, "since"), _iso(before, "before"))
    now_ms = int(datetime.now(UTC).timestamp() * 1000)
    query = fts.SearchQuery(pattern, mode, session_key, window, limit, sort, now_ms)
    async with reading(source) as conn:
        rows: list[SearchRow] = []
        strategies: list[str] = []
        complete = True
        for table in ("messages", "summaries"):
            if scope in (table, "both"):
                found = await fts.run(conn, table, query)
                rows.extend(found.rows)
                strategies.append(found.strategy)
                complete = complete and found.complete
        ranked = fts.rank(rows, sort, now_ms=now_ms)[:limit]
        hits = await _to_hits(conn, ranked, pattern, mode)
    return GrepHits(hits, strategy="+".join(dict.fromkeys(strategies)), complete=complete)


def _check_choice(name: str, value: str, allowed: tuple[str, ...]) -> None:
    if value not in allowed:
        raise RecallQueryError(f"{name} must be one of {', '.join(allowed)}; got {value!r}")


def _iso(value: str | datetime | None, name: str) -> str | None:
    """Normalise a time bound to the store's ISO-8601 UTC text."""
    if value is None:
        return None
    if isinstance(value, str):
        try:
            value = datetime.fromisoformat(value.strip().replace("Z", "+00:00"))
        except ValueError as exc:
            raise RecallQueryError(
                f"{name} must be an ISO-8601 time such as 2026-01-31T12:00:00Z, got {value!r}"
            ) from exc
    if value.tzinfo is None:
        value = value.replace(tzinfo=UTC)
    return value.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"


_COVER_SQL = text(
    """
    WITH RECURSIVE up(mid, sid, lvl) AS (
        SELECT sm.message_id, sm.summary_id, 0 FROM summary_messages AS sm WHERE sm.message_id IN :ids
        UNION
        SELECT up.mid, sp.summary_id, up.lvl + 1
        FROM up CROSS JOIN summary_parents AS sp ON sp.source_summary_id = up.sid
        WHERE up.lvl < 64
    )
    SELECT up.mid, up.sid, up.lvl,
           EXISTS (SELECT 1 FROM context_items AS ci CROSS JOIN sessions AS se ON se.session_id = ci.session_id
                   WHERE ci.summary_id = up.sid AND se.status = 'active') AS in_ctx
    FROM up ORDER BY up.mid, up.lvl
    """
).bindparams(bindparam("ids", expanding=True))

_RAW_IN_CONTEXT_SQL = text(
    """
    SELECT ci.message_id FROM context_items AS ci CROSS JOIN sessions AS se ON se.session_id = ci.session_id
    WHERE ci.message_id IN :ids AND se.status = 'active'
    """
).bindparams(bindparam("ids", expanding=True))


# Both of the above in one round trip (a grep page needs both): cover rows first (kind 0, in
# (mid, lvl) order), then the raw in-context message ids (kind 1).
# Sent through the driver (one hop), the ids as one JSON array.
_COVER_AND_RAW_SQL = (
    _COVER_SQL.text.replace("SELECT up.mid, up.sid, up.lvl,", "SELECT 0 AS kind, up.mid, up.sid, up.lvl,").replace(
        "FROM up ORDER BY up.mid, up.lvl", "FROM up"
    )
    + " UNION ALL "
    + _RAW_IN_CONTEXT_SQL.text.replace("SELECT ci.message_id FROM", "SELECT 1, ci.message_id, NULL, NULL, NULL FROM")
    + " ORDER BY 1, 2, 4"
).replace("IN :ids", "IN (SELECT value FROM json_each(:ids))")


def _fold_covers(rows: Any) -> dict[int, tuple[str | None, str | None]]:
    out: dict[int, tuple[str | None, str | None]] = {}
    for mid, sid, lvl, in_ctx in rows:
        leaf, ctx = out.get(mid, (None, None))
        if lvl == 0 and leaf is None:
            leaf = sid
        if in_ctx and ctx is None:
            ctx = sid
        out[mid] = (leaf, ctx)
    return out


async def covering_summaries(conn: AsyncConnection, message_ids: list[int]) -> dict[int, tuple[str | None, str | None]]:
    """For each message id: (covering leaf/legacy summary, the active-context node that reaches it)."""
    if not message_ids:
        return {}
    return _fold_covers(await conn.execute(_COVER_SQL, {"ids": message_ids}))


async def _to_hits(conn: AsyncConnection, rows: list[SearchRow], pattern: str, mode: Mode) -> list[GrepHit]:
    message_ids = [r.message_id for r in rows if r.message_id is not None]
    covers: dict[int, tuple[str | None, str | None]] = {}
    raw: set[int] = set()
    if message_ids:
        found = await (await Driver.of(conn)).fetchall(_COVER_AND_RAW_SQL, {"ids": json.dumps(message_ids)})
        covers = _fold_covers(tuple(r[1:]) for r in found if r[0] == 0)
        raw = {r[1] for r in found if r[0] == 1}
    hits = []
    for r in rows:
        snippet = fts.snippet(r.text, pattern, mode)
        if r.message_id is not None:
            leaf, ctx = covers.get(r.message_id, (None, None))
            hits.append(
                GrepHit(
                    id=f"msg_{r.message_id}",
                    kind="message",
                    session_key=r.session_key,
                    session_id=r.session_id,
                    time=r.time,
                    snippet=snippet,
                    seq=r.seq,
                    role=r.role,
                    score=r.score,
                    covering_summary_id=leaf,
                    context_summary_id=ctx,
                    in_context=r.message_id in raw,
                )
            )
        else:
            hits.append(
                GrepHit(
                    id=r.summary_id or "",
                    kind="summary",
                    session_key=r.session_key,
                    session_id=r.session_id,
                    time=r.time,
                    snippet=snippet,
                    depth=r.depth,
                    summary_kind=r.summary_kind,
                    score=r.score,
                )
            )
    return hits


# --- the subtree below a summary ---------------------------------------------------------------

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
                    continue  # a cycle is dag.validate's to report; costs stay finite
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


# --- describe ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class ManifestLine:
    """One node of a subtree: where it sits and what expanding it costs."""

    id: str
    level: int
    kind: str
    depth: int
    tokens: int
    summaries_cost: int
    messages_cost: int
    fits_cap: bool | None


@dataclass
class SummaryDescription:
    """A summary's metadata, its sources (parents), the summaries built from it (children), its subtree."""

    id: str
    row: dict[str, Any]
    sources: list[dict[str, Any]]
    source_message_ids: list[int]
    children: list[dict[str, Any]]
    in_context: bool
    manifest: list[ManifestLine]
    manifest_total: int

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form: camelCase keys; `row` keeps the table's column names."""
        return {"kind": "summary", **camel_keys(asdict(self), keep=("row",))}


@dataclass
class MessageDescription:
    """A message row and the chain of summaries over it (leaf first)."""

    id: str
    row: dict[str, Any]
    covering: list[dict[str, Any]]
    in_context: bool

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form: camelCase keys; `row` keeps the table's column names."""
        return {"kind": "message", **camel_keys(asdict(self), keep=("row",))}


@dataclass(frozen=True)
class FileDescription:
    """Externalised large content (``file_…``): metadata, the stub the model saw and, when asked, the text."""

    id: str
    row: dict[str, Any]
    stub: str
    content: str | None
    """The original text, at most `FILE_CONTENT_CAP_BYTES` of it; None unless asked for."""
    truncated: bool

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form: camelCase keys; `row` keeps its column names."""
        return {"kind": "file", **camel_keys(asdict(self), keep=("row",))}


FILE_CONTENT_CAP_BYTES = 32_768
MANIFEST_LINES = 100

_SUMMARY_ROW_SQL = text(
    "SELECT summary_id, session_key, session_id, kind, depth, token_count, descendant_count, "
    "descendant_token_count, source_message_token_count, earliest_at, latest_at, created_at, summarizer, "
    "model, fallback_level, content FROM summaries WHERE summary_id = :id"
)
_CHILDREN_SQL = text(
    "SELECT s.summary_id, s.kind, s.depth, s.token_count FROM summary_parents AS sp "
    "CROSS JOIN summaries AS s ON s.summary_id = sp.summary_id WHERE sp.source_summary_id = :id ORDER BY s.created_at"
)
_IN_ACTIVE_CONTEXT_SQL = text(
    "SELECT EXISTS (SELECT 1 FROM context_items AS ci CROSS JOIN sessions AS se ON se.session_id = ci.session_id "
    "WHERE ci.summary_id = :id AND se.status = 'active')"
)
_MESSAGE_ROW_SQL = text(
    "SELECT message_id, session_key, session_id, seq, entry_id, role, tool_name, text, token_count, "
    "timestamp_ms, created_at FROM messages WHERE message_id = :id"
)


async def describe(
    source: Source, item_id: str | int, *, token_cap: int | None = None, expand_file: bool = False
) -> SummaryDescription | MessageDescription | FileDescription:
    """Describe a summary (``sum_…``), a message (``msg_<n>`` or its integer id) or large content (``file_…``).

    For a summary: metadata, sources, children, and a subtree manifest giving, per descendant, the
    cost to expand it summaries-only and with messages, and whether that fits `token_cap`. For large
    content: its metadata and stub, plus (with `expand_file`) the original text up to 32 KB.

    Raises:
        NotFoundError: no such summary, message or file.
        RecallQueryError: the id is none of these forms.
    """
    async with reading(source) as conn:
        if isinstance(item_id, str) and item_id.strip().startswith("sum_"):
            return await _describe_summary(conn, item_id.strip(), token_cap)
        if isinstance(item_id, str) and item_id.strip().startswith("file_"):
            return await _describe_file(conn, item_id.strip(), expand_file)
        message_id = parse_message_id(item_id)
        if message_id is None:
            raise RecallQueryError(
                f"{item_id!r} is not a summary id (sum_…), a message id (msg_<n>) or a large-content id (file_…)"
            )
        return await _describe_message(conn, message_id)


async def _describe_file(conn: AsyncConnection, file_id: str, expand_file: bool) -> FileDescription:
    record = await load_large_content(conn, file_id)
    row = {
        "file_id": record.file_id,
        "session_key": record.session_key,
        "message_id": f"msg_{record.message_id}",
        "kind": record.kind,
        "name": record.name,
        "mime_type": record.mime_type,
        "byte_size": record.byte_size,
        "token_count": record.token_count,
    }
    content, truncated = None, False
    if expand_file:
        data = record.content.encode("utf-8")
        truncated = len(data) > FILE_CONTENT_CAP_BYTES
        content = data[:FILE_CONTENT_CAP_BYTES].decode("utf-8", "ignore") if truncated else record.content
    return FileDescription(id=file_id, row=row, stub=record.stub, content=content, truncated=truncated)


async def _describe_summary(conn: AsyncConnection, summary_id: str, token_cap: int | None) -> SummaryDescription:
    row = (await conn.execute(_SUMMARY_ROW_SQL, {"id": summary_id})).mappings().first()
    if row is None:
        raise NotFoundError(f"no summary with id {summary_id!r}")
    tree = await load_subtree(conn, summary_id)
    costs = tree.costs()
    ordered = _preorder(tree)
    manifest = [
        ManifestLine(
            id=sid,
            level=level,
            kind=tree.nodes[sid][0],
            depth=tree.nodes[sid][1],
            tokens=tree.nodes[sid][2],
            summaries_cost=costs[sid][0],
            messages_cost=costs[sid][1],
            fits_cap=None if token_cap is None else costs[sid][1] <= token_cap,
        )
        for sid, level in ordered[:MANIFEST_LINES]
    ]
    sources = [
        {"id": s, "kind": tree.nodes[s][0], "depth": tree.nodes[s][1], "tokens": tree.nodes[s][2]}
        for s in tree.sources.get(summary_id, [])
        if s in tree.nodes
    ]
    children = [
        {"id": r.summary_id, "kind": r.kind, "depth": r.depth, "tokens": r.token_count}
        for r in await conn.execute(_CHILDREN_SQL, {"id": summary_id})
    ]
    in_context = bool(await conn.scalar(_IN_ACTIVE_CONTEXT_SQL, {"id": summary_id}))
    return SummaryDescription(
        id=summary_id,
        row=dict(row),
        sources=sources,
        source_message_ids=tree.messages.get(summary_id, []),
        children=children,
        in_context=in_context,
        manifest=manifest,
        manifest_total=len(ordered),
    )


def _preorder(tree: Subtree) -> list[tuple[str, int]]:
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


async def _describe_message(conn: AsyncConnection, message_id: int) -> MessageDescription:
    row = (await conn.execute(_MESSAGE_ROW_SQL, {"id": message_id})).mappings().first()
    if row is None:
        raise NotFoundError(f"no message with id msg_{message_id}")
    chain = []
    for _mid, sid, lvl, in_ctx in await conn.execute(_COVER_SQL, {"ids": [message_id]}):
        chain.append({"id": sid, "level": lvl, "inContext": bool(in_ctx)})
    raw = bool(list(await conn.execute(_RAW_IN_CONTEXT_SQL, {"ids": [message_id]})))
    return MessageDescription(id=f"msg_{message_id}", row=dict(row), covering=chain, in_context=raw)


# --- expand ------------------------------------------------------------------------------------


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
    """Walk down a summary's sources (source summaries first, then messages) within a token cap.

    Args:
        source: the store or an open connection.
        summary_id: the ``sum_…`` node to open.
        token_cap: stop before the returned stored tokens would exceed this (`truncated` is then set).
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
        chosen: list[tuple[str, str | int, int, int]] = []
        used, truncated, more = 0, False, []
        for kind, ref, level, tokens in plan:
            if truncated or used + tokens > token_cap:
                truncated = True
                more.append(ref if isinstance(ref, str) else f"msg_{ref}")
                continue
            used += tokens
            chosen.append((kind, ref, level, tokens))
        entries = await _fetch_entries(conn, tree, chosen, include_messages)
    return ExpandResult(summary_id, entries, token_cap, truncated, depth_limited, more)


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
