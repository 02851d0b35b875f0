"""AgentMessage ⇄ Anthropic Messages: what the API carries round-trips, signed thinking included.

The shared rules (what is dropped or flattened, harness roles as user text) are in :mod:`.convert`.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

from openclaw_ctx.contract.model import ToolSpec
from openclaw_ctx.messages import (
    AgentMessage,
    AssistantMessage,
    ImageContent,
    TextContent,
    ThinkingContent,
    ToolCall,
    ToolResultMessage,
    Usage,
    UserMessage,
)
from openclaw_ctx.providers.convert import StopReason, Wire, harness_text, now_ms

__all__ = [
    "anthropic_response",
    "anthropic_tools",
    "anthropic_usage",
    "from_anthropic_messages",
    "to_anthropic_messages",
]

_ANTHROPIC_STOP: dict[str, StopReason] = {
    "end_turn": "stop",
    "stop_sequence": "stop",
    "pause_turn": "stop",
    "max_tokens": "length",
    "tool_use": "toolUse",
    "refusal": "error",
}


# --- Anthropic Messages ------------------------------------------------------------------------------


def _anthropic_part(block: TextContent | ImageContent) -> Wire:
    if isinstance(block, TextContent):
        return {"type": "text", "text": block.text}
    return {"type": "image", "source": {"type": "base64", "media_type": block.mime_type, "data": block.data}}


def _anthropic_assistant(message: AssistantMessage) -> list[Wire]:
    blocks: list[Wire] = []
    for b in message.content:
        if isinstance(b, ThinkingContent):
            if getattr(b, "redacted", False) and b.thinking_signature:
                blocks.append({"type": "redacted_thinking", "data": b.thinking_signature})
            elif b.thinking_signature:
                blocks.append({"type": "thinking", "thinking": b.thinking, "signature": b.thinking_signature})
        elif isinstance(b, TextContent):
            if b.text:
                blocks.append({"type": "text", "text": b.text})
        else:
            blocks.append({"type": "tool_use", "id": b.id, "name": b.name, "input": b.arguments})
    return blocks


def _tool_result_block(message: ToolResultMessage) -> Wire:
    block: Wire = {
        "type": "tool_result",
        "tool_use_id": message.tool_call_id,
        "content": [_anthropic_part(b) for b in message.content],
    }
    if message.is_error:
        block["is_error"] = True
    return block


def to_anthropic_messages(messages: Sequence[AgentMessage]) -> list[Wire]:
    """Messages API ``messages`` (the system prompt travels separately, as ``system``).

    Consecutive tool results share one user message, as the API requires after a multi-tool turn.
    """
    wire: list[Wire] = []
    for message in messages:
        if isinstance(message, ToolResultMessage):
            last = wire[-1] if wire else None
            if last and last["role"] == "user" and isinstance(last["content"], list) and last.get("_tools"):
                last["content"].append(_tool_result_block(message))
            else:
                wire.append({"role": "user", "content": [_tool_result_block(message)], "_tools": True})
            continue
        if isinstance(message, UserMessage):
            content = message.content
            wire.append(
                {
                    "role": "user",
                    "content": content if isinstance(content, str) else [_anthropic_part(b) for b in content],
                }
            )
        elif isinstance(message, AssistantMessage):
            blocks = _anthropic_assistant(message)
            if blocks:  # the API rejects an empty assistant turn
                wire.append({"role": "assistant", "content": blocks})
        else:
            text = harness_text(message)
            if text is not None:
                wire.append({"role": "user", "content": text})
    for item in wire:
        item.pop("_tools", None)
    return wire


def _anthropic_blocks(content: Any) -> list[TextContent | ImageContent]:
    if isinstance(content, str):
        return [TextContent(text=content)]
    blocks: list[TextContent | ImageContent] = []
    for part in content:
        if part.get("type") == "text":
            blocks.append(TextContent(text=part["text"]))
        elif part.get("type") == "image" and part["source"].get("type") == "base64":
            blocks.append(ImageContent(data=part["source"]["data"], mime_type=part["source"]["media_type"]))
    return blocks


def _anthropic_assistant_blocks(content: Any) -> Iterator[TextContent | ThinkingContent | ToolCall]:
    if isinstance(content, str):
        yield TextContent(text=content)
        return
    for part in content:
        kind = part.get("type")
        if kind == "text":
            yield TextContent(text=part["text"])
        elif kind == "thinking":
            yield ThinkingContent(thinking=part["thinking"], thinking_signature=part.get("signature"))
        elif kind == "redacted_thinking":
            yield ThinkingContent.model_validate({"thinking": "", "thinkingSignature": part["data"], "redacted": True})
        elif kind == "tool_use":
            yield ToolCall(id=part["id"], name=part["name"], arguments=part.get("input") or {})


def from_anthropic_messages(wire: Sequence[Wire]) -> list[AgentMessage]:
    """AgentMessages from a Messages API ``messages`` list (tool_result blocks become ToolResultMessages)."""
    out: list[AgentMessage] = []
    names: dict[str, str] = {}
    for item in wire:
        content = item["content"]
        if item["role"] == "assistant":
            message = AssistantMessage(content=list(_anthropic_assistant_blocks(content)))
            names.update({b.id: b.name for b in message.content if isinstance(b, ToolCall)})
            out.append(message)
            continue
        if isinstance(content, str):
            out.append(UserMessage(content=content))
            continue
        rest = [p for p in content if p.get("type") != "tool_result"]
        for part in content:
            if part.get("type") == "tool_result":
                call_id = part["tool_use_id"]
                out.append(
                    ToolResultMessage(
                        tool_call_id=call_id,
                        tool_name=names.get(call_id, ""),
                        content=_anthropic_blocks(part.get("content") or []),
                        # only when set, so a round trip leaves the message exactly as it was
                        **({"is_error": True} if part.get("is_error") else {}),
                    )
                )
        if rest:
            out.append(UserMessage(content=_anthropic_blocks(rest)))
    return out


def anthropic_tools(tools: Sequence[ToolSpec]) -> list[Wire]:
    """Messages API ``tools``."""
    return [{"name": t.name, "description": t.description, "input_schema": t.parameters} for t in tools]


def anthropic_usage(usage: Any) -> Usage | None:
    """Our Usage from a Messages API ``usage`` object."""
    if not isinstance(usage, dict):
        return None
    parts = {
        "input": int(usage.get("input_tokens") or 0),
        "output": int(usage.get("output_tokens") or 0),
        "cache_read": int(usage.get("cache_read_input_tokens") or 0),
        "cache_write": int(usage.get("cache_creation_input_tokens") or 0),
    }
    return Usage(**parts, total_tokens=sum(parts.values()))


def anthropic_response(data: Wire, *, provider: str, api: str, model: str) -> AssistantMessage:
    """An AssistantMessage from a Messages API response body."""
    if data.get("type") not in (None, "message") or "content" not in data:
        raise ValueError(f"not a message response (type={data.get('type')!r})")
    return AssistantMessage(
        content=list(_anthropic_assistant_blocks(data["content"])),
        api=api,
        provider=provider,
        model=data.get("model") or model,
        usage=anthropic_usage(data.get("usage")),
        stop_reason=_ANTHROPIC_STOP.get(data.get("stop_reason") or "end_turn", "stop"),
        timestamp=now_ms(),
        response_id=data.get("id") if isinstance(data.get("id"), str) else None,
    )
