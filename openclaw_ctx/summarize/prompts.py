"""Prompts of the built-in (legacy) compaction, after OpenClaw / pi-coding-agent's structure.

A model-backed summarizer sends `SYSTEM_PROMPT` and the prompt :func:`history_prompt` renders; the
embedded extractive summarizer ignores the wording and fills the same sections itself.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from openclaw_ctx.messages import (
    AgentMessage,
    AssistantMessage,
    BashExecutionMessage,
    BranchSummaryMessage,
    CompactionSummaryMessage,
    CustomMessage,
    ImageContent,
    TextContent,
    ToolCall,
    ToolResultMessage,
    UserMessage,
)

__all__ = [
    "IMAGE_PLACEHOLDER",
    "TOOL_RESULT_MAX_CHARS",
    "serialize_for_summary",
    "serialize_message",
    "IDENTIFIER_PRESERVATION",
    "SPLIT_TURN_HEADER",
    "SUMMARY_FORMAT",
    "SYSTEM_PROMPT",
    "TURN_PREFIX_FORMAT",
    "UPDATE_RULES",
    "focus_instructions",
    "history_prompt",
    "turn_prefix_prompt",
]

SYSTEM_PROMPT = (
    "You are a summarization assistant for a coding agent's conversation history. You read a "
    "conversation and write a structured summary another instance of the agent will continue from. "
    "Do NOT continue the conversation and do NOT answer any question in it. ONLY output the structured summary."
)

IDENTIFIER_PRESERVATION = (
    "Preserve all opaque identifiers exactly as written (no shortening or reconstruction), including "
    "UUIDs, hashes, IDs, hostnames, IPs, ports, URLs, and file names."
)

SUMMARY_FORMAT = """Write the summary in exactly this format:

## Goal
[What the user is trying to accomplish; several goals as a list.]

## Constraints & Preferences
- [Requirements, preferences and rules the user stated, or "(none)"]

## Progress
### Done
- [x] [Completed work]

### In Progress
- [ ] [Work under way]

### Blocked
- [Open problems, failing commands, errors]

## Key Decisions
- **[Decision]**: [why]

## Next Steps
1. [What should happen next, in order]

## Critical Context
- [Data, references and facts needed to continue]

Keep each section short. Preserve exact file paths, function names, and error messages."""

UPDATE_RULES = """The messages above are NEW history to merge into the summary in <previous-summary>.
- PRESERVE everything in the previous summary that is still true.
- ADD new progress, decisions, constraints and context from the new messages.
- UPDATE items whose status changed (move "In Progress" to "Done" when finished; drop resolved blockers).
Use the same format as before."""

TURN_PREFIX_FORMAT = """The messages above are the FIRST part of a turn that is too large to keep whole;
its later part is kept verbatim. Summarize the early part so the kept part makes sense:

## Original Request
[What the user asked for in this turn]

## Early Progress
- [Key steps and findings so far]

## Context for Suffix
- [What is needed to understand the kept part]"""

TOOL_RESULT_MAX_CHARS = 2000
ERROR_TAIL_CHARS = 500
IMAGE_PLACEHOLDER = "[image data omitted from summary input]"
SPLIT_TURN_HEADER = "\n\n---\n\n**Turn Context (split turn):**\n\n"


def focus_instructions(
    custom_instructions: str | None, *, identifier_policy: str = "strict", identifier_instructions: str | None = None
) -> str:
    """The identifier-preservation instruction plus the caller's focus, as OpenClaw composes them.

    Policy ``strict`` uses the built-in instruction, ``custom`` the configured `identifier_instructions`,
    ``off`` none.
    """
    parts: list[str] = []
    if identifier_policy == "custom" and identifier_instructions and identifier_instructions.strip():
        parts.append(identifier_instructions.strip())
    elif identifier_policy != "off":
        parts.append(IDENTIFIER_PRESERVATION)
    if custom_instructions and custom_instructions.strip():
        parts.append(f"Additional focus:\n{custom_instructions.strip()}")
    return "\n\n".join(parts)


def history_prompt(
    serialized: str,
    previous_summary: str | None,
    custom_instructions: str | None,
    *,
    identifier_policy: str = "strict",
    identifier_instructions: str | None = None,
) -> str:
    """The user prompt for one history (or chunk) summarization call."""
    text = f"<conversation>\n{serialized}\n</conversation>\n\n"
    if previous_summary:
        text += f"<previous-summary>\n{previous_summary}\n</previous-summary>\n\n"
        text += UPDATE_RULES + "\n\n" + SUMMARY_FORMAT
    else:
        text += SUMMARY_FORMAT
    focus = focus_instructions(
        custom_instructions, identifier_policy=identifier_policy, identifier_instructions=identifier_instructions
    )
    return text + (f"\n\n{focus}" if focus else "")


def turn_prefix_prompt(
    serialized: str, *, identifier_policy: str = "strict", identifier_instructions: str | None = None
) -> str:
    """The user prompt for the turn-prefix summary of a split turn."""
    focus = focus_instructions(
        None, identifier_policy=identifier_policy, identifier_instructions=identifier_instructions
    )
    return f"<conversation>\n{serialized}\n</conversation>\n\n{TURN_PREFIX_FORMAT}" + (f"\n\n{focus}" if focus else "")


# --- serialization --------------------------------------------------------------------------------


def _blocks_text(content: str | Sequence[Any]) -> str:
    if isinstance(content, str):
        return content
    parts = []
    for block in content:
        if isinstance(block, TextContent):
            parts.append(block.text)
        elif isinstance(block, ImageContent):
            parts.append(IMAGE_PLACEHOLDER)
    return "\n".join(parts)


def _truncate_result(text: str, is_error: bool) -> str:
    if len(text) <= TOOL_RESULT_MAX_CHARS:
        return text
    head = text[:TOOL_RESULT_MAX_CHARS]
    removed = text[TOOL_RESULT_MAX_CHARS:]
    note = f"\n[... {len(removed)} more characters truncated]"
    # Keep the end of a failing output: that is where the error message is.
    if is_error or "error" in removed[-ERROR_TAIL_CHARS:].lower():
        tail = removed[-ERROR_TAIL_CHARS:]
        note = f"\n[... {len(removed) - len(tail)} more characters truncated]\n{tail}"
    return head + note


def serialize_message(message: AgentMessage) -> str:
    """One message as summarizer input (thinking omitted, images replaced, long tool results cut)."""
    if isinstance(message, UserMessage):
        return f"[User]: {_blocks_text(message.content)}"
    if isinstance(message, AssistantMessage):
        lines = []
        text = "\n".join(b.text for b in message.content if isinstance(b, TextContent) and b.text)
        if text:
            lines.append(f"[Assistant]: {text}")
        calls = [b for b in message.content if isinstance(b, ToolCall)]
        if calls:
            rendered = "; ".join(
                f"{c.name}({', '.join(f'{k}={json.dumps(v, ensure_ascii=False)}' for k, v in c.arguments.items())})"
                for c in calls
            )
            lines.append(f"[Assistant tool calls]: {rendered}")
        if message.error_message:
            lines.append(f"[Assistant error]: {message.error_message}")
        return "\n".join(lines)
    if isinstance(message, ToolResultMessage):
        label = "Tool error" if message.is_error else "Tool result"
        return f"[{label}]: {_truncate_result(_blocks_text(message.content), message.is_error)}"
    if isinstance(message, BashExecutionMessage):
        if message.exclude_from_context:
            return ""
        code = f" (exit code {message.exit_code})" if message.exit_code else ""
        return f"[Bash]: $ {message.command}{code}\n{_truncate_result(message.output, bool(message.exit_code))}"
    if isinstance(message, CustomMessage):
        return f"[Custom {message.custom_type}]: {_blocks_text(message.content)}"
    if isinstance(message, BranchSummaryMessage | CompactionSummaryMessage):
        return f"[Summary]: {message.summary}"
    raise TypeError(f"not an AgentMessage: {type(message).__name__}")


def serialize_for_summary(messages: Sequence[AgentMessage]) -> str:
    """The conversation as the summarizer reads it (OpenClaw's `serializeConversation`)."""
    return "\n\n".join(s for s in (serialize_message(m) for m in messages) if s)
