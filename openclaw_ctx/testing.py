"""Helpers for testing code that uses openclaw-ctx (the project's own tests use them too).

* :class:`ScriptedModel` and :class:`ScriptedTools`: a deterministic model and tool executor (the
  same ones ``replay`` runs on), so a Runtime turn needs no network.
* Message factories: :func:`user`, :func:`assistant`, :func:`reply`, :func:`tool_call`,
  :func:`tool_use`, :func:`tool_result`.
* :class:`FakeSummarizer`: answers every summary request with a fixed reply (or raises), and
  records the requests it got.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from openclaw_ctx.host.scripted import ScriptedModel, ScriptedTools
from openclaw_ctx.messages import (
    AssistantMessage,
    StopReason,
    TextContent,
    ToolCall,
    ToolResultMessage,
    Usage,
    UserMessage,
)
from openclaw_ctx.summarize import SummaryOutput, SummaryRequest

__all__ = [
    "FakeSummarizer",
    "ScriptedModel",
    "ScriptedTools",
    "assistant",
    "reply",
    "tool_call",
    "tool_result",
    "tool_use",
    "user",
]


def user(text: str = "hi", *, timestamp: int | None = None) -> UserMessage:
    """A user message with plain-string content."""
    return UserMessage(content=text, timestamp=timestamp)


def assistant(
    text: str | None = "ok",
    *,
    calls: Sequence[ToolCall] = (),
    stop_reason: StopReason | None = None,
    model: str | None = None,
    usage: Usage | None = None,
    timestamp: int | None = None,
) -> AssistantMessage:
    """An assistant message: one text block (unless `text` is None), then the tool calls."""
    blocks: list[TextContent | ToolCall] = [TextContent(text=text)] if text is not None else []
    blocks.extend(calls)
    return AssistantMessage(content=blocks, stop_reason=stop_reason, model=model, usage=usage, timestamp=timestamp)


def reply(text: str) -> AssistantMessage:
    """A final answer as a scripted model gives it (``stop_reason="stop"``)."""
    return assistant(text, stop_reason="stop", model="scripted")


def tool_call(call_id: str, name: str = "bash", arguments: dict[str, Any] | None = None) -> ToolCall:
    """One tool-call block."""
    return ToolCall(id=call_id, name=name, arguments=dict(arguments or {}))


def tool_use(*calls: ToolCall) -> AssistantMessage:
    """An assistant message that only calls tools (``stop_reason="toolUse"``)."""
    return assistant(None, calls=calls, stop_reason="toolUse")


def tool_result(
    call_id: str, text: str = "out", *, name: str = "bash", is_error: bool = False, timestamp: int | None = None
) -> ToolResultMessage:
    """The text result of tool call `call_id`."""
    return ToolResultMessage(
        tool_call_id=call_id, tool_name=name, content=[TextContent(text=text)], is_error=is_error, timestamp=timestamp
    )


class FakeSummarizer:
    """A Summarizer that answers with `reply` (a string, or computed from the request) or raises `error`."""

    __test__ = False

    def __init__(
        self,
        reply: str | Callable[[SummaryRequest], str] = "summary",
        *,
        error: Exception | None = None,
        name: str = "fake",
        model: str | None = None,
    ) -> None:
        self.name = name
        self.model = model
        self.reply = reply
        self.error = error
        self.requests: list[SummaryRequest] = []

    async def summarize(self, request: SummaryRequest) -> SummaryOutput:
        """Record `request`, then raise the error or answer with the reply."""
        self.requests.append(request)
        if self.error is not None:
            raise self.error
        text = self.reply(request) if callable(self.reply) else self.reply
        return SummaryOutput(text=text, summarizer=self.name, model=self.model)
