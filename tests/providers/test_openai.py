"""OpenAIClient / OpenAIChatModel against the loopback Chat Completions endpoint."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from loopback import LoopbackServer, Reply, serve

from openclaw_ctx.contract.model import Model, ModelRequest, ToolSpec
from openclaw_ctx.messages import (
    AssistantMessage,
    TextContent,
    ThinkingContent,
    ToolCall,
    ToolResultMessage,
    UserMessage,
)
from openclaw_ctx.providers import OpenAIChatModel, OpenAIClient


@pytest.fixture
def loopback() -> Iterator[LoopbackServer]:
    with serve() as server:
        yield server


LS = ToolSpec(
    name="ls", description="List a directory", parameters={"type": "object", "properties": {"path": {"type": "string"}}}
)


async def test_request_headers_and_body(loopback: LoopbackServer) -> None:
    client = OpenAIClient(
        base_url=loopback.openai_url, api_key="sk-test-1", provider="vllm", extra_body={"temperature": 0}
    )
    request = ModelRequest(
        system_prompt="You are terse.",
        messages=[UserMessage(content="list /work")],
        tools=[LS],
        max_output_tokens=256,
    )
    await client.chat("meta-llama/Llama-3.1-8B", request)
    (seen,) = loopback.requests
    assert seen.path == "/v1/chat/completions"
    assert seen.headers["authorization"] == "Bearer sk-test-1"
    assert seen.headers["content-type"] == "application/json"
    assert seen.body == {
        "model": "meta-llama/Llama-3.1-8B",
        "messages": [{"role": "system", "content": "You are terse."}, {"role": "user", "content": "list /work"}],
        "temperature": 0,
        "tools": [
            {
                "type": "function",
                "function": {"name": "ls", "description": "List a directory", "parameters": LS.parameters},
            }
        ],
        "max_tokens": 256,
    }


async def test_no_key_sends_no_authorization(loopback: LoopbackServer) -> None:
    await OpenAIClient(base_url=loopback.openai_url, provider="ollama").chat(
        "llama3", ModelRequest("", [UserMessage(content="x")])
    )
    assert "authorization" not in loopback.requests[0].headers
    assert "system" not in [m["role"] for m in loopback.requests[0].body["messages"]]


async def test_reply_text_usage_and_identity(loopback: LoopbackServer) -> None:
    loopback.script(Reply(text="Two files.", usage=(120, 9), cached=100, model="gpt-served-2026"))
    reply = await OpenAIClient(base_url=loopback.openai_url).chat(
        "gpt-asked", ModelRequest("", [UserMessage(content="?")])
    )
    assert reply.content == [TextContent(text="Two files.")]
    assert (reply.provider, reply.api, reply.model, reply.stop_reason) == (
        "openai",
        "openai-completions",
        "gpt-served-2026",
        "stop",
    )
    assert reply.usage is not None
    assert (reply.usage.input, reply.usage.cache_read, reply.usage.output, reply.usage.total()) == (20, 100, 9, 129)


async def test_tool_loop_through_the_model(loopback: LoopbackServer) -> None:
    model = OpenAIChatModel(
        OpenAIClient(base_url=loopback.openai_url, provider="ollama"), "qwen3", context_window=32_768
    )
    assert isinstance(model, Model)
    assert (model.name, model.provider, model.context_window) == ("qwen3", "ollama", 32_768)
    loopback.script(
        Reply(text="", thinking="I should list it.", tool_calls=[("call_a", "ls", {"path": "/work"})]),
        Reply(text="It has a README."),
    )
    history = [UserMessage(content="what is in /work?")]
    first = await model.complete(ModelRequest("sys", list(history), tools=[LS]))
    assert first.stop_reason == "toolUse"
    assert first.content == [
        ThinkingContent(thinking="I should list it."),
        ToolCall(id="call_a", name="ls", arguments={"path": "/work"}),
    ]

    result = ToolResultMessage(tool_call_id="call_a", tool_name="ls", content=[TextContent(text="README.md")])
    second = await model.complete(ModelRequest("sys", [*history, first, result], tools=[LS]))
    assert second.content == [TextContent(text="It has a README.")]
    sent = loopback.requests[1].body["messages"]
    assert sent[2] == {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {"id": "call_a", "type": "function", "function": {"name": "ls", "arguments": '{"path": "/work"}'}}
        ],
    }
    assert sent[3] == {"role": "tool", "tool_call_id": "call_a", "content": "README.md"}


async def test_empty_content_is_an_empty_assistant_message(loopback: LoopbackServer) -> None:
    from loopback import Empty

    loopback.script(Empty())
    reply = await OpenAIClient(base_url=loopback.openai_url).chat("m", ModelRequest("", [UserMessage(content="?")]))
    assert isinstance(reply, AssistantMessage) and reply.content == []


async def test_error_object_inside_a_200_is_classified(loopback: LoopbackServer) -> None:
    from loopback import Raw

    from openclaw_ctx.providers import ProviderError

    loopback.script(Raw(200, {"error": {"message": "model 'nope' not found", "type": "not_found"}}))
    with pytest.raises(ProviderError) as info:
        await OpenAIClient(base_url=loopback.openai_url, provider="ollama").chat(
            "nope", ModelRequest("", [UserMessage(content="?")])
        )
    assert info.value.kind == "bad_request" and "not found" in info.value.detail


def test_package_exports() -> None:
    import openclaw_ctx.providers as providers

    assert sorted(providers.__all__) == providers.__all__
    for name in providers.__all__:
        assert getattr(providers, name) is not None
    assert "httpx" in (providers.__doc__ or "") and "SDK" in (providers.__doc__ or "")
