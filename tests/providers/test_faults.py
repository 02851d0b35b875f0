"""The fault matrix, through real sockets: retries, Retry-After, timeouts, breaker, spend guard, fallback."""

from __future__ import annotations

import asyncio
import random
import socket
from collections.abc import Iterator
from typing import Any

import pytest
from loopback import Clock, Cut, LoopbackServer, Malformed, RecordingSleep, Reply, Slow, Status, serve

from openclaw_ctx.contract.model import ModelRequest
from openclaw_ctx.errors import ContextOverflowError
from openclaw_ctx.messages import TextContent, UserMessage
from openclaw_ctx.providers import (
    AnthropicClient,
    ChatClient,
    ChatModel,
    CircuitBreaker,
    OpenAIChatModel,
    OpenAIClient,
    ProviderError,
    RetryPolicy,
    SpendGuard,
)

REQUEST = ModelRequest(system_prompt="be brief", messages=[UserMessage(content="hello")], session_key="agent:main")


@pytest.fixture
def loopback() -> Iterator[LoopbackServer]:
    with serve() as server:
        yield server


FAST = RetryPolicy(max_attempts=3, base_delay_s=0.01, max_delay_s=0.04, jitter=0.25)


def make_client(kind: str, server: LoopbackServer, sleep: RecordingSleep, **kw: Any) -> ChatClient:
    options: dict[str, Any] = {"retry": FAST, "sleep": sleep, "rng": random.Random(7), **kw}
    if kind == "anthropic":
        return AnthropicClient(base_url=server.base_url, api_key="ak-secret-123", **options)
    return OpenAIClient(base_url=server.openai_url, api_key="sk-secret-123", **options)


@pytest.fixture(params=["openai", "anthropic"])
def api(request: pytest.FixtureRequest) -> str:
    return str(request.param)


def reply_text(message: Any) -> str:
    return "".join(b.text for b in message.content if isinstance(b, TextContent))


async def test_429_honours_retry_after_seconds(loopback: LoopbackServer, api: str) -> None:
    sleep = RecordingSleep()
    loopback.script(Status(429, "slow down", "rate_limit_error", {"Retry-After": "7"}), Reply(text="after wait"))
    reply = await make_client(api, loopback, sleep, retry=RetryPolicy(max_retry_after_s=30)).chat("m", REQUEST)
    assert reply_text(reply) == "after wait"
    assert sleep.delays == [7.0]
    assert len(loopback.requests) == 2


async def test_429_honours_retry_after_ms(loopback: LoopbackServer) -> None:
    sleep = RecordingSleep()
    loopback.script(Status(429, headers={"retry-after-ms": "250", "Retry-After": "9"}), Reply())
    await make_client("openai", loopback, sleep).chat("m", REQUEST)
    assert sleep.delays == [0.25]


async def test_retry_after_beyond_the_cap_fails_at_once(loopback: LoopbackServer, api: str) -> None:
    sleep = RecordingSleep()
    loopback.script(Status(429, "try tomorrow", headers={"Retry-After": "86400"}))
    with pytest.raises(ProviderError) as info:
        await make_client(api, loopback, sleep).chat("m", REQUEST)
    assert info.value.kind == "rate_limit" and info.value.retry_after == 86400.0
    assert sleep.delays == [] and len(loopback.requests) == 1


async def test_5xx_backs_off_exponentially_with_jitter_then_succeeds(loopback: LoopbackServer, api: str) -> None:
    sleep = RecordingSleep()
    loopback.script(Status(500), Status(503), Reply(text="third time"))
    reply = await make_client(api, loopback, sleep).chat("m", REQUEST)
    assert reply_text(reply) == "third time"
    assert len(sleep.delays) == 2
    assert 0.0075 <= sleep.delays[0] <= 0.0125
    assert 0.015 <= sleep.delays[1] <= 0.025


def test_backoff_is_capped_and_jittered() -> None:
    policy = RetryPolicy(max_attempts=10, base_delay_s=1.0, max_delay_s=4.0, jitter=0.5)
    rng = random.Random(1)
    delays = [policy.delay(n, None, rng) for n in range(1, 11)]
    assert delays[-1] is None
    finite = [d for d in delays if d is not None]
    assert all(0.5 <= d <= 6.0 for d in finite)
    assert len({round(d, 6) for d in finite[3:]}) > 1, "jitter must vary the capped delays"


async def test_persistent_500_gives_up_after_max_attempts(loopback: LoopbackServer, api: str) -> None:
    loopback.default = Status(500, "boom")
    with pytest.raises(ProviderError) as info:
        await make_client(api, loopback, RecordingSleep()).chat("m", REQUEST)
    assert info.value.kind == "server" and info.value.status == 500
    assert "after 3 attempts" in info.value.detail
    assert len(loopback.requests) == 3


@pytest.mark.parametrize(("code", "kind"), [(401, "auth"), (403, "auth"), (400, "bad_request"), (404, "bad_request")])
async def test_client_errors_are_not_retried(loopback: LoopbackServer, api: str, code: int, kind: str) -> None:
    sleep = RecordingSleep()
    loopback.script(Status(code, "nope", "invalid_request_error"), Reply())
    with pytest.raises(ProviderError) as info:
        await make_client(api, loopback, sleep).chat("m", REQUEST)
    assert info.value.kind == kind and info.value.status == code
    assert len(loopback.requests) == 1 and sleep.delays == []


async def test_exhausted_quota_is_not_retried(loopback: LoopbackServer) -> None:
    loopback.script(Status(429, "You exceeded your current quota", "insufficient_quota"), Reply())
    with pytest.raises(ProviderError) as info:
        await make_client("openai", loopback, RecordingSleep()).chat("m", REQUEST)
    assert info.value.kind == "quota" and len(loopback.requests) == 1


async def test_malformed_json_is_retried(loopback: LoopbackServer, api: str) -> None:
    loopback.script(Malformed(), Reply(text="clean"))
    assert reply_text(await make_client(api, loopback, RecordingSleep()).chat("m", REQUEST)) == "clean"
    loopback.default = Malformed()
    with pytest.raises(ProviderError) as info:
        await make_client(api, loopback, RecordingSleep()).chat("m", REQUEST)
    assert info.value.kind == "malformed"
    assert len(loopback.requests) == 2 + 3


async def test_connection_cut_mid_response_is_retried(loopback: LoopbackServer, api: str) -> None:
    loopback.script(Cut(), Reply(text="whole"))
    assert reply_text(await make_client(api, loopback, RecordingSleep()).chat("m", REQUEST)) == "whole"
    loopback.default = Cut()
    with pytest.raises(ProviderError) as info:
        await make_client(api, loopback, RecordingSleep()).chat("m", REQUEST)
    assert info.value.kind == "connection"


def closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


async def test_connection_refused_is_a_connection_error() -> None:
    sleep = RecordingSleep()
    client = OpenAIClient(base_url=f"http://127.0.0.1:{closed_port()}/v1", retry=FAST, sleep=sleep)
    with pytest.raises(ProviderError) as info:
        await client.chat("m", REQUEST)
    assert info.value.kind == "connection" and len(sleep.delays) == 2


async def test_slow_server_times_out_without_retry(loopback: LoopbackServer, api: str) -> None:
    loopback.script(Slow(30))
    sleep = RecordingSleep()
    with pytest.raises(ProviderError) as info:
        await make_client(api, loopback, sleep, timeout_s=0.3).chat("m", REQUEST)
    assert info.value.kind == "timeout"
    assert len(loopback.requests) == 1 and sleep.delays == []


async def test_per_call_timeout_overrides_the_default(loopback: LoopbackServer) -> None:
    loopback.script(Slow(30))
    client = make_client("openai", loopback, RecordingSleep(), timeout_s=60)
    with pytest.raises(ProviderError) as info:
        await client.chat("m", REQUEST, timeout_s=0.3)
    assert info.value.kind == "timeout"


async def test_circuit_breaker_opens_then_half_opens_after_cooldown(loopback: LoopbackServer, api: str) -> None:
    clock = Clock()
    breaker = CircuitBreaker(api, threshold=2, cooldown_s=60, clock=clock)
    client = make_client(api, loopback, RecordingSleep(), breaker=breaker, retry=RetryPolicy(max_attempts=1))
    loopback.default = Status(502)
    for _ in range(2):
        with pytest.raises(ProviderError):
            await client.chat("m", REQUEST)
    assert breaker.state == "open"
    with pytest.raises(ProviderError) as info:
        await client.chat("m", REQUEST)
    assert info.value.kind == "circuit_open"
    assert len(loopback.requests) == 2, "an open breaker must not touch the network"

    clock.advance(61)
    assert breaker.state == "half_open"
    with pytest.raises(ProviderError) as probe:  # the probe fails: open again for a fresh cooldown
        await client.chat("m", REQUEST)
    assert probe.value.kind == "server" and breaker.state == "open"

    clock.advance(61)
    loopback.default = Reply(text="back")
    assert reply_text(await client.chat("m", REQUEST)) == "back"
    assert breaker.state == "closed"


async def test_auth_and_bad_requests_do_not_trip_the_breaker(loopback: LoopbackServer) -> None:
    breaker = CircuitBreaker("openai", threshold=1, clock=Clock())
    client = make_client("openai", loopback, RecordingSleep(), breaker=breaker)
    loopback.script(Status(401), Status(400))
    for _ in range(2):
        with pytest.raises(ProviderError):
            await client.chat("m", REQUEST)
    assert breaker.state == "closed"


async def test_spend_guard_limits_calls_per_window_per_session(loopback: LoopbackServer) -> None:
    clock = Clock()
    guard = SpendGuard(max_calls=2, window_s=600, backoff_s=1800, clock=clock)
    client = make_client("openai", loopback, RecordingSleep(), spend_guard=guard)
    for _ in range(2):
        await client.chat("m", REQUEST)
    with pytest.raises(ProviderError) as info:
        await client.chat("m", REQUEST)
    assert info.value.kind == "spend_limit" and len(loopback.requests) == 2

    other = ModelRequest(system_prompt="", messages=[UserMessage(content="x")], session_key="agent:other")
    await client.chat("m", other)  # another session key has its own budget

    clock.advance(601)  # the window passed, but the backoff has not
    with pytest.raises(ProviderError):
        await client.chat("m", REQUEST)
    clock.advance(1800)
    await client.chat("m", REQUEST)

    for _ in range(2):
        await client.chat("m", other)
    with pytest.raises(ProviderError):
        await client.chat("m", other)
    guard.reset("agent:other")  # what a manual /compact does
    await client.chat("m", other)


async def test_fallback_provider_answers_when_the_primary_is_down(loopback: LoopbackServer) -> None:
    url = f"http://127.0.0.1:{closed_port()}/v1"
    down = OpenAIClient(base_url=url, retry=RetryPolicy(max_attempts=1), provider="ollama")
    backup = make_client("anthropic", loopback, RecordingSleep())
    model = OpenAIChatModel(down, "llama3", fallbacks=[(backup, "claude-test")])
    reply = await model.complete(REQUEST)
    assert reply.provider == "anthropic" and reply.model == "claude-test"
    assert [r.path for r in loopback.requests] == ["/v1/messages"]


async def test_fallback_is_not_tried_for_a_bad_request(loopback: LoopbackServer) -> None:
    primary = make_client("openai", loopback, RecordingSleep())
    backup = make_client("anthropic", loopback, RecordingSleep())
    loopback.script(Status(400, "messages: bad shape", "invalid_request_error"))
    with pytest.raises(ProviderError) as info:
        await OpenAIChatModel(primary, "m", fallbacks=[(backup, "c")]).complete(REQUEST)
    assert info.value.kind == "bad_request" and len(loopback.requests) == 1


async def test_all_fallbacks_failing_reports_every_attempt(loopback: LoopbackServer) -> None:
    loopback.default = Status(401, "invalid x-api-key", "authentication_error")
    primary = make_client("openai", loopback, RecordingSleep())
    backup = make_client("anthropic", loopback, RecordingSleep())
    with pytest.raises(ProviderError) as info:
        await OpenAIChatModel(primary, "m", fallbacks=[(backup, "c")]).complete(REQUEST)
    assert info.value.kind == "auth"
    assert [e.provider for e in info.value.attempts] == ["openai", "anthropic"]


@pytest.mark.parametrize(
    "message",
    [
        "This model's maximum context length is 8192 tokens. However, your messages resulted in 9000 tokens.",
        "prompt is too long: 210000 tokens > 200000 maximum",
        "the request exceeds the available context size, try increasing it",
    ],
)
async def test_context_overflow_becomes_context_overflow_error(
    loopback: LoopbackServer, api: str, message: str
) -> None:
    loopback.script(Status(400, message, "invalid_request_error"))
    client = make_client(api, loopback, RecordingSleep())
    with pytest.raises(ContextOverflowError) as info:
        await ChatModel(client, "m", context_window=8192).complete(REQUEST)
    assert message[:20] in info.value.detail
    assert len(loopback.requests) == 1


async def test_keys_never_appear_in_errors_or_reprs(loopback: LoopbackServer, api: str) -> None:
    key = "ak-secret-123" if api == "anthropic" else "sk-secret-123"
    loopback.script(Status(401, f"Incorrect API key provided: {key}", "authentication_error"))
    client = make_client(api, loopback, RecordingSleep())
    with pytest.raises(ProviderError) as info:
        await client.chat("m", REQUEST)
    assert key not in str(info.value) and key not in info.value.detail and "***" in info.value.detail
    transport = client.transport  # type: ignore[attr-defined]
    for text in (repr(client), repr(transport), repr(transport._api_key), str(transport._api_key)):
        assert key not in text
    header = "x-api-key" if api == "anthropic" else "authorization"
    assert key in loopback.requests[0].headers[header]


async def test_a_rate_limit_that_mentions_tokens_is_not_an_overflow(loopback: LoopbackServer) -> None:
    loopback.script(Status(429, "Request too large: too many tokens per minute", "rate_limit_error"), Reply())
    reply = await make_client("openai", loopback, RecordingSleep()).chat("m", REQUEST)
    assert reply_text(reply) == "ok" and len(loopback.requests) == 2


async def test_retry_after_as_an_http_date(loopback: LoopbackServer) -> None:
    sleep = RecordingSleep()
    loopback.script(Status(503, headers={"Retry-After": "Wed, 21 Oct 2015 07:28:00 GMT"}), Reply())
    await make_client("anthropic", loopback, sleep).chat("m", REQUEST)
    assert sleep.delays == [0.0], "a date in the past means: retry now"


async def test_half_open_admits_one_probe_at_a_time(loopback: LoopbackServer) -> None:
    clock = Clock()
    breaker = CircuitBreaker("openai", threshold=1, cooldown_s=10, clock=clock)
    client = make_client("openai", loopback, RecordingSleep(), breaker=breaker, retry=RetryPolicy(max_attempts=1))
    loopback.script(Status(500))
    with pytest.raises(ProviderError):
        await client.chat("m", REQUEST)
    clock.advance(11)
    loopback.script(Slow(0.3, Reply(text="probe ok")))
    probe = asyncio.create_task(client.chat("m", REQUEST))
    await loopback.wait_requests(2)  # the probe is on the wire
    with pytest.raises(ProviderError) as info:
        await client.chat("m", REQUEST)
    assert info.value.kind == "circuit_open"
    assert reply_text(await probe) == "probe ok" and breaker.state == "closed"


async def test_timeouts_trip_the_breaker(loopback: LoopbackServer) -> None:
    breaker = CircuitBreaker("anthropic", threshold=2, clock=Clock())
    client = make_client("anthropic", loopback, RecordingSleep(), breaker=breaker, timeout_s=0.2)
    loopback.default = Slow(30)
    for _ in range(2):
        with pytest.raises(ProviderError):
            await client.chat("m", REQUEST)
    assert breaker.state == "open"


async def test_a_cancelled_probe_releases_the_half_open_slot(loopback: LoopbackServer) -> None:
    clock = Clock()
    breaker = CircuitBreaker("openai", threshold=1, cooldown_s=10, clock=clock)
    client = make_client("openai", loopback, RecordingSleep(), breaker=breaker, retry=RetryPolicy(max_attempts=1))
    loopback.script(Status(500), Slow(30))
    with pytest.raises(ProviderError):
        await client.chat("m", REQUEST)
    clock.advance(11)
    probe = asyncio.create_task(client.chat("m", REQUEST))
    await loopback.wait_requests(2)
    probe.cancel()
    with pytest.raises(asyncio.CancelledError):
        await probe
    assert reply_text(await client.chat("m", REQUEST)) == "ok", "the next call may probe"
