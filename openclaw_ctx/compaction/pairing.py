"""Tool-call / tool-result pairing repair, run after any cut or eviction.

Providers reject a transcript where a tool result has no preceding call, or a call has no result
(OpenClaw #8525, #7527, #28377: one orphan bricks the session). :func:`repair_tool_pairing` makes a
message list well-formed again without touching anything else:

- every assistant message with tool calls is followed directly by exactly one result per call, in
  call order; results that arrived later in the same span (before the next assistant message, e.g.
  async tool output after a user interjection) are moved up into that group;
- a call with no result in its span gets a synthetic error result;
- a tool result whose call is not in the span of an earlier assistant message, or that repeats a
  result already placed, is dropped.
"""

from __future__ import annotations

from collections.abc import Sequence

from openclaw_ctx.messages import AgentMessage, AssistantMessage, TextContent, ToolCall, ToolResultMessage

__all__ = ["MISSING_RESULT_TEXT", "is_well_paired", "repair_tool_pairing", "synthetic_result"]

MISSING_RESULT_TEXT = "[tool result missing: dropped by context management]"


def synthetic_result(call: ToolCall, timestamp: int | None = None) -> ToolResultMessage:
    """The error result that stands in for a call whose real result is not in the list."""
    return ToolResultMessage(
        tool_call_id=call.id,
        tool_name=call.name,
        content=[TextContent(text=MISSING_RESULT_TEXT)],
        is_error=True,
        timestamp=timestamp,
    )


def _calls(message: AgentMessage) -> list[ToolCall]:
    if isinstance(message, AssistantMessage):
        return [b for b in message.content if isinstance(b, ToolCall)]
    return []


def repair_tool_pairing(messages: Sequence[AgentMessage]) -> list[AgentMessage]:
    """A copy of `messages` in which every tool call has exactly one result right after its message.

    Pure: the input is not modified; message objects that need no change are reused. A list that is
    already well-formed comes back equal to the input.

    Args:
        messages: The context, oldest first.

    Returns:
        The repaired list.
    """
    out: list[AgentMessage] = []
    placed: set[str] = set()  # result ids already emitted (a later duplicate is dropped)
    i = 0
    n = len(messages)
    while i < n:
        message = messages[i]
        calls = _calls(message)
        if not calls:
            if not isinstance(message, ToolResultMessage):
                out.append(message)
            # A tool result reached here has no call in an earlier span: an orphan, dropped.
            i += 1
            continue
        wanted = {c.id for c in calls}
        found: dict[str, ToolResultMessage] = {}
        rest: list[AgentMessage] = []
        j = i + 1
        while j < n and not isinstance(messages[j], AssistantMessage):
            nxt = messages[j]
            if isinstance(nxt, ToolResultMessage):
                cid = nxt.tool_call_id
                if cid in wanted and cid not in found and cid not in placed:
                    found[cid] = nxt
            else:
                rest.append(nxt)
            j += 1
        out.append(message)
        for call in calls:
            if call.id in placed:
                # The same call id was already answered earlier: a second result would be a duplicate.
                continue
            result = found.get(call.id)
            out.append(result if result is not None else synthetic_result(call, getattr(message, "timestamp", None)))
            placed.add(call.id)
        out.extend(rest)
        i = j
    return out


def is_well_paired(messages: Sequence[AgentMessage]) -> bool:
    """True when every call is answered once, directly after its message, and no result is an orphan."""
    i = 0
    n = len(messages)
    answered: set[str] = set()
    while i < n:
        message = messages[i]
        if isinstance(message, ToolResultMessage):
            return False
        calls = _calls(message)
        i += 1
        pending = list(dict.fromkeys(c.id for c in calls if c.id not in answered))
        for cid in pending:
            if i >= n:
                return False
            nxt = messages[i]
            if not isinstance(nxt, ToolResultMessage) or nxt.tool_call_id != cid:
                return False
            answered.add(cid)
            i += 1
    return True
