"""Rendering stored context items into the messages a model sees.

The host builds the pipeline messages of a session from its `context_items`: messages as stored,
legacy summaries as OpenClaw's compactionSummary message, DAG summaries as untrusted XML.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any
from xml.sax.saxutils import escape, quoteattr

from openclaw_ctx.messages import AgentMessage, CompactionSummaryMessage, UserMessage
from openclaw_ctx.store.repo import ContextEntry

__all__ = ["pipeline_messages", "render_summary_xml", "summary_message"]


def render_summary_xml(summary_id: str, summary: dict[str, Any], parent_ids: Sequence[str] = ()) -> str:
    """A summary node as the untrusted XML block lossless-claw shows the model."""
    attrs = {
        "id": summary_id,
        "kind": summary.get("kind", ""),
        "depth": str(summary.get("depth", 0)),
        "descendant_count": str(summary.get("descendant_count", 0)),
        "trust": "untrusted",
        "earliest_at": summary.get("earliest_at") or "",
        "latest_at": summary.get("latest_at") or "",
    }
    head = "<summary " + " ".join(f"{k}={quoteattr(v)}" for k, v in attrs.items()) + ">"
    parents = ""
    if parent_ids:
        parents = "<parents>" + "".join(f"<summary_ref id={quoteattr(p)}/>" for p in parent_ids) + "</parents>"
    return f"{head}{parents}<content>{escape(str(summary.get('content', '')))}</content></summary>"


def summary_message(entry: ContextEntry, parent_ids: Sequence[str] = ()) -> AgentMessage:
    """The message a summary context item becomes."""
    assert entry.summary is not None and entry.summary_id is not None
    if entry.summary.get("kind") == "legacy":
        return CompactionSummaryMessage(summary=str(entry.summary.get("content", "")))
    return UserMessage(content=render_summary_xml(entry.summary_id, entry.summary, parent_ids))


def pipeline_messages(entries: Sequence[ContextEntry]) -> list[AgentMessage]:
    """The session's context as messages, in order (what the legacy pipeline hands to assemble)."""
    out: list[AgentMessage] = []
    for entry in entries:
        if entry.item_type == "message":
            assert entry.message is not None
            out.append(entry.message)
        else:
            out.append(summary_message(entry))
    return out
