"""Which tool results answer a tool call, the way OpenClaw's ``classifyToolUseResultPairing`` decides it.

A frame runs from an assistant message that calls tools to the next such message. Inside a frame a
result claims the first unanswered call with its id (a result without one claims the frame's only
call); a result that claims nothing may still answer one unanswered call with its id in an earlier
frame, when exactly one is left. OpenClaw's synthetic "missing tool result" placeholders give way to
a real result for the same call. A ``reset`` keeps only the results paired this way.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass

from openclaw_ctx.messages import AgentMessage, AssistantMessage, ToolCall, ToolResultMessage

__all__ = ["paired_results"]

MISSING_RESULT_TEXT = (
    "[openclaw] missing tool result in session history; inserted synthetic error result for transcript repair."
)
_RESULT_ID_KEYS = ("toolUseId", "tool_call_id", "tool_use_id", "callId", "call_id")


@dataclass
class _Call:
    id: str
    name: str
    source: int | None = None  # index of the result that answers it
    synthetic: bool = False


def _result_id(message: ToolResultMessage) -> str | None:
    extra = message.model_extra or {}
    for value in (message.tool_call_id, *(extra.get(k) for k in _RESULT_ID_KEYS)):
        if isinstance(value, str) and value.strip():
            return value.strip()
    return None


def _synthetic(message: ToolResultMessage, is_error: bool) -> bool:
    if not is_error:
        return False
    if isinstance(message.details, dict) and message.details.get("openclawSyntheticMissingToolResult") is True:
        return True
    return any(
        getattr(block, "type", None) == "text" and getattr(block, "text", None) == MISSING_RESULT_TEXT
        for block in message.content
    )


def _identify(message: ToolResultMessage, calls: list[_Call]) -> tuple[str | None, bool]:
    """The call id a result names (a legacy result without one takes the frame's only call); is it a placeholder?"""
    result_id = _result_id(message)
    if result_id is None and len(calls) == 1:
        name, call_name = message.tool_name.strip(), calls[0].name.strip()
        if not (name and call_name and name != call_name):
            return calls[0].id, _synthetic(message, True)  # upstream marks the adopted result as an error
    return result_id, _synthetic(message, message.is_error)


def paired_results(messages: Sequence[AgentMessage]) -> set[int]:
    """Indexes of the tool results in `messages` that answer a call."""
    starts = [
        i
        for i, m in enumerate(messages)
        if isinstance(m, AssistantMessage) and any(isinstance(b, ToolCall) for b in m.content)
    ]
    frames: list[tuple[list[_Call], list[tuple[int, str | None, bool]]]] = []
    for n, start in enumerate(starts):
        assistant = messages[start]
        assert isinstance(assistant, AssistantMessage)
        calls = [_Call(b.id, b.name) for b in assistant.content if isinstance(b, ToolCall)]
        pending: dict[str, deque[_Call]] = {}
        for call in calls:
            pending.setdefault(call.id, deque()).append(call)
        placeholders: dict[str, deque[_Call]] = {}
        unclaimed: list[tuple[int, str | None, bool]] = []
        for index in range(start + 1, starts[n + 1] if n + 1 < len(starts) else len(messages)):
            message = messages[index]
            if not isinstance(message, ToolResultMessage):
                continue
            result_id, synthetic = _identify(message, calls)
            waiting = pending.get(result_id) if result_id is not None else None
            if waiting:
                call = waiting.popleft()
                call.source, call.synthetic = index, synthetic
                if synthetic:
                    placeholders.setdefault(call.id, deque()).append(call)
            elif result_id is None or all(c.id != result_id for c in calls):
                unclaimed.append((index, result_id, synthetic))
            elif not synthetic and placeholders.get(result_id):
                call = placeholders[result_id].popleft()  # a real result replaces the placeholder
                call.source, call.synthetic = index, False
        frames.append((calls, unclaimed))
    unresolved: dict[str, list[_Call]] = {}
    for calls, unclaimed in frames:
        for call in calls:
            if call.source is None or call.synthetic:
                unresolved.setdefault(call.id, []).append(call)
        for index, result_id, synthetic in unclaimed:
            candidates = [
                c
                for c in (unresolved.get(result_id, []) if result_id is not None else [])
                if c.source is None or (c.synthetic and not synthetic)
            ]
            if len(candidates) == 1:
                candidates[0].source, candidates[0].synthetic = index, synthetic
    return {call.source for calls, _ in frames for call in calls if call.source is not None}
