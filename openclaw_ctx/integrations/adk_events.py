"""Google ADK events as the store's messages, and back.

An event becomes one message of its session's key: the user's text a ``user`` message, an agent's
text and function calls an ``assistant`` message (thoughts as thinking), function responses a
``toolResult``, an event with no content (a state change, an escalation) a ``custom`` message that
the model is never shown. The event itself travels inside the message as ``adkEvent`` (its JSON,
as ADK's own database service writes it), so :func:`event_of` gives back the same event.
"""

from __future__ import annotations

import json
from typing import Any

from google.adk.events.event import Event

from openclaw_ctx.messages import (
    AgentMessage,
    AssistantMessage,
    CustomMessage,
    TextContent,
    ThinkingContent,
    ToolCall,
    ToolResultMessage,
    UserMessage,
)

__all__ = ["EVENT_FIELD", "event_of", "message_of"]

EVENT_FIELD = "adkEvent"
"""The message field that keeps the ADK event as it was appended."""


def message_of(event: Event) -> AgentMessage:
    """The message that stores `event` (kept whole in its ``adkEvent`` field)."""
    at = int(event.timestamp * 1000)
    parts = list(event.content.parts or []) if event.content is not None else []
    texts = [p.text for p in parts if p.text and not p.thought]
    thoughts = [p.text for p in parts if p.text and p.thought]
    calls = [p.function_call for p in parts if p.function_call is not None]
    responses = [p.function_response for p in parts if p.function_response is not None]
    message: AgentMessage
    if responses:
        first = responses[0]
        content = [TextContent(text=json.dumps(r.response, ensure_ascii=False, default=str)) for r in responses]
        message = ToolResultMessage(
            tool_call_id=first.id or first.name or "call", tool_name=first.name or "", content=content, timestamp=at
        )
    elif event.author == "user" and (texts or not calls):
        message = UserMessage(content="\n".join(texts), timestamp=at)
    elif texts or thoughts or calls:
        blocks: list[Any] = [ThinkingContent(thinking=t) for t in thoughts]
        blocks += [TextContent(text=t) for t in texts]
        blocks += [
            ToolCall(id=c.id or c.name or "call", name=c.name or "function", arguments=c.args or {}) for c in calls
        ]
        message = AssistantMessage(content=blocks, provider="google-adk", model=event.model_version, timestamp=at)
    else:
        delta = sorted(event.actions.state_delta) if event.actions and event.actions.state_delta else []
        note = f"{event.author}: state {', '.join(delta)}" if delta else f"{event.author}: event"
        message = CustomMessage(custom_type="google-adk/event", content=note, display=False, timestamp=at)
    setattr(message, EVENT_FIELD, json.loads(event.model_dump_json(exclude_none=True)))
    return message


def event_of(message_json: str) -> Event | None:
    """The ADK event a stored message holds, or None for a message that did not come from ADK."""
    data = json.loads(message_json).get(EVENT_FIELD)
    return Event.model_validate(data) if isinstance(data, dict) else None
