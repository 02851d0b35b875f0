"""AnthropicClient / AnthropicModel against the loopback Messages endpoint."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from loopback import Empty, LoopbackServer, RecordingSleep, Reply, Status, serve

from openclaw_ctx.contract.model import Model, ModelRequest, ToolSpec
from openclaw_ctx.errors import ContextOverflowError
from openclaw_ctx.messages import TextContent, ThinkingContent, ToolCall, ToolResultMessage, UserMessage
from openclaw_ctx.providers import AnthropicClient, AnthropicModel, RetryPolicy
from openclaw_ctx.providers.anthropic import ANTHROPIC_VERSION


@pytest.fixture
def loopback() -> Iterator[LoopbackServer]:
    with serve() as server:
        yield server


READ = ToolSpec(
    name="read", description="Read a file", parameters={"type": "object", "properties": {"file": {"type": "string"}}}
)


async def test_request_headers_and_body(loopback: LoopbackServer) -> None:
    client = AnthropicClient(base_url=loopback.base_url, api_key="ak-test-1", max_tokens=1000)
    await client.chat("claude-test", ModelRequest("Be careful.", [UserMessage(content="read it")], tools=[READ]))
    (seen,) = loopback.requests
    assert seen.path == "/v1/messages"
    assert seen.headers["x-api-key"] == "ak-test-1"
    assert seen.headers["anthropic-version"] == ANTHROPIC_VERSION
    assert "authorization" not in seen.headers
    assert seen.body == {
        "model": "claude-test",
        "max_tokens": 1000,
        "messages": [{"role": "user", "content": "read it"}],
        "system": "Be careful.",
        "tools": [{"name": "read", "description": "Read a file", "input_schema": READ.parameters}],
    }


async def test_max_output_tokens_wins_over_the_default(loopback: LoopbackServer) -> None:
    await AnthropicClient(base_url=loopback.base_url).chat(
        "c", ModelRequest("", [UserMessage(content="x")], max_output_tokens=77)
    )
    assert loopback.requests[0].body["max_tokens"] == 77
    assert "system" not in loopback.requests[0].body


async def test_tool_loop_with_signed_thinking(loopback: LoopbackServer) -> None:
    model = AnthropicModel(AnthropicClient(base_url=loopback.base_url, api_key="k"), "claude-test")
    assert isinstance(model, Model) and model.context_window == 200_000 and model.provider == "anthropic"
    loopback.script(
        Reply(
            text="Reading.",
            thinking="Need the file.",
            tool_calls=[("toolu_1", "read", {"file": "a.txt"})],
            usage=(50, 10),
            cached=30,
        ),
        Reply(text="It says hi."),
    )
    history = [UserMessage(content="what does a.txt say?")]
    first = await model.complete(ModelRequest("sys", list(history), tools=[READ]))
    assert first.stop_reason == "toolUse"
    assert first.content == [
        ThinkingContent(thinking="Need the file.", thinking_signature="sig-loopback"),
        TextContent(text="Reading."),
        ToolCall(id="toolu_1", name="read", arguments={"file": "a.txt"}),
    ]
    assert first.usage is not None and (first.usage.input, first.usage.cache_read, first.usage.total()) == (50, 30, 90)

    result = ToolResultMessage(tool_call_id="toolu_1", tool_name="read", content=[TextContent(text="hi")])
    second = await model.complete(ModelRequest("sys", [*history, first, result], tools=[READ]))
    assert second.content == [TextContent(text="It says hi.")] and second.stop_reason == "stop"
    sent = loopback.requests[1].body["messages"]
    assert sent[1]["content"][0] == {"type": "thinking", "thinking": "Need the file.", "signature": "sig-loopback"}
    assert sent[2] == {
        "role": "user",
        "content": [{"type": "tool_result", "tool_use_id": "toolu_1", "content": [{"type": "text", "text": "hi"}]}],
    }


async def test_prompt_too_long_raises_context_overflow(loopback: LoopbackServer) -> None:
    loopback.script(Status(400, "prompt is too long: 210000 tokens > 200000 maximum", "invalid_request_error"))
    model = AnthropicModel(AnthropicClient(base_url=loopback.base_url, api_key="k"), "claude-test")
    with pytest.raises(ContextOverflowError, match="prompt is too long"):
        await model.complete(ModelRequest("", [UserMessage(content="x")]))


async def test_overloaded_529_is_retried(loopback: LoopbackServer) -> None:
    loopback.script(Status(529, "Overloaded", "overloaded_error"), Reply(text="fine"))
    sleep = RecordingSleep()
    client = AnthropicClient(base_url=loopback.base_url, retry=RetryPolicy(base_delay_s=0.01), sleep=sleep)
    reply = await client.chat("c", ModelRequest("", [UserMessage(content="x")]))
    assert reply.content == [TextContent(text="fine")] and len(sleep.delays) == 1


async def test_empty_content(loopback: LoopbackServer) -> None:
    loopback.script(Empty())
    reply = await AnthropicClient(base_url=loopback.base_url).chat("c", ModelRequest("", [UserMessage(content="x")]))
    assert reply.content == [] and reply.stop_reason == "stop"
