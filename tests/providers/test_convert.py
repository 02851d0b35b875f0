"""AgentMessage ⇄ Chat Completions / Messages API: round trips, and the deliberate one-way conversions."""

from __future__ import annotations

from typing import Any

import pytest

from openclaw_ctx.contract.model import ToolSpec
from openclaw_ctx.messages import (
    AgentMessage,
    AssistantMessage,
    BashExecutionMessage,
    BranchSummaryMessage,
    CompactionSummaryMessage,
    CustomMessage,
    ImageContent,
    TextContent,
    ThinkingContent,
    ToolCall,
    ToolResultMessage,
    UserMessage,
    to_wire,
)
from openclaw_ctx.providers.convert import (
    from_openai_messages,
    openai_response,
    openai_tools,
    to_openai_messages,
)
from openclaw_ctx.providers.convert_anthropic import (
    anthropic_response,
    anthropic_tools,
    from_anthropic_messages,
    to_anthropic_messages,
)

PNG = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg=="


def conversation() -> list[AgentMessage]:
    """A conversation using everything both APIs can carry."""
    return [
        UserMessage(content="What is in the repo? Ünïcødé ✓"),
        AssistantMessage(
            content=[
                TextContent(text="Let me look."),
                ToolCall(id="call_1", name="ls", arguments={"path": "/work", "all": True}),
                ToolCall(id="call_2", name="read", arguments={"file": "README.md", "lines": [1, 20]}),
            ]
        ),
        ToolResultMessage(tool_call_id="call_1", tool_name="ls", content=[TextContent(text="README.md\nsrc/")]),
        ToolResultMessage(
            tool_call_id="call_2",
            tool_name="read",
            content=[TextContent(text="# Title"), ImageContent(data=PNG, mime_type="image/png")],
        ),
        UserMessage(content=[TextContent(text="And this screenshot?"), ImageContent(data=PNG, mime_type="image/png")]),
        AssistantMessage(content=[TextContent(text="A single pixel.")]),
    ]


def content_view(messages: list[AgentMessage]) -> list[dict[str, Any]]:
    """What a request carries: role and content (plus tool ids/names), not usage or timestamps."""
    keep = {"role", "content", "toolCallId", "toolName", "isError"}
    return [{k: v for k, v in to_wire(m).items() if k in keep} for m in messages]


def test_openai_round_trip_preserves_text_images_and_tool_pairs() -> None:
    original = conversation()
    wire = to_openai_messages("You are terse.", original)
    system, back = from_openai_messages(wire)
    assert system == "You are terse."
    assert content_view(back) == content_view(original)


def test_openai_wire_shape() -> None:
    wire = to_openai_messages("sys", conversation())
    assert wire[0] == {"role": "system", "content": "sys"}
    assistant = wire[2]
    assert assistant["content"] == "Let me look."
    assert assistant["tool_calls"][0] == {
        "id": "call_1",
        "type": "function",
        "function": {"name": "ls", "arguments": '{"path": "/work", "all": true}'},
    }
    assert [m["role"] for m in wire[3:6]] == ["tool", "tool", "user"], "tool messages must follow the call directly"
    assert wire[5]["content"][1]["image_url"]["url"] == f"data:image/png;base64,{PNG}"
    assert wire[6]["content"][1] == {"type": "image_url", "image_url": {"url": f"data:image/png;base64,{PNG}"}}


def test_openai_drops_thinking_on_the_way_out() -> None:
    message = AssistantMessage(content=[ThinkingContent(thinking="hmm"), TextContent(text="42")])
    assert to_openai_messages("", [message]) == [{"role": "assistant", "content": "42"}]
    thinking_only = AssistantMessage(content=[ThinkingContent(thinking="hmm")])
    assert to_openai_messages("", [thinking_only]) == [{"role": "assistant", "content": ""}]


def test_anthropic_round_trip_preserves_signed_and_redacted_thinking() -> None:
    redacted = ThinkingContent.model_validate({"thinking": "", "thinkingSignature": "opaque==", "redacted": True})
    original = [
        *conversation()[:1],
        AssistantMessage(
            content=[
                ThinkingContent(thinking="The user wants a listing.", thinking_signature="sig-abc"),
                redacted,
                *conversation()[1].content,  # type: ignore[union-attr]
            ]
        ),
        *conversation()[2:],
        ToolResultMessage(tool_call_id="call_9", tool_name="", content=[TextContent(text="denied")], is_error=True),
    ]
    back = from_anthropic_messages(to_anthropic_messages(original))
    assert content_view(back) == content_view(original)
    thinking = back[1].content[:2]  # type: ignore[union-attr]
    assert isinstance(thinking[0], ThinkingContent) and thinking[0].thinking_signature == "sig-abc"
    assert getattr(thinking[1], "redacted", False) is True


def test_anthropic_wire_shape_merges_tool_results() -> None:
    wire = to_anthropic_messages(conversation())
    assert [m["role"] for m in wire] == ["user", "assistant", "user", "user", "assistant"]
    results = wire[2]["content"]
    assert [b["type"] for b in results] == ["tool_result", "tool_result"]
    assert results[1]["content"][1] == {
        "type": "image",
        "source": {"type": "base64", "media_type": "image/png", "data": PNG},
    }
    assert wire[1]["content"][1] == {
        "type": "tool_use",
        "id": "call_1",
        "name": "ls",
        "input": {"path": "/work", "all": True},
    }


def test_anthropic_drops_unsigned_thinking_and_empty_turns() -> None:
    messages: list[AgentMessage] = [
        UserMessage(content="hi"),
        AssistantMessage(content=[ThinkingContent(thinking="unsigned")]),
        AssistantMessage(content=[ThinkingContent(thinking="x"), TextContent(text="hello")]),
    ]
    assert to_anthropic_messages(messages) == [
        {"role": "user", "content": "hi"},
        {"role": "assistant", "content": [{"type": "text", "text": "hello"}]},
    ]


@pytest.mark.parametrize("to_wire_format", ["openai", "anthropic"])
def test_harness_roles_become_user_text(to_wire_format: str) -> None:
    messages: list[AgentMessage] = [
        CompactionSummaryMessage(summary="We fixed the parser.", tokens_before=5000),
        BranchSummaryMessage(summary="Tried a rewrite; abandoned."),
        BashExecutionMessage(command="make test", output="2 failed", exit_code=1),
        BashExecutionMessage(command="secret-thing", output="hidden", exclude_from_context=True),
        CustomMessage(custom_type="note", content="remember the deadline"),
    ]
    if to_wire_format == "openai":
        texts = [m["content"] for m in to_openai_messages("", messages)]
    else:
        texts = [m["content"] for m in to_anthropic_messages(messages)]
    assert len(texts) == 4, "excludeFromContext shell runs stay out"
    assert texts[0].startswith("The conversation history before this point was compacted")
    assert "<summary>\nWe fixed the parser.\n</summary>" in texts[0]
    assert texts[1].startswith("The following is a summary of a branch")
    assert "make test" in texts[2] and "2 failed" in texts[2] and "exit code 1" in texts[2]
    assert texts[3] == "remember the deadline"


def test_tools_formats() -> None:
    spec = ToolSpec(name="grep", description="Search", parameters={"type": "object", "properties": {}})
    assert openai_tools([spec]) == [
        {"type": "function", "function": {"name": "grep", "description": "Search", "parameters": spec.parameters}}
    ]
    assert anthropic_tools([spec]) == [{"name": "grep", "description": "Search", "input_schema": spec.parameters}]


def test_openai_response_usage_reasoning_and_tool_calls() -> None:
    data = {
        "model": "qwen3:8b",
        "choices": [
            {
                "message": {
                    "role": "assistant",
                    "content": "Checking.",
                    "reasoning_content": "need to list",
                    "tool_calls": [
                        {"id": "c1", "type": "function", "function": {"name": "ls", "arguments": '{"p": 1}'}}
                    ],
                },
                "finish_reason": "tool_calls",
            }
        ],
        "usage": {
            "prompt_tokens": 100,
            "completion_tokens": 20,
            "total_tokens": 120,
            "prompt_tokens_details": {"cached_tokens": 60},
        },
    }
    message = openai_response(data, provider="ollama", api="openai-completions", model="asked")
    assert [type(b).__name__ for b in message.content] == ["ThinkingContent", "TextContent", "ToolCall"]
    assert message.content[2] == ToolCall(id="c1", name="ls", arguments={"p": 1})
    assert message.stop_reason == "toolUse" and message.model == "qwen3:8b" and message.provider == "ollama"
    assert message.usage is not None
    assert (message.usage.input, message.usage.cache_read, message.usage.output) == (40, 60, 20)
    assert message.usage.total() == 120
    assert message.response_id is None  # this body has no "id"
    assert openai_response({**data, "id": "chatcmpl-9"}, provider="o", api="a", model="m").response_id == "chatcmpl-9"


def test_openai_response_with_bad_tool_arguments_is_rejected() -> None:
    data = {"choices": [{"message": {"tool_calls": [{"id": "c", "function": {"name": "x", "arguments": "[1"}}]}}]}
    with pytest.raises(ValueError):
        openai_response(data, provider="p", api="a", model="m")


def test_anthropic_response_usage_and_stop_reasons() -> None:
    data = {
        "type": "message",
        "model": "claude-x",
        "content": [{"type": "text", "text": "Hi"}],
        "stop_reason": "max_tokens",
        "usage": {
            "input_tokens": 10,
            "output_tokens": 5,
            "cache_read_input_tokens": 100,
            "cache_creation_input_tokens": 7,
        },
    }
    message = anthropic_response(data, provider="anthropic", api="anthropic-messages", model="asked")
    assert message.stop_reason == "length"
    assert message.usage is not None and message.usage.total() == 122
    assert (message.usage.cache_read, message.usage.cache_write) == (100, 7)
    assert anthropic_response({**data, "id": "msg_01"}, provider="a", api="b", model="m").response_id == "msg_01"
    with pytest.raises(ValueError):
        anthropic_response({"type": "error"}, provider="a", api="b", model="m")
