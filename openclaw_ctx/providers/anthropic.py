"""Anthropic Messages API over httpx: POST ``{base_url}/v1/messages``."""

from __future__ import annotations

import json
from typing import Any

from openclaw_ctx.contract.model import ModelRequest
from openclaw_ctx.messages import AssistantMessage
from openclaw_ctx.providers.convert_anthropic import anthropic_response, anthropic_tools, to_anthropic_messages
from openclaw_ctx.providers.http import ChatClient, ChatModel, ProviderTransport, Secret

__all__ = ["ANTHROPIC_BASE_URL", "ANTHROPIC_VERSION", "AnthropicClient", "AnthropicModel"]

ANTHROPIC_BASE_URL = "https://api.anthropic.com"
ANTHROPIC_VERSION = "2023-06-01"
DEFAULT_MAX_TOKENS = 4096


def _x_api_key(key: str) -> dict[str, str]:
    return {"x-api-key": key}


class AnthropicClient:
    """A Messages API endpoint.

    Args:
        base_url: without the ``/v1`` segment, e.g. ``https://api.anthropic.com``.
        api_key: sent as ``x-api-key``.
        provider: the name replies and summaries carry.
        max_tokens: used when a request sets no ``max_output_tokens`` (the API requires one).
        extra_body: merged into every request body (e.g. ``{"thinking": {...}}``).
        **transport: ProviderTransport options (timeout_s, retry, breaker, spend_guard, http_client, …).
    """

    api = "anthropic-messages"

    def __init__(
        self,
        *,
        base_url: str = ANTHROPIC_BASE_URL,
        api_key: Secret | str | None = None,
        provider: str = "anthropic",
        max_tokens: int = DEFAULT_MAX_TOKENS,
        extra_body: dict[str, Any] | None = None,
        **transport: Any,
    ) -> None:
        key = Secret(api_key) if isinstance(api_key, str) else api_key
        self.name = provider
        self.max_tokens = max_tokens
        self.transport = ProviderTransport(
            provider=provider,
            base_url=base_url,
            api_key=key,
            auth_headers=_x_api_key,
            headers={"anthropic-version": ANTHROPIC_VERSION},
            **transport,
        )
        self._extra_body = dict(extra_body or {})

    def __repr__(self) -> str:
        return f"AnthropicClient(provider={self.name!r}, base_url={self.transport.base_url!r})"

    async def chat(self, model: str, request: ModelRequest, *, timeout_s: float | None = None) -> AssistantMessage:
        """The model's reply to `request`.

        Raises:
            ProviderError: the call failed (see its `kind`).
        """
        body: dict[str, Any] = {
            "model": model,
            "max_tokens": request.max_output_tokens or self.max_tokens,
            "messages": to_anthropic_messages(request.messages),
            **self._extra_body,
        }
        if request.system_prompt:
            body["system"] = request.system_prompt
        if request.tools:
            body["tools"] = anthropic_tools(request.tools)

        def parse(data: dict[str, Any]) -> AssistantMessage:
            if data.get("type") == "error":
                raise self.transport.classify(None, json.dumps(data))
            return anthropic_response(data, provider=self.name, api=self.api, model=model)

        return await self.transport.post_json(
            "/v1/messages", body, parse=parse, session_key=request.session_key, timeout_s=timeout_s
        )


class AnthropicModel(ChatModel):
    """A Model served through the Messages API (``fallbacks``: ``(client, model id)`` pairs tried in order)."""

    def __init__(
        self,
        client: AnthropicClient,
        model: str,
        *,
        context_window: int = 200_000,
        fallbacks: list[tuple[ChatClient, str]] | None = None,
    ) -> None:
        super().__init__(client, model, context_window=context_window, fallbacks=fallbacks or ())
