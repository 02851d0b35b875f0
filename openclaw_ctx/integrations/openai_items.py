"""OpenAI Agents SDK input items as the store's messages, and back.

Each item becomes one message of the key, so full-text search, token counts, ``sql``, ``export``
and the engines see it: a user item a ``user`` message, an assistant message or a reasoning item an
``assistant`` one, a function call an assistant tool call, its output a ``toolResult``, anything else
(hosted tool calls, system/developer text, item references) a ``custom`` message with the item's
text. The item itself travels inside the message as ``openaiItem``, so :func:`item_of` gives back
exactly the dict that was added, whatever the mapping made of it.
"""

from __future__ import annotations

import json
import time
from collections.abc import Mapping
from typing import Any

from openclaw_ctx.messages import (
    AgentMessage,
    AssistantMessage,
    CustomMessage,
    TextContent,
    ThinkingContent,
    ToolCall,
    ToolResultMessage,
    UserMessage,
    flatten_text,
)

__all__ = ["ITEM_FIELD", "item_of", "message_of", "view_item"]

ITEM_FIELD = "openaiItem"
"""The message field that keeps the SDK item exactly as it was added."""
API = "openai-responses"
CUSTOM_PREFIX = "openai-agents/"


def message_of(item: Any, *, timestamp: int | None = None) -> AgentMessage:
    """The message that stores `item` (the item kept whole in its ``openaiItem`` field).

    Raises:
        TypeError: the item is not a dict (a Responses input item) or holds a value JSON cannot hold
            (as ``SQLiteSession`` raises it); nothing is stored.
    """
    if not isinstance(item, Mapping):
        raise TypeError(f"a session item must be a dict (a Responses input item), got {type(item).__name__}")
    try:
        json.dumps(item)
    except (TypeError, ValueError) as exc:
        raise TypeError(f"a session item must be JSON-serialisable: {exc}") from exc
    item = dict(item)
    at = timestamp if timestamp is not None else int(time.time() * 1000)
    kind = item.get("type")
    role = item.get("role")
    message: AgentMessage
    if kind == "function_call":
        call = ToolCall(id=_text(item.get("call_id")) or "call", name=_text(item.get("name")) or "function",
                        arguments=_arguments(item.get("arguments")))  # fmt: skip
        message = AssistantMessage(content=[call], api=API, timestamp=at)
    elif kind == "function_call_output":
        message = ToolResultMessage(
            tool_call_id=_text(item.get("call_id")) or "call",
            content=[TextContent(text=_content_text(item.get("output")))],
            timestamp=at,
        )
    elif kind == "reasoning":
        message = AssistantMessage(content=[ThinkingContent(thinking=_content_text(item.get("summary")))], api=API,
                                   timestamp=at)  # fmt: skip
    elif role == "user" and kind in (None, "message"):
        message = UserMessage(content=_content_text(item.get("content")), timestamp=at)
    elif role == "assistant" and kind in (None, "message"):
        message = AssistantMessage(content=[TextContent(text=_content_text(item.get("content")))], api=API,
                                   timestamp=at)  # fmt: skip
    else:
        name = str(kind or role or "item")
        message = CustomMessage(custom_type=CUSTOM_PREFIX + name, content=_content_text(item), display=False,
                                timestamp=at)  # fmt: skip
    setattr(message, ITEM_FIELD, item)
    return message


def item_of(message: AgentMessage) -> dict[str, Any] | None:
    """The SDK item a message stores, or None for a message that did not come from the SDK."""
    extra = message.model_extra or {}
    item = extra.get(ITEM_FIELD)
    return item if isinstance(item, dict) else None


def view_item(message: AgentMessage) -> dict[str, Any]:
    """An input item for a message of the engine's view: the stored item, or the message's text.

    Summaries and anything else the engine writes become user messages, as OpenClaw shows them to
    the model; an assistant message from another client keeps its role.
    """
    item = item_of(message)
    if item is not None:
        return item
    role = "assistant" if isinstance(message, AssistantMessage) else "user"
    return {"role": role, "content": flatten_text(message)}


def _text(value: Any) -> str:
    return value if isinstance(value, str) else ""


def _arguments(raw: Any) -> dict[str, Any]:
    if isinstance(raw, str):
        try:
            parsed = json.loads(raw) if raw.strip() else {}
        except ValueError:
            return {"arguments": raw}
        return parsed if isinstance(parsed, dict) else {"arguments": parsed}
    return raw if isinstance(raw, dict) else {}


def _content_text(value: Any) -> str:
    """The readable text of an item's content: strings joined, parts by their text fields."""
    if isinstance(value, str):
        return value
    if isinstance(value, list):
        return "\n".join(t for t in (_content_text(part) for part in value) if t)
    if isinstance(value, Mapping):
        for field in ("text", "refusal", "output", "content", "summary", "arguments", "query", "result"):
            if field in value:
                found = _content_text(value[field])
                if found:
                    return found
        return ""
    return "" if value is None else json.dumps(value)
