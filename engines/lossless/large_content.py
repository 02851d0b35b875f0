"""Large content: tool outputs and file contents over `largeFileTokenThreshold`, shown as stubs.

Lossless by construction: the original message is never rewritten (``messages.message_json`` keeps
it whole, and FTS indexes its full text). A `large_content` row records that the model sees a short
stub instead — ``[LCM Tool Output: file_xxx | tool=… | N bytes]`` or ``[LCM File: …]`` plus a
deterministic exploration summary — and the session's context item carries the stub's token count.
:func:`load_large_content` gives the original back; :func:`register_file_describer` lets core's
``describe`` answer for ``file_…`` ids.
"""

from __future__ import annotations

import json
import re
import secrets
from dataclasses import dataclass
from typing import Any

from sqlalchemy import insert, select, text
from sqlalchemy.ext.asyncio import AsyncConnection

from engines.lossless.models import LargeContent
from openclaw_ctx.errors import NotFoundError
from openclaw_ctx.messages import (
    AgentMessage,
    BashExecutionMessage,
    CustomMessage,
    TextContent,
    ToolResultMessage,
    UserMessage,
    flatten_text,
    message_from_json,
)
from openclaw_ctx.recall import DescribeOptions, FileDescription, register_describer
from openclaw_ctx.store import repo
from openclaw_ctx.store.models import Message
from openclaw_ctx.store.repo import message_token_count
from openclaw_ctx.tokens import TokenCounter

__all__ = [
    "FILE_ID_PREFIX",
    "LargeContentRecord",
    "StubbedMessage",
    "describe_large_content",
    "exploration_summary",
    "externalise_session",
    "load_large_content",
    "load_stubs",
    "may_be_large",
    "register_file_describer",
    "stub_message",
]

FILE_ID_PREFIX = "file_"

_ROLES = ("toolResult", "bashExecution", "user", "custom")
_FILE_BLOCK = re.compile(r"<file\b([^>]*)>(.*?)</file>", re.DOTALL)
_ATTR = re.compile(r'(\w+)\s*=\s*"([^"]*)"')
_SYMBOL = re.compile(
    r"^\s*(?:export\s+)?(?:async\s+)?(?:pub\s+)?(def|class|function|func|fn|interface|struct|enum|trait|impl)\s+([A-Za-z_$][\w$]*)",
    re.MULTILINE,
)
_HEADING = re.compile(r"^#{1,4}\s+(.+)$", re.MULTILINE)


@dataclass(frozen=True)
class StubbedMessage:
    """What the model sees for an externalised message, and its token count."""

    file_id: str
    message: AgentMessage
    token_count: int


@dataclass(frozen=True)
class LargeContentRecord:
    """An externalised message with its full original content."""

    file_id: str
    session_key: str
    message_id: int
    kind: str
    name: str | None
    mime_type: str | None
    byte_size: int
    token_count: int
    stub: str
    message: AgentMessage

    @property
    def content(self) -> str:
        """The full original text."""
        return flatten_text(self.message)


def may_be_large(message: AgentMessage, threshold_tokens: int) -> bool:
    """Cheap pre-check without tokenizing: a text of T tokens has at least T UTF-8 bytes."""
    if message.role not in _ROLES:
        return False
    body = flatten_text(message)
    return len(body) * 4 >= threshold_tokens and len(body.encode("utf-8", "replace")) >= threshold_tokens


def _new_file_id() -> str:
    return FILE_ID_PREFIX + secrets.token_hex(8)


def _describe_json(value: Any) -> str:
    if isinstance(value, dict):
        keys = list(value)[:20]
        fields = ", ".join(f"{k}: {type(value[k]).__name__}" for k in keys)
        more = f" (+{len(value) - 20} more)" if len(value) > 20 else ""
        return f"JSON object with {len(value)} keys: {fields}{more}"
    if isinstance(value, list):
        first = value[0] if value else None
        inner = f"; first item: {_describe_json(first)}" if isinstance(first, dict | list) else ""
        kinds = sorted({type(v).__name__ for v in value[:100]})
        return f"JSON array of {len(value)} items ({', '.join(kinds) or 'empty'}){inner}"
    return f"JSON {type(value).__name__}"


def _describe_table(lines: list[str]) -> str | None:
    for sep, label in ((",", "CSV"), ("\t", "TSV")):
        counts = {line.count(sep) for line in lines[:5] if line.strip()}
        if len(counts) == 1 and (n := counts.pop()) >= 1:
            header = [h.strip() for h in lines[0].split(sep)][:20]
            return f"{label} with {n + 1} columns and {len(lines) - 1} data rows; header: {', '.join(header)}"
    return None


def exploration_summary(body: str, *, max_items: int = 30) -> str:
    """A deterministic description of `body`: JSON shape, table header, code symbols, or text outline."""
    lines = body.splitlines()
    size = f"{len(lines)} lines, {len(body.encode('utf-8', 'replace'))} bytes"
    stripped = body.strip()
    if stripped[:1] in "{[":
        try:
            return f"{_describe_json(json.loads(stripped))} ({size})"
        except json.JSONDecodeError:
            pass
    table = _describe_table(lines)
    if table:
        return f"{table} ({size})"
    symbols = [f"{kind} {name}" for kind, name in _SYMBOL.findall(body)]
    if len(symbols) >= 2:
        shown = ", ".join(symbols[:max_items]) + (
            f" (+{len(symbols) - max_items} more)" if len(symbols) > max_items else ""
        )
        return f"Code ({size}); symbols: {shown}"
    head = [line.strip()[:160] for line in lines if line.strip()][:3]
    headings = [h.strip()[:80] for h in _HEADING.findall(body)][:10]
    parts = [f"Text ({size})"]
    if headings:
        parts.append("headings: " + "; ".join(headings))
    if head:
        parts.append("begins: " + " / ".join(head))
    return "; ".join(parts)


def _retrieval_hint(file_id: str) -> str:
    return f'Full content is stored: call lcm_describe(id="{file_id}", expandFile=true) to read it.'


def _tool_stub(file_id: str, tool: str, body: str) -> str:
    size = len(body.encode("utf-8", "replace"))
    return (
        f"[LCM Tool Output: {file_id} | tool={tool or 'unknown'} | {size} bytes]\n"
        f"Exploration summary: {exploration_summary(body)}\n{_retrieval_hint(file_id)}"
    )


def _file_stub(file_id: str, part: int | None, name: str, mime: str, body: str) -> str:
    size = len(body.encode("utf-8", "replace"))
    label = f"{file_id} part {part}" if part is not None else file_id
    return f"[LCM File: {label} | {name} | {mime} | {size} bytes]\nExploration summary: {exploration_summary(body)}"


def _user_stub(file_id: str, body: str, threshold: int, counter: TokenCounter) -> tuple[str, str, str]:
    blocks = list(_FILE_BLOCK.finditer(body))
    big = [b for b in blocks if counter.count(b.group(2)) >= threshold // 2] if blocks else []
    if not big:
        stub = _file_stub(file_id, None, "pasted text", "text/plain", body) + f"\n{_retrieval_hint(file_id)}"
        return stub, "pasted text", "text/plain"
    out: list[str] = []
    last = 0
    first_name, first_mime = "", ""
    for part, block in enumerate(big, start=1):
        attrs = dict(_ATTR.findall(block.group(1)))
        name = attrs.get("name") or attrs.get("path") or "file"
        mime = attrs.get("mime") or attrs.get("type") or "text/plain"
        first_name, first_mime = first_name or name, first_mime or mime
        out.append(body[last : block.start()])
        out.append(_file_stub(file_id, part if len(big) > 1 else None, name, mime, block.group(2)))
        last = block.end()
    out.append(body[last:])
    return "".join(out) + f"\n{_retrieval_hint(file_id)}", first_name, first_mime


def stub_message(original: AgentMessage, stub: str) -> AgentMessage:
    """The message the model sees in place of `original` (same role; tool call id kept for pairing)."""
    if isinstance(original, ToolResultMessage):
        return ToolResultMessage(
            tool_call_id=original.tool_call_id,
            tool_name=original.tool_name,
            content=[TextContent(text=stub)],
            is_error=original.is_error,
            timestamp=original.timestamp,
        )
    if isinstance(original, BashExecutionMessage):
        return original.model_copy(update={"output": stub})
    if isinstance(original, CustomMessage):
        return original.model_copy(update={"content": stub})
    if isinstance(original, UserMessage):
        return UserMessage(content=stub, timestamp=original.timestamp)
    return original


def _build_row(
    session_key: str, message_id: int, message: AgentMessage, tokens: int, threshold: int, counter: TokenCounter
) -> dict[str, Any]:
    file_id = _new_file_id()
    body = flatten_text(message, include_thinking=False)
    if isinstance(message, ToolResultMessage | BashExecutionMessage):
        tool = message.tool_name if isinstance(message, ToolResultMessage) else "bash"
        body = body if isinstance(message, ToolResultMessage) else message.output
        stub, kind, name, mime = _tool_stub(file_id, tool, body), "tool_output", tool, None
    else:
        stub, name, mime = _user_stub(file_id, body, threshold, counter)
        kind = "file"
    shown = stub_message(message, stub)
    return {
        "file_id": file_id,
        "session_key": session_key,
        "message_id": message_id,
        "kind": kind,
        "name": name,
        "mime_type": mime,
        "byte_size": len(body.encode("utf-8", "replace")),
        "token_count": tokens,
        "stub": stub,
        "stub_token_count": message_token_count(shown, counter),
    }


_CANDIDATES_SQL = text(
    """
    SELECT ci.message_id, m.message_json, m.token_count
    FROM context_items AS ci
    JOIN messages AS m ON m.message_id = ci.message_id
    LEFT JOIN large_content AS lc ON lc.message_id = ci.message_id
    WHERE ci.session_id = :sid AND ci.item_type = 'message' AND m.token_count >= :threshold
      AND m.role IN ('toolResult', 'bashExecution', 'user', 'custom') AND lc.file_id IS NULL
    """
)


async def externalise_session(
    conn: AsyncConnection, session_id: str, session_key: str, threshold: int, counter: TokenCounter
) -> list[str]:
    """Externalise every over-threshold message in the session's context that is not yet; returns file ids.

    Uses stored token counts to find candidates, writes the sidecar rows and sets the context items'
    token counts to the stubs' (so thresholds and budgets see what the model will see).
    """
    found = (await conn.execute(_CANDIDATES_SQL, {"sid": session_id, "threshold": threshold})).all()
    if not found:
        return []
    rows = [
        _build_row(session_key, mid, message_from_json(raw), tokens, threshold, counter) for mid, raw, tokens in found
    ]
    await conn.execute(insert(LargeContent), rows)
    await repo.set_message_item_tokens(conn, session_id, {r["message_id"]: r["stub_token_count"] for r in rows})
    return [r["file_id"] for r in rows]


async def load_stubs(conn: AsyncConnection, originals: dict[int, AgentMessage]) -> dict[int, StubbedMessage]:
    """Stubs for those of `originals` (message id → message) that are externalised."""
    if not originals:
        return {}
    rows = await conn.execute(
        select(LargeContent.message_id, LargeContent.file_id, LargeContent.stub, LargeContent.stub_token_count).where(
            LargeContent.message_id.in_(list(originals))
        )
    )
    return {
        mid: StubbedMessage(file_id, stub_message(originals[mid], stub), tokens) for mid, file_id, stub, tokens in rows
    }


async def load_large_content(conn: AsyncConnection, file_id: str) -> LargeContentRecord:
    """The externalised content `file_id`, with the full original message.

    Raises:
        NotFoundError: no such file id.
    """
    row = (
        await conn.execute(
            select(
                LargeContent.file_id,
                LargeContent.session_key,
                LargeContent.message_id,
                LargeContent.kind,
                LargeContent.name,
                LargeContent.mime_type,
                LargeContent.byte_size,
                LargeContent.token_count,
                LargeContent.stub,
                Message.message_json,
            )
            .join(Message, Message.message_id == LargeContent.message_id)
            .where(LargeContent.file_id == file_id)
        )
    ).first()
    if row is None:
        raise NotFoundError(f"no large content with id {file_id!r}")
    return LargeContentRecord(*row[:9], message=message_from_json(row[9]))


async def describe_large_content(conn: AsyncConnection, file_id: str, options: DescribeOptions) -> FileDescription:
    """Core ``describe`` for a ``file_…`` id: metadata, the stub, and with `expand_file` the text (32 KB).

    Raises:
        NotFoundError: no such file id.
    """
    record = await load_large_content(conn, file_id)
    row = {
        "file_id": record.file_id,
        "session_key": record.session_key,
        "message_id": f"msg_{record.message_id}",
        "kind": record.kind,
        "name": record.name,
        "mime_type": record.mime_type,
        "byte_size": record.byte_size,
        "token_count": record.token_count,
    }
    return FileDescription.of(file_id, row, record.stub, record.content, with_content=options.expand_file)


def register_file_describer() -> None:
    """Make core's ``describe`` (the CLI's and the ``lcm_describe`` tool's) answer for ``file_…`` ids."""
    register_describer(FILE_ID_PREFIX, describe_large_content)
