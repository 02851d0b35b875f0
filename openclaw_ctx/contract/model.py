"""The Model protocol the runtime calls for each step of a turn, and tool execution.

A turn is a loop: the model replies with an assistant message; if it asks for tools, the runtime's
ToolExecutor runs them and the results go back to the model, until it stops asking.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from openclaw_ctx.messages import AgentMessage, AssistantMessage, ToolCall, ToolResultMessage

__all__ = ["Model", "ModelRequest", "ToolExecutor", "ToolSpec"]


@dataclass(frozen=True)
class ToolSpec:
    """An agent tool: name, description, JSON schema of its arguments, and its async handler."""

    name: str
    description: str
    parameters: dict[str, Any]
    handler: Callable[[dict[str, Any]], Awaitable[str]] | None = None


@dataclass(frozen=True)
class ModelRequest:
    """One model call."""

    system_prompt: str
    messages: list[AgentMessage]
    tools: list[ToolSpec] = field(default_factory=list)
    max_output_tokens: int | None = None
    session_key: str | None = None


@runtime_checkable
class Model(Protocol):
    """A chat model. Raises ContextOverflowError when the prompt is too large for it."""

    name: str
    provider: str
    context_window: int

    async def complete(self, request: ModelRequest) -> AssistantMessage:
        """The model's next assistant message."""
        ...


class ToolExecutor(Protocol):
    """Runs one tool call and returns its result message."""

    async def __call__(self, call: ToolCall) -> ToolResultMessage:
        """Execute `call`."""
        ...
