"""AgentMessage and its content blocks, as OpenClaw (pi-agent-core) writes them.

The models round-trip OpenClaw's JSON exactly: camelCase keys on the wire, keys that were absent stay
absent, explicit nulls stay null, and fields this code does not know are kept (``extra="allow"``).
Use :func:`parse_message` for anything that comes from outside and :func:`to_wire` to serialise.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable
from typing import Annotated, Any, ClassVar, Literal, Self

from pydantic import (
    BaseModel,
    ConfigDict,
    Discriminator,
    Field,
    Tag,
    TypeAdapter,
    ValidationError,
    model_validator,
)
from pydantic.alias_generators import to_camel

from openclaw_ctx.errors import InvalidMessageError

__all__ = [
    "AgentMessage",
    "AssistantMessage",
    "BashExecutionMessage",
    "BranchSummaryMessage",
    "CompactionSummaryMessage",
    "ContentBlock",
    "CustomMessage",
    "ImageContent",
    "MessageListAdapter",
    "ROLES",
    "StopReason",
    "TextContent",
    "ThinkingContent",
    "ToolCall",
    "ToolResultMessage",
    "Usage",
    "UsageCost",
    "UserMessage",
    "flatten_text",
    "message_from_json",
    "provider_event_key",
    "message_to_json",
    "parse_message",
    "tool_call_ids",
    "to_wire",
]


class _Wire(BaseModel):
    """Base for every wire model: camelCase aliases, unknown keys kept, discriminators always emitted."""

    model_config = ConfigDict(
        alias_generator=to_camel,
        populate_by_name=True,
        extra="allow",
        frozen=False,
        ser_json_inf_nan="strings",
    )

    # Field names that must appear on the wire even when the caller relied on their default. A ClassVar:
    # as a pydantic private attribute it was deep-copied into every message and block at parse time.
    _always_emit: ClassVar[tuple[str, ...]] = ()

    @model_validator(mode="after")
    def _mark_discriminators_set(self) -> Self:
        for name in self._always_emit:
            self.__pydantic_fields_set__.add(name)
        return self


class _Content(_Wire):
    """A message with `content`: pi reads ``content: null`` (old writers, aborted turns) as no blocks."""

    @model_validator(mode="before")
    @classmethod
    def _null_content_is_empty(cls, data: Any) -> Any:
        if isinstance(data, dict) and "content" in data and data["content"] is None:
            return {**data, "content": []}
        return data


StopReason = Literal["stop", "length", "toolUse", "error", "aborted", "pending", "deferred"]
"""Why a reply ended; `pending` and `deferred` mark a turn pi 1.6 left open (a tool call waiting on the user)."""


class TextContent(_Wire):
    """A text block."""

    type: Literal["text"] = "text"
    text: str
    text_signature: str | None = None
    _always_emit = ("type",)


class ThinkingContent(_Wire):
    """A reasoning block; never sent to summarizers."""

    type: Literal["thinking"] = "thinking"
    thinking: str
    thinking_signature: str | None = None
    _always_emit = ("type",)


class ImageContent(_Wire):
    """An inline image (base64 data and its MIME type)."""

    type: Literal["image"] = "image"
    data: str
    mime_type: str
    _always_emit = ("type",)


class ToolCall(_Wire):
    """A tool invocation requested by the assistant."""

    type: Literal["toolCall"] = "toolCall"
    id: str = Field(min_length=1)
    name: str = Field(min_length=1)
    arguments: dict[str, Any] = Field(default_factory=dict)
    thought_signature: str | None = None
    _always_emit = ("type", "arguments")


MAX_SAFE_INTEGER = 2**53 - 1
"""The largest integer a JavaScript host can send exactly; larger ones are refused, not stored wrong."""
SafeInt = Annotated[int, Field(ge=-MAX_SAFE_INTEGER, le=MAX_SAFE_INTEGER)]
EpochMillis = SafeInt
"""A message time in milliseconds since the epoch."""


class UsageCost(_Wire):
    """Cost of one model call, by kind of token."""

    # int | float keeps `0` as `0` on the way back out (exact round-trip).
    input: int | float = 0
    output: int | float = 0
    cache_read: int | float = 0
    cache_write: int | float = 0
    total: int | float = 0


class Usage(_Wire):
    """Token usage the provider reported for one assistant message."""

    input: SafeInt = 0
    output: SafeInt = 0
    cache_read: SafeInt = 0
    cache_write: SafeInt = 0
    total_tokens: SafeInt = 0
    cost: UsageCost | None = None

    def total(self) -> int:
        """Total tokens, from `totalTokens` or the sum of the parts."""
        return self.total_tokens or (self.input + self.output + self.cache_read + self.cache_write)


UserBlock = Annotated[TextContent | ImageContent, Field(discriminator="type")]
AssistantBlock = Annotated[TextContent | ThinkingContent | ToolCall, Field(discriminator="type")]
ContentBlock = TextContent | ThinkingContent | ImageContent | ToolCall


class UserMessage(_Content):
    """A user turn; content is a plain string or text/image blocks."""

    role: Literal["user"] = "user"
    content: str | list[UserBlock]
    timestamp: EpochMillis | None = None
    _always_emit = ("role",)


class AssistantMessage(_Content):
    """A model reply: text, thinking and tool calls."""

    role: Literal["assistant"] = "assistant"
    content: list[AssistantBlock]
    api: str | None = None
    provider: str | None = None
    model: str | None = None
    usage: Usage | None = None
    stop_reason: StopReason | None = None
    error_message: str | None = None
    timestamp: EpochMillis | None = None
    response_id: str | None = None
    """The provider's id of the response (`chatcmpl-…`, `msg_…`): a stable event key."""
    _always_emit = ("role",)


class ToolResultMessage(_Content):
    """The result of one tool call; `details` is UI-only and never reaches a model or summarizer."""

    role: Literal["toolResult"] = "toolResult"
    tool_call_id: str = Field(min_length=1)
    tool_name: str = ""
    content: list[UserBlock]
    details: Any = None
    is_error: bool = False
    timestamp: EpochMillis | None = None
    _always_emit = ("role",)


class BashExecutionMessage(_Wire):
    """A shell command the harness ran on the user's behalf."""

    role: Literal["bashExecution"] = "bashExecution"
    command: str
    output: str = ""
    exit_code: SafeInt | None = None
    cancelled: bool = False
    truncated: bool = False
    full_output_path: str | None = None
    exclude_from_context: bool = False
    timestamp: EpochMillis | None = None
    _always_emit = ("role",)


class CustomMessage(_Content):
    """Extension-injected content that is part of the model context."""

    role: Literal["custom"] = "custom"
    custom_type: str
    content: str | list[UserBlock]
    display: bool = True
    details: Any = None
    timestamp: EpochMillis | None = None
    _always_emit = ("role",)


class BranchSummaryMessage(_Wire):
    """Summary of a branch the conversation came back from."""

    role: Literal["branchSummary"] = "branchSummary"
    summary: str
    from_id: str | None = None
    timestamp: EpochMillis | None = None
    _always_emit = ("role",)


class CompactionSummaryMessage(_Wire):
    """Summary of history that compaction replaced."""

    role: Literal["compactionSummary"] = "compactionSummary"
    summary: str
    tokens_before: SafeInt = 0
    timestamp: EpochMillis | None = None
    _always_emit = ("role",)


AgentMessage = Annotated[
    Annotated[UserMessage, Tag("user")]
    | Annotated[AssistantMessage, Tag("assistant")]
    | Annotated[ToolResultMessage, Tag("toolResult")]
    | Annotated[BashExecutionMessage, Tag("bashExecution")]
    | Annotated[CustomMessage, Tag("custom")]
    | Annotated[BranchSummaryMessage, Tag("branchSummary")]
    | Annotated[CompactionSummaryMessage, Tag("compactionSummary")],
    Discriminator("role"),
]
_BLOCK_TYPES = ("text", "thinking", "image", "toolCall")
ROLES = ("user", "assistant", "toolResult", "bashExecution", "custom", "branchSummary", "compactionSummary")

_MessageAdapter: TypeAdapter[AgentMessage] = TypeAdapter(AgentMessage)
MessageListAdapter: TypeAdapter[list[AgentMessage]] = TypeAdapter(list[AgentMessage])


def _describe(error: ValidationError, prefix: str) -> str:
    parts = []
    for item in error.errors()[:5]:
        # Drop the union tags pydantic inserts (the role after the root, a block type after an index).
        path = list(item["loc"])
        kept = [
            p
            for i, p in enumerate(path)
            if not (i == 0 and p in ROLES) and not (i > 0 and isinstance(path[i - 1], int) and p in _BLOCK_TYPES)
        ]
        # Union branches show up as schema names ("str", "list[tagged-union[…]]"); say "content" once.
        kept = [p for p in kept if not (isinstance(p, str) and ("[" in p or p in ("str", "function-after")))]
        loc = ".".join(str(p) for p in kept)
        line = f"{prefix}{('.' + loc) if loc else ''}: {item['msg']}"
        if line not in parts:
            parts.append(line)
    more = error.error_count() - 5
    return "; ".join(parts) + (f" (and {more} more)" if more > 0 else "")


def parse_message(data: Any, *, where: str = "message") -> AgentMessage:
    """Validate one message from a dict or a JSON string.

    Raises:
        InvalidMessageError: naming the offending field, e.g. ``message.content.0.text: Field required``.
    """
    if isinstance(data, UserMessage | AssistantMessage | ToolResultMessage | BashExecutionMessage):
        return data
    if isinstance(data, CustomMessage | BranchSummaryMessage | CompactionSummaryMessage):
        return data
    if isinstance(data, str | bytes):
        try:
            data = json.loads(data)
        except json.JSONDecodeError as exc:
            raise InvalidMessageError(f"{where}: not valid JSON ({exc.msg} at char {exc.pos})") from exc
    if not isinstance(data, dict):
        raise InvalidMessageError(f"{where}: expected a JSON object, got {type(data).__name__}")
    role = data.get("role")
    if role not in ROLES:
        raise InvalidMessageError(f"{where}.role: expected one of {', '.join(ROLES)}, got {role!r}")
    try:
        return _MessageAdapter.validate_python(data)
    except ValidationError as exc:
        raise InvalidMessageError(_describe(exc, where)) from exc


def provider_event_key(message: AgentMessage) -> str | None:
    """The provider event key that makes ingesting `message` idempotent when it has no entry id.

    Only a model reply's response id qualifies, and only together with a digest of the message:
    tool-call ids are reused by local models (`call_0` every turn) and some OpenAI-compatible
    servers answer every request with one constant id, so either alone would drop real messages.
    The same reply delivered twice (a host replaying its history) gets the same key.
    """
    if isinstance(message, AssistantMessage) and message.response_id:
        digest = hashlib.sha256(message_to_json(message).encode("utf-8")).hexdigest()[:16]
        return f"response:{message.provider or ''}:{message.response_id}:{digest}"
    return None


def to_wire(message: AgentMessage) -> dict[str, Any]:
    """The message as OpenClaw's JSON object (camelCase, only the keys that were set)."""
    return message.model_dump(by_alias=True, exclude_unset=True, mode="json")


def message_to_json(message: AgentMessage) -> str:
    """Compact JSON for the `messages.message_json` column.

    Lone surrogates cannot be encoded as UTF-8, so a message holding one is written with ASCII escapes:
    json.loads gives back exactly the same string either way.
    """
    wire = to_wire(message)
    try:
        text = json.dumps(wire, ensure_ascii=False, separators=(",", ":"))
        text.encode("utf-8")
        return text
    except UnicodeEncodeError:
        return json.dumps(wire, ensure_ascii=True, separators=(",", ":"))


def message_from_json(text: str) -> AgentMessage:
    """Inverse of :func:`message_to_json`; a stored row that fails here is corruption, not input."""
    return parse_message(text, where="stored message")


def _block_text(block: Any, *, include_thinking: bool) -> str:
    if isinstance(block, TextContent):
        return block.text
    if isinstance(block, ThinkingContent):
        return block.thinking if include_thinking else ""
    if isinstance(block, ToolCall):
        return f"{block.name}({json.dumps(block.arguments, ensure_ascii=False, sort_keys=True)})"
    if isinstance(block, ImageContent):
        return "[image]"
    return ""


def _join(blocks: Iterable[Any], *, include_thinking: bool) -> str:
    return "\n".join(t for t in (_block_text(b, include_thinking=include_thinking) for b in blocks) if t)


def flatten_text(message: AgentMessage, *, include_thinking: bool = True) -> str:
    """Plain text of a message, for full-text search, token estimates and summarizer input."""
    if isinstance(message, UserMessage | CustomMessage):
        if isinstance(message.content, str):
            return message.content
        return _join(message.content, include_thinking=include_thinking)
    if isinstance(message, AssistantMessage):
        return _join(message.content, include_thinking=include_thinking)
    if isinstance(message, ToolResultMessage):
        return _join(message.content, include_thinking=include_thinking)
    if isinstance(message, BashExecutionMessage):
        return f"$ {message.command}\n{message.output}"
    if isinstance(message, BranchSummaryMessage | CompactionSummaryMessage):
        return message.summary
    raise TypeError(f"not an AgentMessage: {type(message).__name__}")


def tool_call_ids(message: AgentMessage) -> list[str]:
    """Ids of the tool calls an assistant message makes (empty for other roles)."""
    if isinstance(message, AssistantMessage):
        return [b.id for b in message.content if isinstance(b, ToolCall)]
    return []
