"""Recall over the shared store, for every engine: recall, grep, describe and expand across a key's sessions.

Everything here reads core tables only (messages, summaries, their FTS indexes and the DAG edges),
so it works whatever engine wrote them. An engine's own ids (lossless-claw's ``file_…``) reach
:func:`describe` through :func:`register_describer`.
"""

import importlib
from typing import TYPE_CHECKING, Any

from openclaw_ctx.errors import RecallQueryError
from openclaw_ctx.recall.covers import covering_summaries
from openclaw_ctx.recall.describe import (
    FILE_CONTENT_CAP_BYTES,
    DescribeOptions,
    Description,
    FileDescription,
    ItemDescriber,
    ManifestLine,
    MessageDescription,
    SummaryDescription,
    describe,
    register_describer,
    unregister_describer,
)
from openclaw_ctx.recall.expand import ExpandEntry, ExpandResult, expand
from openclaw_ctx.recall.fts import fts_terms, sanitize_fts_query
from openclaw_ctx.recall.grep import MAX_LIMIT, GrepHit, GrepHits, Mode, Scope, Sort, grep
from openclaw_ctx.recall.source import Source, camel_keys, parse_message_id, reading
from openclaw_ctx.recall.subtree import Subtree, load_subtree

if TYPE_CHECKING:
    from openclaw_ctx.recall.ask import RecallHit, RecallHits, RecallMode, Tuning, recall
    from openclaw_ctx.recall.vectors import EmbedReport, embed_pending, pending_counts

# Natural-language recall needs NumPy and the embedding model: imported on first use, so commands
# that never recall start as fast as before.
_LAZY = {
    **dict.fromkeys(("RecallHit", "RecallHits", "RecallMode", "Tuning", "recall"), "openclaw_ctx.recall.ask"),
    **dict.fromkeys(("EmbedReport", "embed_pending", "pending_counts"), "openclaw_ctx.recall.vectors"),
}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = [
    "FILE_CONTENT_CAP_BYTES",
    "MAX_LIMIT",
    "DescribeOptions",
    "EmbedReport",
    "Description",
    "ExpandEntry",
    "ExpandResult",
    "FileDescription",
    "GrepHit",
    "GrepHits",
    "ItemDescriber",
    "ManifestLine",
    "MessageDescription",
    "Mode",
    "RecallHit",
    "RecallHits",
    "RecallMode",
    "RecallQueryError",
    "Scope",
    "Sort",
    "Source",
    "Subtree",
    "SummaryDescription",
    "Tuning",
    "camel_keys",
    "covering_summaries",
    "describe",
    "embed_pending",
    "expand",
    "fts_terms",
    "grep",
    "load_subtree",
    "parse_message_id",
    "pending_counts",
    "reading",
    "recall",
    "register_describer",
    "sanitize_fts_query",
    "unregister_describer",
]
