"""Server → client requests, and the ``host`` summarizer that summarises through ``host/llmComplete``.

Server request ids are strings (``"s1"``, ``"s2"``, …) so they never collide with the client's numeric ids.
The client answers them on stdin like any response; :meth:`ClientRequests.resolve` hands the answer to
the waiting call. A request the client never answers times out; at shutdown pending ones fail.
"""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import Callable
from typing import Any

from openclaw_ctx.errors import SummarizerError
from openclaw_ctx.host.serve.protocol import Incoming, request_line
from openclaw_ctx.summarize.base import SummaryOutput, SummaryRequest

__all__ = ["HOST_LLM_METHOD", "ClientRequests", "HostSummarizer"]

HOST_LLM_METHOD = "host/llmComplete"
DEFAULT_TIMEOUT_S = 120.0


class ClientRequestError(SummarizerError):
    """The client answered a server request with an error, or not at all."""


class ClientRequests:
    """The server's requests to the client that await an answer."""

    def __init__(self, send: Callable[[bytes], None]) -> None:
        self._send = send
        self._ids = itertools.count(1)
        self._pending: dict[str, asyncio.Future[Any]] = {}

    async def request(self, method: str, params: dict[str, Any], timeout_s: float) -> Any:
        """Send `method` to the client and return its result.

        Raises:
            ClientRequestError: the client answered with an error, or not within `timeout_s`.
        """
        request_id = f"s{next(self._ids)}"
        future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self._pending[request_id] = future
        try:
            self._send(request_line(request_id, method, params))
            async with asyncio.timeout(timeout_s):
                return await future
        except TimeoutError:
            raise ClientRequestError(f"{method}: no answer from the client within {timeout_s:g}s") from None
        finally:
            self._pending.pop(request_id, None)

    def resolve(self, message: Incoming) -> bool:
        """Hand a client response to its waiting request; False when no request has that id."""
        future = self._pending.get(message.id) if isinstance(message.id, str) else None
        if future is None or future.done():
            return False
        if message.error is not None:
            error = message.error if isinstance(message.error, dict) else {"message": str(message.error)}
            future.set_exception(ClientRequestError(f"the client answered: {error.get('message', error)}"))
        else:
            future.set_result(message.result)
        return True

    def fail_all(self, reason: str) -> None:
        """Fail every pending request (the client is gone)."""
        for future in self._pending.values():
            if not future.done():
                future.set_exception(ClientRequestError(reason))


class HostSummarizer:
    """Summaries by the host's own model (``runtimeContext.llm.complete``), so no extra keys are needed."""

    name = "host"

    def __init__(self, requests: ClientRequests, available: Callable[[], bool]) -> None:
        self._requests = requests
        self._available = available

    async def summarize(self, request: SummaryRequest) -> SummaryOutput:
        """Ask the client's host model for the summary.

        Raises:
            SummarizerError: the client did not offer its model (``hostLlm``), failed, or answered no text.
        """
        if not self._available():
            raise SummarizerError("summarizer 'host' needs the client's model (initialize with hostLlm: true)")
        params: dict[str, Any] = {"prompt": request.prompt or request.source_text, "maxTokens": request.target_tokens}
        if request.system_prompt:
            params["system"] = request.system_prompt
        result = await self._requests.request(HOST_LLM_METHOD, params, request.timeout_s or DEFAULT_TIMEOUT_S)
        text = result.get("text") if isinstance(result, dict) else None
        if not isinstance(text, str) or not text.strip():
            raise SummarizerError(f"{HOST_LLM_METHOD} answered no text")
        return SummaryOutput(text=text, summarizer="host")
