"""``describe``: a summary (``sum_…``), a message (``msg_<n>``), or an id an engine describes itself.

Summaries and messages are core rows, described here. Other ids belong to an engine's own tables
(lossless-claw's externalised large content is ``file_…``): the engine registers a describer for
its prefix with :func:`register_describer` when it loads, so core never imports the plugin, and
without the plugin such an id gets a clear "not installed".
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import asdict, dataclass
from typing import Any

from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncConnection

from openclaw_ctx._ids import LOSSLESS_ENGINE_ID
from openclaw_ctx.errors import NotFoundError, RecallQueryError
from openclaw_ctx.recall.covers import cover_chain, raw_in_context, summaries_in_context
from openclaw_ctx.recall.source import Source, camel_keys, parse_message_id, reading
from openclaw_ctx.recall.subtree import load_subtree, preorder

__all__ = [
    "FILE_CONTENT_CAP_BYTES",
    "MANIFEST_LINES",
    "Description",
    "DescribeOptions",
    "FileDescription",
    "ItemDescriber",
    "ManifestLine",
    "MessageDescription",
    "SummaryDescription",
    "describe",
    "register_describer",
    "unregister_describer",
]

FILE_CONTENT_CAP_BYTES = 32_768
MANIFEST_LINES = 100


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

    @classmethod
    def of(cls, file_id: str, row: dict[str, Any], stub: str, original: str, *, with_content: bool) -> FileDescription:
        """The description of `original`, its text cut at :data:`FILE_CONTENT_CAP_BYTES` when asked for."""
        if not with_content:
            return cls(id=file_id, row=row, stub=stub, content=None, truncated=False)
        data = original.encode("utf-8")
        truncated = len(data) > FILE_CONTENT_CAP_BYTES
        content = data[:FILE_CONTENT_CAP_BYTES].decode("utf-8", "ignore") if truncated else original
        return cls(id=file_id, row=row, stub=stub, content=content, truncated=truncated)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form: camelCase keys; `row` keeps its column names."""
        return {"kind": "file", **camel_keys(asdict(self), keep=("row",))}


Description = SummaryDescription | MessageDescription | FileDescription


@dataclass(frozen=True)
class DescribeOptions:
    """What the caller asked for beyond the id."""

    token_cap: int | None = None
    expand_file: bool = False


ItemDescriber = Callable[[AsyncConnection, str, DescribeOptions], Awaitable[Description]]
"""An engine's describer for its own ids: (connection, id, options) → a description, or NotFoundError."""

_DESCRIBERS: dict[str, ItemDescriber] = {}
# Id forms core knows the owner of, so that a missing plugin is named rather than the id refused.
_PLUGIN_PREFIXES = {"file_": LOSSLESS_ENGINE_ID}


def register_describer(prefix: str, describer: ItemDescriber) -> None:
    """Let `describer` answer for ids starting with `prefix` (an engine calls this when it loads)."""
    _DESCRIBERS[prefix] = describer


def unregister_describer(prefix: str) -> None:
    """Forget the describer of `prefix` (no error when there is none)."""
    _DESCRIBERS.pop(prefix, None)


_SUMMARY_ROW_SQL = text(
    "SELECT summary_id, session_key, session_id, kind, depth, token_count, descendant_count, "
    "descendant_token_count, source_message_token_count, earliest_at, latest_at, created_at, summarizer, "
    "model, fallback_level, content FROM summaries WHERE summary_id = :id"
)
_CHILDREN_SQL = text(
    "SELECT s.summary_id, s.kind, s.depth, s.token_count FROM summary_parents AS sp "
    "CROSS JOIN summaries AS s ON s.summary_id = sp.summary_id WHERE sp.source_summary_id = :id ORDER BY s.created_at"
)
_MESSAGE_ROW_SQL = text(
    "SELECT message_id, session_key, session_id, seq, entry_id, role, tool_name, text, token_count, "
    "timestamp_ms, created_at FROM messages WHERE message_id = :id"
)


async def describe(
    source: Source, item_id: str | int, *, token_cap: int | None = None, expand_file: bool = False
) -> Description:
    """Describe a summary (``sum_…``), a message (``msg_<n>`` or its integer id) or large content (``file_…``).

    For a summary: metadata, sources, children, and a subtree manifest giving, per descendant, the
    cost to expand it summaries-only and with messages, and whether that fits `token_cap`. For large
    content (described by the engine that keeps it): its metadata and stub, plus (with
    `expand_file`) the original text up to 32 KB.

    Raises:
        NotFoundError: no such summary, message or file.
        RecallQueryError: the id is none of these forms, or its engine is not installed.
    """
    async with reading(source) as conn:
        ref = item_id.strip() if isinstance(item_id, str) else item_id
        if isinstance(ref, str) and ref.startswith("sum_"):
            return await _describe_summary(conn, ref, token_cap)
        if isinstance(ref, str):
            prefix = next((p for p in (*_DESCRIBERS, *_PLUGIN_PREFIXES) if ref.startswith(p)), None)
            if prefix is not None:
                return await _describe_plugin_item(conn, prefix, ref, DescribeOptions(token_cap, expand_file))
        message_id = parse_message_id(ref)
        if message_id is None:
            raise RecallQueryError(
                f"{item_id!r} is not a summary id (sum_…), a message id (msg_<n>) or a large-content id (file_…)"
            )
        return await _describe_message(conn, message_id)


async def _describe_plugin_item(conn: AsyncConnection, prefix: str, ref: str, options: DescribeOptions) -> Description:
    describer = _DESCRIBERS.get(prefix)
    if describer is None:
        raise RecallQueryError(f"{ref!r} is kept by the {_PLUGIN_PREFIXES[prefix]} engine, which is not installed")
    return await describer(conn, ref, options)


async def _describe_summary(conn: AsyncConnection, summary_id: str, token_cap: int | None) -> SummaryDescription:
    row = (await conn.execute(_SUMMARY_ROW_SQL, {"id": summary_id})).mappings().first()
    if row is None:
        raise NotFoundError(f"no summary with id {summary_id!r}")
    tree = await load_subtree(conn, summary_id)
    costs = tree.costs()
    ordered = preorder(tree)
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
    in_context = summary_id in await summaries_in_context(conn, [summary_id])
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


async def _describe_message(conn: AsyncConnection, message_id: int) -> MessageDescription:
    row = (await conn.execute(_MESSAGE_ROW_SQL, {"id": message_id})).mappings().first()
    if row is None:
        raise NotFoundError(f"no message with id msg_{message_id}")
    chain = await cover_chain(conn, message_id)
    return MessageDescription(
        id=f"msg_{message_id}", row=dict(row), covering=chain, in_context=await raw_in_context(conn, message_id)
    )
