"""A deterministic scripted model and tool executor, for tests, demos and transcript replay.

The model answers each call with the next scripted assistant message; the tool executor answers
each tool call with the scripted result for its id. Like a real provider, the model refuses a
prompt larger than its context window with ContextOverflowError, so overflow recovery is exercised,
and a reply's `usage` reports the prompt this model was actually sent, not the one the scripted
message was recorded with (engines read usage as the observed prompt size).
"""

from __future__ import annotations

import math
from collections.abc import Iterable

from openclaw_ctx.contract.model import ModelRequest
from openclaw_ctx.errors import ContextOverflowError
from openclaw_ctx.messages import AssistantMessage, TextContent, ToolCall, ToolResultMessage, Usage, flatten_text

__all__ = ["ScriptedModel", "ScriptedTools"]


class ScriptedModel:
    """Replies from a script; `calls` records every request it received."""

    __test__ = False

    def __init__(
        self,
        replies: Iterable[AssistantMessage] = (),
        *,
        context_window: int = 200_000,
        name: str = "scripted",
    ) -> None:
        self._replies = list(replies)
        self.name = name
        self.provider = "scripted"
        self.context_window = context_window
        self.calls: list[ModelRequest] = []

    def extend(self, replies: Iterable[AssistantMessage]) -> None:
        """Queue more replies."""
        self._replies.extend(replies)

    @property
    def pending(self) -> int:
        """Replies not yet given."""
        return len(self._replies)

    def drain(self) -> list[AssistantMessage]:
        """Take the replies the model was never asked for."""
        left, self._replies = self._replies, []
        return left

    async def complete(self, request: ModelRequest) -> AssistantMessage:
        """The next scripted reply (a plain 'ok' when the script is exhausted)."""
        prompt_chars = len(request.system_prompt) + sum(len(flatten_text(m)) for m in request.messages)
        prompt_tokens = math.ceil(prompt_chars / 4)
        if prompt_tokens > self.context_window:
            raise ContextOverflowError(
                f"context length exceeded: prompt is ~{prompt_tokens} tokens, window {self.context_window}"
            )
        self.calls.append(request)
        if self._replies:
            reply = self._replies.pop(0)
            if reply.usage is None:
                return reply
            # In place, not a copy: the reply is handed over, and callers (replay) know it by identity.
            output = reply.usage.output
            reply.usage = Usage(input=prompt_tokens, output=output, total_tokens=prompt_tokens + output)
            return reply
        return AssistantMessage(content=[TextContent(text="ok")], stop_reason="stop", model=self.name)


class ScriptedTools:
    """Answers tool calls from a map of tool-call id → result."""

    __test__ = False

    def __init__(self, results: dict[str, ToolResultMessage] | None = None) -> None:
        self.results = dict(results or {})

    def drain(self) -> list[ToolResultMessage]:
        """Take the results no tool call asked for."""
        left = list(self.results.values())
        self.results.clear()
        return left

    async def __call__(self, call: ToolCall) -> ToolResultMessage:
        """The scripted result, or an error result naming the unknown call."""
        if call.id in self.results:
            return self.results.pop(call.id)
        return ToolResultMessage(
            tool_call_id=call.id,
            tool_name=call.name,
            content=[TextContent(text=f"no scripted result for tool call {call.id}")],
            is_error=True,
        )
