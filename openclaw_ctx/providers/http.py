"""The HTTP side every provider shares: one JSON POST under a deadline, with retries, breaker and spend guard.

A logical call goes: spend guard (calls per window per session key) → circuit breaker (fail fast while a
provider is known to be down) → up to ``RetryPolicy.max_attempts`` HTTP attempts, each under a hard deadline.
Retried: 408/409/429/5xx, connection errors (refused, reset, cut mid-response) and unparseable bodies, with
exponential backoff and jitter, or exactly the server's ``retry-after-ms``/``Retry-After`` when it sends one.
Not retried: 400/401/403/404 and the other 4xx (the same request fails the same way), exhausted quota, and
timeouts (a server slow once is likely slow again; repeating would multiply the caller's wait, so the
fallback list takes over instead).

Every failure is a :class:`~.resilience.ProviderError` whose ``kind`` says what happened; :class:`ChatModel`
maps ``context_overflow`` onto ContextOverflowError, the LLM summarizer maps ``auth`` onto SummarizerAuthError.
"""

from __future__ import annotations

import asyncio
import email.utils
import functools
import json
import random
import re
import ssl
from collections.abc import Awaitable, Callable, Mapping, Sequence
from datetime import UTC, datetime
from typing import Any, Protocol, TypeVar, runtime_checkable

import httpx

from openclaw_ctx.contract.model import ModelRequest
from openclaw_ctx.errors import ContextOverflowError
from openclaw_ctx.messages import AssistantMessage
from openclaw_ctx.providers.resilience import (
    RETRYABLE,
    TRIPS_BREAKER,
    CircuitBreaker,
    ProviderError,
    ProviderErrorKind,
    RetryPolicy,
    SpendGuard,
    first_available,
)

__all__ = ["ChatClient", "ChatModel", "ProviderTransport", "Secret", "bearer_auth"]

T = TypeVar("T")

_OVERFLOW = re.compile(
    r"context[_ ]length|maximum context|context window|prompt is too long|too many tokens|"
    r"exceeds the available context|input is too long|request too large|context size",
    re.IGNORECASE,
)
_RETRY_STATUS = frozenset({408, 409})


class Secret:
    """An API key held in memory only: never in repr/str, never pickled; `reveal()` is the one way out."""

    __slots__ = ("_value",)

    def __init__(self, value: str) -> None:
        self._value = value

    def reveal(self) -> str:
        """The key itself, for building a request header."""
        return self._value

    def scrub(self, text: str) -> str:
        """`text` with the key masked, for error messages that might echo it."""
        return text.replace(self._value, "***") if self._value else text

    def __repr__(self) -> str:
        return "Secret('***')"

    __str__ = __repr__

    def __reduce__(self) -> Any:
        raise TypeError("Secret cannot be pickled")


@functools.cache
def _ssl_context() -> ssl.SSLContext:
    # Building the CA bundle costs ~100 ms; a per-call client must not pay it every time.
    return httpx.create_ssl_context()


def bearer_auth(key: str) -> dict[str, str]:
    """``Authorization: Bearer <key>`` (OpenAI and compatible servers)."""
    return {"Authorization": f"Bearer {key}"}


class ProviderTransport:
    """POSTs JSON to one provider with the fault handling described in the module docstring.

    Without an injected `http_client`, each logical call opens its own short-lived client, so there is
    nothing to close (the Model and Summarizer protocols have no close) and an LLM call's seconds dwarf the
    handshake. Inject a long-lived ``httpx.AsyncClient`` (which you own) to reuse connections.
    `sleep` and `rng` are injectable so tests can record backoff delays instead of waiting them out.
    """

    def __init__(
        self,
        *,
        provider: str,
        base_url: str,
        api_key: Secret | None = None,
        auth_headers: Callable[[str], dict[str, str]] = bearer_auth,
        headers: Mapping[str, str] | None = None,
        timeout_s: float = 60.0,
        connect_timeout_s: float = 10.0,
        retry: RetryPolicy | None = None,
        breaker: CircuitBreaker | None = None,
        spend_guard: SpendGuard | None = None,
        http_client: httpx.AsyncClient | None = None,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
        rng: random.Random | None = None,
    ) -> None:
        self.provider = provider
        self.base_url = base_url.rstrip("/")
        self._api_key = api_key
        self._auth_headers = auth_headers
        self._headers = dict(headers or {})
        self.timeout_s = timeout_s
        self.connect_timeout_s = connect_timeout_s
        self.retry = retry or RetryPolicy()
        self.breaker = breaker or CircuitBreaker(provider)
        self.spend_guard = spend_guard
        self._http_client = http_client
        self._sleep = sleep
        self._rng = rng or random.Random()

    def __repr__(self) -> str:
        return f"ProviderTransport(provider={self.provider!r}, base_url={self.base_url!r})"

    async def post_json(
        self,
        path: str,
        body: dict[str, Any],
        *,
        parse: Callable[[dict[str, Any]], T],
        session_key: str | None = None,
        timeout_s: float | None = None,
    ) -> T:
        """POST `body` to ``base_url + path`` and return ``parse(response JSON)``.

        Raises:
            ProviderError: after the retries are spent, or at once for a failure not worth retrying.
        """
        if self.spend_guard is not None:
            self.spend_guard.admit(session_key, self.provider)
        self.breaker.before_call()
        try:
            if self._http_client is not None:
                result = await self._with_retries(self._http_client, path, body, parse, timeout_s)
            else:
                async with httpx.AsyncClient(verify=_ssl_context()) as client:
                    result = await self._with_retries(client, path, body, parse, timeout_s)
        except ProviderError as err:
            self.breaker.record("failure" if err.kind in TRIPS_BREAKER else "neutral")
            raise
        except BaseException:
            self.breaker.record("neutral")
            raise
        self.breaker.record("success")
        if self.spend_guard is not None:
            self.spend_guard.record(session_key)
        return result

    async def _with_retries(
        self,
        client: httpx.AsyncClient,
        path: str,
        body: dict[str, Any],
        parse: Callable[[dict[str, Any]], T],
        timeout_s: float | None,
    ) -> T:
        attempt = 0
        while True:
            attempt += 1
            try:
                return await self._attempt(client, path, body, parse, timeout_s or self.timeout_s)
            except ProviderError as err:
                wait = self.retry.delay(attempt, err.retry_after, self._rng) if err.kind in RETRYABLE else None
                if wait is None:
                    if attempt > 1:
                        err.detail = f"{err.detail} (after {attempt} attempts)"
                        err.args = (err.detail,)
                    raise
                await self._sleep(wait)

    async def _attempt(
        self,
        client: httpx.AsyncClient,
        path: str,
        body: dict[str, Any],
        parse: Callable[[dict[str, Any]], T],
        timeout_s: float,
    ) -> T:
        headers = {"content-type": "application/json", **self._headers}
        if self._api_key is not None:
            headers.update(self._auth_headers(self._api_key.reveal()))
        timeout = httpx.Timeout(timeout_s, connect=min(timeout_s, self.connect_timeout_s))
        try:
            # httpx's timeouts are per socket operation; the outer deadline bounds a server that trickles bytes.
            async with asyncio.timeout(timeout_s):
                response = await client.post(self.base_url + path, json=body, headers=headers, timeout=timeout)
        except (TimeoutError, httpx.TimeoutException) as exc:
            raise self.error(f"no complete response within {timeout_s:g}s", "timeout") from exc
        except httpx.TransportError as exc:
            raise self.error(f"connection failed: {type(exc).__name__}: {exc}", "connection") from exc
        if response.status_code >= 400:
            raise self.classify(response.status_code, response.text, response.headers)
        try:
            data = json.loads(response.content)
        except (ValueError, UnicodeDecodeError) as exc:
            raise self.error(f"response is not JSON: {response.text[:120]!r}", "malformed") from exc
        if not isinstance(data, dict):
            raise self.error(f"expected a JSON object, got {type(data).__name__}", "malformed")
        try:
            return parse(data)
        except ProviderError:
            raise
        except (KeyError, IndexError, TypeError, ValueError) as exc:
            raise self.error(f"unexpected response shape ({type(exc).__name__}: {exc})", "malformed") from exc

    def error(self, detail: str, kind: ProviderErrorKind, **extra: Any) -> ProviderError:
        """A ProviderError for this provider, with the key scrubbed from the text."""
        text = self._api_key.scrub(detail) if self._api_key is not None else detail
        return ProviderError(f"{self.provider}: {text}", kind=kind, provider=self.provider, **extra)

    def classify(self, status: int | None, text: str, headers: Mapping[str, str] | None = None) -> ProviderError:
        """The ProviderError for an error response (`status` None: an error object inside a 200)."""
        message = _error_message(text)
        detail = f"HTTP {status}: {message}" if status is not None else f"error response: {message}"
        kind: ProviderErrorKind
        if status in (401, 403) or (status is None and re.search(r"authenticat|api[ _-]?key", message, re.I)):
            kind = "auth"
        elif _OVERFLOW.search(message) and (status is None or (status < 500 and status != 429)):
            kind = "context_overflow"
        elif status == 429 and re.search(r"insufficient_quota|quota|billing|credit balance", message, re.I):
            kind = "quota"
        elif status == 429:
            kind = "rate_limit"
        elif status is not None and (status >= 500 or status in _RETRY_STATUS):
            kind = "server"
        else:
            kind = "bad_request"
        return self.error(detail, kind, status=status, retry_after=_retry_after(headers or {}))


def _error_message(text: str) -> str:
    """The human part of an error body (`error.message` plus type/code in both APIs), else the raw text."""
    try:
        data = json.loads(text)
    except ValueError:
        return text.strip()[:300] or "(empty body)"
    error = data.get("error") if isinstance(data, dict) else None
    if isinstance(error, dict):
        tags = [str(error[k]) for k in ("type", "code") if error.get(k)]
        message = str(error.get("message", ""))
        return f"{message} [{', '.join(tags)}]" if tags else message
    if isinstance(error, str):
        return error
    return text.strip()[:300]


def _retry_after(headers: Mapping[str, str]) -> float | None:
    """Seconds from ``retry-after-ms`` or ``Retry-After`` (delta-seconds or an HTTP date)."""
    millis = headers.get("retry-after-ms")
    if millis:
        try:
            return max(0.0, float(millis) / 1000)
        except ValueError:
            pass
    value = headers.get("retry-after")
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(0.0, (when - datetime.now(UTC)).total_seconds())


@runtime_checkable
class ChatClient(Protocol):
    """One provider's chat endpoint: `name` is the provider ("openai", "ollama", "anthropic", …)."""

    name: str
    api: str

    async def chat(self, model: str, request: ModelRequest, *, timeout_s: float | None = None) -> AssistantMessage:
        """The model's reply to `request`.

        Raises:
            ProviderError: the call failed (see its `kind`).
        """
        ...


class ChatModel:
    """A Model (``openclaw_ctx.contract.model.Model``) backed by a ChatClient, with an optional fallback list.

    Each fallback is a ``(client, model id)`` pair tried in order when the primary fails in a way another
    provider could fix. The reply's ``provider``/``model`` name whoever actually answered.
    """

    def __init__(
        self,
        client: ChatClient,
        model: str,
        *,
        context_window: int,
        fallbacks: Sequence[tuple[ChatClient, str]] = (),
    ) -> None:
        self.client = client
        self.name = model
        self.provider = client.name
        self.context_window = context_window
        self.targets: list[tuple[ChatClient, str]] = [(client, model), *fallbacks]

    def __repr__(self) -> str:
        return f"{type(self).__name__}(provider={self.provider!r}, model={self.name!r})"

    async def complete(self, request: ModelRequest) -> AssistantMessage:
        """The model's next assistant message.

        Raises:
            ContextOverflowError: the provider says the prompt is larger than the model's window.
            ProviderError: any other failure, after retries and fallbacks.
        """
        try:
            _, reply = await first_available(self.targets, lambda t: t[0].chat(t[1], request))
        except ProviderError as err:
            if err.kind == "context_overflow":
                raise ContextOverflowError(err.detail) from err
            raise
        return reply
