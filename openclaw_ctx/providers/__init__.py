"""Real model providers: OpenAI-compatible Chat Completions and Anthropic Messages, over httpx.

Why httpx and not the vendors' SDKs:

* **One code path for every OpenAI-compatible server.** Ollama, vLLM, llama.cpp and LM Studio speak
  Chat Completions but each differs a little (``max_tokens`` vs ``max_completion_tokens``,
  ``reasoning_content``, error bodies). Owning the request and the response parsing lets us absorb those
  differences in one place instead of fighting an SDK's stricter types.
* **Full control over faults.** The SDKs retry on their own schedule, with their own timeouts. Our
  fault policy — per-call deadline, exponential backoff with jitter honouring ``Retry-After``, no retry on
  400/401/403, a circuit breaker per provider, a spend guard per session key, a fallback list — lives in
  one module (:mod:`.resilience`, :mod:`.http`) and behaves the same for every provider.
* **Fewer dependencies.** httpx is already required; the two SDKs would add their own dependency trees
  and release cadences for the two endpoints we use.
* **Testable through real sockets.** The tests run a real HTTP server on 127.0.0.1 that speaks both wire
  formats and can misbehave on cue (slow, 429 + Retry-After, 500, 401, malformed JSON, empty content,
  a connection cut mid-response); nothing of ours is patched.

Public API: :class:`OpenAIClient`/:class:`OpenAIChatModel`, :class:`AnthropicClient`/:class:`AnthropicModel`
(both Models implement ``openclaw_ctx.contract.model.Model``), :class:`ProviderTransport`, :class:`RetryPolicy`,
:class:`CircuitBreaker`, :class:`SpendGuard`, :class:`ProviderError`, :class:`Secret`, and in
:mod:`.settings` ``resolve_model``. The summarizer is ``openclaw_ctx.summarize.llm.LLMSummarizer``, built
from the configuration by ``openclaw_ctx.summarize.settings.resolve_summarizer``.
"""

from __future__ import annotations

from openclaw_ctx.providers.anthropic import AnthropicClient, AnthropicModel
from openclaw_ctx.providers.http import ChatClient, ChatModel, ProviderTransport, Secret
from openclaw_ctx.providers.openai import OpenAIChatModel, OpenAIClient
from openclaw_ctx.providers.resilience import CircuitBreaker, ProviderError, RetryPolicy, SpendGuard, first_available

__all__ = [
    "AnthropicClient",
    "AnthropicModel",
    "ChatClient",
    "ChatModel",
    "CircuitBreaker",
    "OpenAIChatModel",
    "OpenAIClient",
    "ProviderError",
    "ProviderTransport",
    "RetryPolicy",
    "Secret",
    "SpendGuard",
    "first_available",
]
