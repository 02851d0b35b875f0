"""The model/tool loop of one attempt: model ↔ tools until the model stops asking.

Tools are the host's own (``tool_specs`` with handlers, or the ``tools`` executor) plus the active
engine's (lossless-claw's recall tools). A tool that raises is the model's to see, as an error result;
it never crashes the turn. Every request the loop sends is measured (:class:`SentPrompts`): the
turn's `turns.prompt_tokens` is the largest of them, the one figure of "tokens the model was sent".
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from openclaw_ctx.contract.model import ModelRequest, ToolSpec
from openclaw_ctx.messages import AgentMessage, AssistantMessage, TextContent, ToolCall, ToolResultMessage
from openclaw_ctx.store.repo import message_token_count
from openclaw_ctx.tokens import TokenCounter

if TYPE_CHECKING:
    from openclaw_ctx.host.runtime import Runtime

__all__ = ["MAX_TOOL_STEPS", "SentPrompts", "ToolLoop"]

log = logging.getLogger("openclaw_ctx.host.runtime")

MAX_TOOL_STEPS = 64


class SentPrompts:
    """The prompts one turn sent the model, in tokens counted as the store counts `messages.token_count`.

    `answered` is the largest prompt a model call answered, `refused` the largest one the model
    refused (a provider's context overflow, an error); :attr:`figure` is what the `turns` row records.
    """

    def __init__(self, counter: TokenCounter) -> None:
        self._counter = counter
        # id(message) → (message, tokens): holding the message keeps its id from being reused.
        self._counts: dict[int, tuple[AgentMessage, int]] = {}
        self.answered: int | None = None
        self.refused: int | None = None

    def know(self, messages: list[AgentMessage], known: dict[int, int]) -> None:
        """Take the stored token counts of history messages (keyed by identity) instead of recounting them."""
        for m in messages:
            count = known.get(id(m))
            if count is not None:
                self._counts[id(m)] = (m, count)

    def measure(self, request: ModelRequest) -> int:
        """Tokens of a request: its system prompt and every message."""
        total = self._counter.count(request.system_prompt) if request.system_prompt else 0
        for m in request.messages:
            cached = self._counts.get(id(m))
            if cached is None or cached[0] is not m:
                cached = (m, message_token_count(m, self._counter))
                self._counts[id(m)] = cached
            total += cached[1]
        return total

    def answer(self, tokens: int) -> None:
        """A model call of `tokens` prompt tokens was answered."""
        self.answered = max(self.answered or 0, tokens)

    def refuse(self, tokens: int) -> None:
        """A model call of `tokens` prompt tokens raised."""
        self.refused = max(self.refused or 0, tokens)

    @property
    def figure(self) -> int | None:
        """The turn's prompt tokens: the largest answered prompt, else the largest refused (None: no call)."""
        return self.answered if self.answered is not None else self.refused


class ToolLoop:
    """Runs the runtime's model with the runtime's tools and the engine's."""

    def __init__(self, runtime: Runtime) -> None:
        self._runtime = runtime

    async def run(
        self,
        outgoing: list[AgentMessage],
        produced: list[AgentMessage],
        system_prompt: str,
        key: str,
        sent: SentPrompts | None = None,
    ) -> None:
        """Model ↔ tools until the model stops asking; appends to `produced` so an overflow keeps progress.

        `sent` measures every request the loop sends.
        """
        runtime = self._runtime
        messages = list(outgoing)
        if produced and isinstance(produced[-1], AssistantMessage):
            if not any(isinstance(b, ToolCall) for b in produced[-1].content):
                return
        for _ in range(MAX_TOOL_STEPS):
            specs = self.specs(key)
            request = ModelRequest(
                system_prompt=system_prompt,
                messages=list(messages),
                tools=specs,
                max_output_tokens=runtime.max_output_tokens,
                session_key=key,
            )
            tokens = sent.measure(request) if sent is not None else 0
            try:
                assert runtime.model is not None, "turn.run refuses a runtime without a model"
                reply = await runtime.model.complete(request)
            except Exception:
                if sent is not None:
                    sent.refuse(tokens)
                raise
            if sent is not None:
                sent.answer(tokens)
            produced.append(reply)
            messages.append(reply)
            calls = [b for b in reply.content if isinstance(b, ToolCall)]
            handlers = {spec.name: spec.handler for spec in specs if spec.handler is not None}
            if not calls or (runtime.tools is None and not any(c.name in handlers for c in calls)):
                return
            for call in calls:
                result = await self._execute(call, handlers)
                produced.append(result)
                messages.append(result)
        log.warning("turn on %s stopped after %d tool steps", key, MAX_TOOL_STEPS)

    def specs(self, key: str) -> list[ToolSpec]:
        """The host's tools plus the active engine's own."""
        runtime = self._runtime
        return [*runtime.tool_specs, *runtime.hooks.tools(key, spawn=runtime.subagents.run_delegated)]

    async def _execute(self, call: ToolCall, handlers: dict[str, Any]) -> ToolResultMessage:
        handler = handlers.get(call.name)
        executor = self._runtime.tools
        if handler is None:
            if executor is None:
                return _tool_error(call, f"no tool named {call.name!r} is available")
            return await executor(call)
        try:
            text = await handler(call.arguments)
        except Exception as exc:  # a tool failure is the model's to see, not a crashed turn
            return _tool_error(call, f"{type(exc).__name__}: {exc}")
        return ToolResultMessage(tool_call_id=call.id, tool_name=call.name, content=[TextContent(text=text)])


def _tool_error(call: ToolCall, text: str) -> ToolResultMessage:
    return ToolResultMessage(tool_call_id=call.id, tool_name=call.name, content=[TextContent(text=text)], is_error=True)
