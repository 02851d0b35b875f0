"""The summary text of the built-in compaction: file-operation lists, chunking for the summarizer, composition.

Pure, like :mod:`openclaw_ctx.compaction.plan` (which re-exports these names): no I/O, no awaits.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from openclaw_ctx.messages import (
    AgentMessage,
    AssistantMessage,
    ToolCall,
    ToolResultMessage,
)
from openclaw_ctx.summarize.prompts import SPLIT_TURN_HEADER

__all__ = [
    "BASE_CHUNK_RATIO",
    "FILE_LIST_MAX_CHARS",
    "FileOps",
    "MIN_CHUNK_RATIO",
    "SAFETY_MARGIN",
    "SUMMARIZATION_OVERHEAD_TOKENS",
    "SUMMARY_MAX_CHARS",
    "adaptive_chunk_ratio",
    "chunk_messages",
    "compose_summary",
    "extract_file_ops",
    "is_oversized",
    "max_chunk_tokens",
    "oversized_note",
]

SAFETY_MARGIN = 1.2
BASE_CHUNK_RATIO = 0.4
MIN_CHUNK_RATIO = 0.15
SUMMARIZATION_OVERHEAD_TOKENS = 4096
SUMMARY_MAX_CHARS = 16_000
FILE_LIST_MAX_CHARS = 900


# --- file operations --------------------------------------------------------------------------------

_READ_TOOLS = {"read", "read_file", "view", "cat"}
_WRITE_TOOLS = {"write", "edit", "write_file", "edit_file", "multiedit", "multi_edit", "apply_patch", "create"}
_PATH_KEYS = ("path", "file_path", "filePath", "file", "filename")


@dataclass
class FileOps:
    """Files the summarised history read and modified (carried forward across compactions)."""

    read: set[str] = field(default_factory=set)
    modified: set[str] = field(default_factory=set)

    def lists(self) -> tuple[list[str], list[str]]:
        """`(readFiles, modifiedFiles)`: read-only files and modified files, sorted."""
        return sorted(self.read - self.modified), sorted(self.modified)

    def details(self) -> dict[str, list[str]]:
        """The `details` object of a compaction result."""
        read, modified = self.lists()
        return {"readFiles": read, "modifiedFiles": modified}


def extract_file_ops(messages: Sequence[AgentMessage], previous: Any = None) -> FileOps:
    """read → readFiles, write/edit → modifiedFiles, from tool calls, plus a previous `details`."""
    ops = FileOps()
    if isinstance(previous, dict):
        ops.read.update(str(p) for p in previous.get("readFiles") or [])
        ops.modified.update(str(p) for p in previous.get("modifiedFiles") or [])
    for message in messages:
        if not isinstance(message, AssistantMessage):
            continue
        for block in message.content:
            if not isinstance(block, ToolCall):
                continue
            name = block.name.lower()
            path = next((block.arguments[k] for k in _PATH_KEYS if isinstance(block.arguments.get(k), str)), None)
            if not path:
                continue
            if name in _READ_TOOLS:
                ops.read.add(path)
            elif name in _WRITE_TOOLS:
                ops.modified.add(path)
    return ops


# --- chunking ---------------------------------------------------------------------------------------


def adaptive_chunk_ratio(total_tokens: int, message_count: int, context_window: int) -> float:
    """OpenClaw's `computeAdaptiveChunkRatio`: smaller chunks when messages are large."""
    if message_count <= 0 or context_window <= 0:
        return BASE_CHUNK_RATIO
    average = (total_tokens / message_count) * SAFETY_MARGIN / context_window
    if average > 0.1:
        return max(MIN_CHUNK_RATIO, BASE_CHUNK_RATIO - min(2 * average, 0.25))
    return BASE_CHUNK_RATIO


def max_chunk_tokens(context_window: int, ratio: float, *, floor: int = 1024) -> int:
    """``floor(window · ratio) − 4096``, never below `floor`."""
    return max(floor, math.floor(context_window * ratio) - SUMMARIZATION_OVERHEAD_TOKENS)


def is_oversized(tokens: int, context_window: int) -> bool:
    """A message too large to summarize at all: ``tokens · 1.2 > 50%`` of the window."""
    return tokens * SAFETY_MARGIN > 0.5 * context_window


def oversized_note(message: AgentMessage, tokens: int) -> str:
    """The note that replaces an oversized message in the summarizer input."""
    return f"[Large {message.role} (~{max(1, round(tokens / 1000))}K tokens) omitted from summary]"


def chunk_messages(
    messages: Sequence[AgentMessage], max_tokens: int, tokens_of: Callable[[AgentMessage], int]
) -> list[list[AgentMessage]]:
    """Split into chunks of at most ``max_tokens / 1.2``, never separating a call from its results."""
    limit = max(1, int(max_tokens / SAFETY_MARGIN))
    groups: list[list[AgentMessage]] = []
    for message in messages:
        if isinstance(message, ToolResultMessage) and groups:
            groups[-1].append(message)
        else:
            groups.append([message])
    chunks: list[list[AgentMessage]] = []
    current: list[AgentMessage] = []
    size = 0
    for group in groups:
        cost = sum(tokens_of(m) for m in group)
        if current and size + cost > limit:
            chunks.append(current)
            current, size = [], 0
        current.extend(group)
        size += cost
    if current:
        chunks.append(current)
    return chunks


# --- the final text ---------------------------------------------------------------------------------


def _file_tag(tag: str, files: list[str]) -> str:
    body = "\n".join(files)
    if len(body) > FILE_LIST_MAX_CHARS:
        body = body[:FILE_LIST_MAX_CHARS].rsplit("\n", 1)[0] + f"\n[... {len(files)} files in total]"
    return f"<{tag}>\n{body}\n</{tag}>"


def compose_summary(history: str, turn_prefix: str | None, ops: FileOps) -> str:
    """History summary + split-turn context + file lists, capped at 16,000 characters."""
    text = history.strip()
    if turn_prefix:
        text += SPLIT_TURN_HEADER + turn_prefix.strip()
    if len(text) > SUMMARY_MAX_CHARS:
        text = text[:SUMMARY_MAX_CHARS].rstrip() + "\n\n[Compaction summary truncated to fit budget]"
    read, modified = ops.lists()
    tags = [_file_tag("read-files", read)] if read else []
    if modified:
        tags.append(_file_tag("modified-files", modified))
    return text + ("\n\n" + "\n\n".join(tags) if tags else "")
