"""A deterministic scripted model and tool executor, for tests, demos and transcript replay.

The model answers each call with the next scripted assistant message; the tool executor answers
each tool call with the scripted result for its id. Like a real provider, the model refuses a
prompt larger than its context window with ContextOverflowError, so overflow recovery is exercised:
measured with `counter` (as the store counts `messages.token_count`, so that a prompt the host
records as sent never exceeds the window it was accepted by) or, without one, as chars/4.
A reply is handed over as scripted, `usage` included: a replayed transcript's messages are stored as
the transcript recorded them, and what this model was sent is the host's to measure (`turns`).
"""

from __future__ import annotations

import math
from collections.abc import Iterable

from openclaw_ctx.contract.model import ModelRequest
from openclaw_ctx.errors import ContextOverflowError
from openclaw_ctx.messages import AssistantMessage, TextContent, ToolCall, ToolResultMessage, flatten_text
from openclaw_ctx.store.repo import message_token_count
from openclaw_ctx.tokens import TokenCounter

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
        counter: TokenCounter | None = None,
    ) -> None:
        self._replies = list(replies)
        self._counter = counter
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
        prompt_tokens = self._prompt_tokens(request)
        if prompt_tokens > self.context_window:
            raise ContextOverflowError(
                f"context length exceeded: prompt is ~{prompt_tokens} tokens, window {self.context_window}"
            )
        self.calls.append(request)
        if self._replies:
            # The scripted object itself, untouched: callers (replay) know it by identity.
            return self._replies.pop(0)
        return AssistantMessage(content=[TextContent(text="ok")], stop_reason="stop", model=self.name)

    def _prompt_tokens(self, request: ModelRequest) -> int:
        counter = self._counter
        if counter is None:
            prompt_chars = len(request.system_prompt) + sum(len(flatten_text(m)) for m in request.messages)
            return math.ceil(prompt_chars / 4)
        system = counter.count(request.system_prompt) if request.system_prompt else 0
        return system + sum(message_token_count(m, counter) for m in request.messages)


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
