"""OpenAI Chat Completions over httpx: OpenAI itself and every compatible server (Ollama, vLLM, llama.cpp,
LM Studio, …) through ``base_url``.
"""

from __future__ import annotations

import json
from typing import Any
from urllib.parse import urlsplit

from openclaw_ctx.contract.model import ModelRequest
from openclaw_ctx.messages import AssistantMessage
from openclaw_ctx.providers.convert import openai_response, openai_tools, to_openai_messages
from openclaw_ctx.providers.http import ChatClient, ChatModel, ProviderTransport, Secret

__all__ = ["OPENAI_BASE_URL", "OpenAIChatModel", "OpenAIClient"]

OPENAI_BASE_URL = "https://api.openai.com/v1"


class OpenAIClient:
    """A Chat Completions endpoint: POST ``{base_url}/chat/completions``.

    Args:
        base_url: up to and including the version segment, e.g. ``http://127.0.0.1:11434/v1``.
        api_key: sent as ``Authorization: Bearer``; optional for local servers.
        provider: the name replies and summaries carry ("openai", "ollama", "vllm", …).
        extra_body: merged into every request body (e.g. ``{"temperature": 0}``).
        **transport: ProviderTransport options (timeout_s, retry, breaker, spend_guard, http_client, …).
    """

    api = "openai-completions"

    def __init__(
        self,
        *,
        base_url: str = OPENAI_BASE_URL,
        api_key: Secret | str | None = None,
        provider: str = "openai",
        extra_body: dict[str, Any] | None = None,
        **transport: Any,
    ) -> None:
        key = Secret(api_key) if isinstance(api_key, str) else api_key
        self.name = provider
        self.transport = ProviderTransport(provider=provider, base_url=base_url, api_key=key, **transport)
        self._extra_body = dict(extra_body or {})
        # OpenAI's own API wants max_completion_tokens (reasoning models reject max_tokens); servers that
        # imitate it mostly know only max_tokens.
        self._max_tokens_field = (
            "max_completion_tokens" if urlsplit(base_url).hostname == "api.openai.com" else "max_tokens"
        )

    def __repr__(self) -> str:
        return f"OpenAIClient(provider={self.name!r}, base_url={self.transport.base_url!r})"

    async def chat(self, model: str, request: ModelRequest, *, timeout_s: float | None = None) -> AssistantMessage:
        """The model's reply to `request`.

        Raises:
            ProviderError: the call failed (see its `kind`).
        """
        body: dict[str, Any] = {
            "model": model,
            "messages": to_openai_messages(request.system_prompt, request.messages),
            **self._extra_body,
        }
        if request.tools:
            body["tools"] = openai_tools(request.tools)
        if request.max_output_tokens:
            body[self._max_tokens_field] = request.max_output_tokens

        def parse(data: dict[str, Any]) -> AssistantMessage:
            if "choices" not in data and "error" in data:
                raise self.transport.classify(None, json.dumps(data))
            return openai_response(data, provider=self.name, api=self.api, model=model)

        return await self.transport.post_json(
            "/chat/completions", body, parse=parse, session_key=request.session_key, timeout_s=timeout_s
        )


class OpenAIChatModel(ChatModel):
    """A Model served through Chat Completions (``fallbacks``: ``(client, model id)`` pairs tried in order)."""

    def __init__(
        self,
        client: OpenAIClient,
        model: str,
        *,
        context_window: int = 128_000,
        fallbacks: list[tuple[ChatClient, str]] | None = None,
    ) -> None:
        super().__init__(client, model, context_window=context_window, fallbacks=fallbacks or ())
