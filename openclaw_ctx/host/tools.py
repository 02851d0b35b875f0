"""The model/tool loop of one attempt: model ↔ tools until the model stops asking.

Tools are the host's own (``tool_specs`` with handlers, or the ``tools`` executor) plus the active
engine's (lossless-claw's recall tools). A tool that raises is the model's to see, as an error result;
it never crashes the turn.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from openclaw_ctx.contract.model import ModelRequest, ToolSpec
from openclaw_ctx.messages import AgentMessage, AssistantMessage, TextContent, ToolCall, ToolResultMessage

if TYPE_CHECKING:
    from openclaw_ctx.host.runtime import Runtime

__all__ = ["MAX_TOOL_STEPS", "ToolLoop"]

log = logging.getLogger("openclaw_ctx.host.runtime")

MAX_TOOL_STEPS = 64


class ToolLoop:
    """Runs the runtime's model with the runtime's tools and the engine's."""

    def __init__(self, runtime: Runtime) -> None:
        self._runtime = runtime

    async def run(
        self, outgoing: list[AgentMessage], produced: list[AgentMessage], system_prompt: str, key: str
    ) -> None:
        """Model ↔ tools until the model stops asking; appends to `produced` so an overflow keeps progress."""
        runtime = self._runtime
        messages = list(outgoing)
        if produced and isinstance(produced[-1], AssistantMessage):
            if not any(isinstance(b, ToolCall) for b in produced[-1].content):
                return
        for _ in range(MAX_TOOL_STEPS):
            specs = self.specs(key)
            reply = await runtime.model.complete(
                ModelRequest(
                    system_prompt=system_prompt,
                    messages=list(messages),
                    tools=specs,
                    max_output_tokens=runtime.max_output_tokens,
                    session_key=key,
                )
            )
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
