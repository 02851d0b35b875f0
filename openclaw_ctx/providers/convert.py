"""AgentMessage ⇄ the wire formats of OpenAI Chat Completions and Anthropic Messages (`convert_anthropic`).

What each API can carry round-trips exactly: text, images (base64), tool calls and their results, and
(Anthropic only) signed and redacted thinking. What it cannot is dropped or flattened deliberately:

* Chat Completions has no thinking input: thinking is dropped on the way out; a reply's
  ``reasoning_content``/``reasoning`` (DeepSeek, vLLM, llama.cpp, Ollama) comes back as ThinkingContent.
* Chat Completions tool messages are text-only: a tool result's images follow the tool messages as a user
  message opening with ``Images from tool result <id>:`` (the reverse conversion re-attaches them).
* Anthropic rejects thinking without a signature: unsigned thinking is dropped on the way out.
* Harness roles (bashExecution, custom, branchSummary, compactionSummary) become user text, the way
  OpenClaw's ``convertToLlm`` renders them; ``excludeFromContext`` shell runs are left out.
"""

from __future__ import annotations

import json
import time
from collections.abc import Sequence
from typing import Any

from openclaw_ctx.contract.model import ToolSpec
from openclaw_ctx.messages import (
    AgentMessage,
    AssistantMessage,
    BashExecutionMessage,
    BranchSummaryMessage,
    CompactionSummaryMessage,
    CustomMessage,
    ImageContent,
    StopReason,
    TextContent,
    ThinkingContent,
    ToolCall,
    ToolResultMessage,
    Usage,
    UserMessage,
)

__all__ = [
    "StopReason",
    "Wire",
    "now_ms",
    "from_openai_messages",
    "harness_text",
    "openai_response",
    "openai_tools",
    "openai_usage",
    "to_openai_messages",
]

Wire = dict[str, Any]
_IMAGES_MARKER = "Images from tool result "
_OPENAI_STOP: dict[str, StopReason] = {
    "stop": "stop",
    "length": "length",
    "tool_calls": "toolUse",
    "function_call": "toolUse",
}


def harness_text(message: AgentMessage) -> str | None:
    """User text for a harness-only role (None: leave it out of the model's context)."""
    if isinstance(message, BashExecutionMessage):
        if message.exclude_from_context:
            return None
        status = "" if message.exit_code in (None, 0) else f"\n(exit code {message.exit_code})"
        return f"Ran `{message.command}`\n```\n{message.output}\n```{status}"
    if isinstance(message, CompactionSummaryMessage):
        return (
            "The conversation history before this point was compacted into the following summary:\n\n"
            f"<summary>\n{message.summary}\n</summary>"
        )
    if isinstance(message, BranchSummaryMessage):
        return (
            "The following is a summary of a branch that this conversation came back from:\n\n"
            f"<summary>\n{message.summary}\n</summary>"
        )
    if isinstance(message, CustomMessage):
        if isinstance(message.content, str):
            return message.content
        return "\n".join(b.text for b in message.content if isinstance(b, TextContent))
    raise TypeError(f"not a harness message: {type(message).__name__}")


def now_ms() -> int:
    return int(time.time() * 1000)


# --- OpenAI Chat Completions -------------------------------------------------------------------------


def _openai_part(block: TextContent | ImageContent) -> Wire:
    if isinstance(block, TextContent):
        return {"type": "text", "text": block.text}
    return {"type": "image_url", "image_url": {"url": f"data:{block.mime_type};base64,{block.data}"}}


def _openai_user(content: str | Sequence[TextContent | ImageContent]) -> Wire:
    if isinstance(content, str):
        return {"role": "user", "content": content}
    return {"role": "user", "content": [_openai_part(b) for b in content]}


def _openai_assistant(message: AssistantMessage) -> Wire:
    text = "\n".join(b.text for b in message.content if isinstance(b, TextContent))
    calls = [
        {
            "id": b.id,
            "type": "function",
            "function": {"name": b.name, "arguments": json.dumps(b.arguments, ensure_ascii=False)},
        }
        for b in message.content
        if isinstance(b, ToolCall)
    ]
    # null content is only valid beside tool calls; a thinking-only turn becomes an empty string
    wire: Wire = {"role": "assistant", "content": text or (None if calls else "")}
    if calls:
        wire["tool_calls"] = calls
    return wire


def to_openai_messages(system_prompt: str, messages: Sequence[AgentMessage]) -> list[Wire]:
    """Chat Completions ``messages`` for a system prompt and a conversation."""
    wire: list[Wire] = [{"role": "system", "content": system_prompt}] if system_prompt else []
    pending_images: list[Wire] = []
    for message in messages:
        if not isinstance(message, ToolResultMessage) and pending_images:
            wire.extend(pending_images)
            pending_images = []
        if isinstance(message, UserMessage):
            wire.append(_openai_user(message.content))
        elif isinstance(message, AssistantMessage):
            wire.append(_openai_assistant(message))
        elif isinstance(message, ToolResultMessage):
            text = "\n".join(b.text for b in message.content if isinstance(b, TextContent))
            wire.append({"role": "tool", "tool_call_id": message.tool_call_id, "content": text})
            images = [_openai_part(b) for b in message.content if isinstance(b, ImageContent)]
            if images:
                marker = {"type": "text", "text": f"{_IMAGES_MARKER}{message.tool_call_id}:"}
                pending_images.append({"role": "user", "content": [marker, *images]})
        else:
            rendered = harness_text(message)
            if rendered is not None:
                wire.append({"role": "user", "content": rendered})
    wire.extend(pending_images)
    return wire


def _image_from_url(url: str) -> ImageContent | TextContent:
    if url.startswith("data:") and ";base64," in url:
        mime, data = url[5:].split(";base64,", 1)
        return ImageContent(data=data, mime_type=mime)
    return TextContent(text=f"[image: {url}]")


def _openai_blocks(content: Any) -> list[TextContent | ImageContent]:
    blocks: list[TextContent | ImageContent] = []
    for part in content:
        if part.get("type") == "text":
            blocks.append(TextContent(text=part["text"]))
        elif part.get("type") == "image_url":
            blocks.append(_image_from_url(part["image_url"]["url"]))
    return blocks


def _openai_assistant_blocks(msg: Wire) -> list[TextContent | ThinkingContent | ToolCall]:
    blocks: list[TextContent | ThinkingContent | ToolCall] = []
    reasoning = msg.get("reasoning_content") or msg.get("reasoning")
    if isinstance(reasoning, str) and reasoning:
        blocks.append(ThinkingContent(thinking=reasoning))
    content = msg.get("content")
    if isinstance(content, list):
        content = "".join(p.get("text", "") for p in content if p.get("type") == "text")
    if content:
        blocks.append(TextContent(text=content))
    for call in msg.get("tool_calls") or []:
        fn = call["function"]
        raw = fn.get("arguments") or "{}"
        arguments = json.loads(raw) if isinstance(raw, str) else raw
        if not isinstance(arguments, dict):
            raise ValueError(f"tool call arguments are not an object: {raw!r}")
        blocks.append(ToolCall(id=call["id"], name=fn["name"], arguments=arguments))
    return blocks


def from_openai_messages(wire: Sequence[Wire]) -> tuple[str, list[AgentMessage]]:
    """The system prompt and AgentMessages of a Chat Completions ``messages`` list."""
    system: list[str] = []
    out: list[AgentMessage] = []
    names: dict[str, str] = {}
    results: dict[str, ToolResultMessage] = {}
    for item in wire:
        role, content = item["role"], item.get("content")
        if role in ("system", "developer"):
            system.append(content if isinstance(content, str) else "".join(p.get("text", "") for p in content or []))
        elif role == "user":
            blocks = _openai_blocks(content) if isinstance(content, list) else None
            first = blocks[0] if blocks else None
            if isinstance(first, TextContent) and first.text.startswith(_IMAGES_MARKER):
                target = results.get(first.text[len(_IMAGES_MARKER) : -1])
                if target is not None:
                    target.content.extend(blocks[1:] if blocks else [])
                    continue
            out.append(UserMessage(content=blocks if blocks is not None else content))
        elif role == "assistant":
            message = AssistantMessage(content=_openai_assistant_blocks(item))
            names.update({b.id: b.name for b in message.content if isinstance(b, ToolCall)})
            out.append(message)
        elif role == "tool":
            call_id = item["tool_call_id"]
            result = ToolResultMessage(
                tool_call_id=call_id, tool_name=names.get(call_id, ""), content=[TextContent(text=content or "")]
            )
            results[call_id] = result
            out.append(result)
    return "\n\n".join(system), out


def openai_tools(tools: Sequence[ToolSpec]) -> list[Wire]:
    """Chat Completions ``tools``."""
    return [
        {"type": "function", "function": {"name": t.name, "description": t.description, "parameters": t.parameters}}
        for t in tools
    ]


def openai_usage(usage: Any) -> Usage | None:
    """Our Usage from a Chat Completions ``usage`` object (cached prompt tokens count as cache reads)."""
    if not isinstance(usage, dict):
        return None
    prompt = int(usage.get("prompt_tokens") or 0)
    cached = int((usage.get("prompt_tokens_details") or {}).get("cached_tokens") or 0)
    output = int(usage.get("completion_tokens") or 0)
    total = int(usage.get("total_tokens") or prompt + output)
    return Usage(input=prompt - cached, output=output, cache_read=cached, total_tokens=total)


def openai_response(data: Wire, *, provider: str, api: str, model: str) -> AssistantMessage:
    """An AssistantMessage from a Chat Completions response body."""
    choice = data["choices"][0]
    reason = choice.get("finish_reason")
    return AssistantMessage(
        content=_openai_assistant_blocks(choice["message"]),
        api=api,
        provider=provider,
        model=data.get("model") or model,
        usage=openai_usage(data.get("usage")),
        stop_reason=_OPENAI_STOP.get(reason, "error" if reason == "content_filter" else "stop"),
        timestamp=now_ms(),
        response_id=data.get("id") if isinstance(data.get("id"), str) else None,
    )
