"""Rendering stored context items into the messages a model sees.

The host builds the pipeline messages of a session from its `context_items`: messages as stored,
legacy summaries as OpenClaw's compactionSummary message, DAG summaries as untrusted XML.
"""

from __future__ import annotations

from collections.abc import Sequence
from xml.sax.saxutils import escape, quoteattr

from openclaw_ctx.messages import AgentMessage, CompactionSummaryMessage, UserMessage
from openclaw_ctx.store.repo import MessageItem, ResolvedItem, SummaryRef

__all__ = ["pipeline_messages", "render_summary_xml", "summary_message"]


def render_summary_xml(summary: SummaryRef, parent_ids: Sequence[str] = ()) -> str:
    """A summary node as the untrusted XML block lossless-claw shows the model."""
    attrs = {
        "id": summary.summary_id,
        "kind": summary.kind,
        "depth": str(summary.depth),
        "descendant_count": str(summary.descendant_count),
        "trust": "untrusted",
        "earliest_at": summary.earliest_at or "",
        "latest_at": summary.latest_at or "",
    }
    head = "<summary " + " ".join(f"{k}={quoteattr(v)}" for k, v in attrs.items()) + ">"
    parents = ""
    if parent_ids:
        parents = "<parents>" + "".join(f"<summary_ref id={quoteattr(p)}/>" for p in parent_ids) + "</parents>"
    return f"{head}{parents}<content>{escape(summary.content)}</content></summary>"


def summary_message(summary: SummaryRef, parent_ids: Sequence[str] = ()) -> AgentMessage:
    """The message a summary context item becomes."""
    if summary.kind == "legacy":
        return CompactionSummaryMessage(summary=summary.content)
    return UserMessage(content=render_summary_xml(summary, parent_ids))


def pipeline_messages(entries: Sequence[ResolvedItem]) -> list[AgentMessage]:
    """The session's context as messages, in order (what the legacy pipeline hands to assemble)."""
    return [e.message if isinstance(e, MessageItem) else summary_message(e.summary) for e in entries]
