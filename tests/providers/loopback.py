"""A real HTTP server on 127.0.0.1:0 that speaks OpenAI Chat Completions and Anthropic Messages.

Each request takes the next scripted behaviour (or the default, a normal reply): answer normally, answer
slowly, answer with an error status (429 + Retry-After, 500, 401, …), send malformed JSON, send empty
content, or cut the connection halfway through the body. Every request is recorded (path, headers, JSON
body) so tests can assert what went over the wire. The wire JSON here is written by hand from the APIs'
documentation, independently of the code under test.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

__all__ = [
    "Clock",
    "Cut",
    "Empty",
    "Malformed",
    "Raw",
    "Recorded",
    "RecordingSleep",
    "Reply",
    "Slow",
    "Status",
    "LoopbackServer",
    "serve",
]

OPENAI_PATH = "/v1/chat/completions"
ANTHROPIC_PATH = "/v1/messages"


@dataclass
class Reply:
    """A normal answer; `text` may be a function of the request body (e.g. to echo the last user turn)."""

    text: str | Callable[[dict[str, Any]], str] = "ok"
    thinking: str | None = None
    tool_calls: list[tuple[str, str, dict[str, Any]]] = field(default_factory=list)
    usage: tuple[int, int] = (11, 7)
    cached: int = 0
    model: str | None = None


@dataclass
class Slow:
    """Wait `seconds` before behaving like `then`."""

    seconds: float
    then: Any = field(default_factory=Reply)


@dataclass
class Status:
    """An error status with the API's error body."""

    code: int
    message: str = "something went wrong"
    error_type: str = "api_error"
    headers: dict[str, str] = field(default_factory=dict)


@dataclass
class Malformed:
    """A 200 whose body is not JSON."""

    body: bytes = b'{"id": "x", "choices": [ {"message": '


@dataclass
class Empty:
    """A 200 with empty content (OpenAI: content ""; Anthropic: no content blocks)."""


@dataclass
class Cut:
    """Headers promising a body, part of it, then the connection closes."""


@dataclass
class Raw:
    """Any status and JSON body."""

    code: int
    body: Any


@dataclass
class Recorded:
    """One request as the server saw it."""

    path: str
    headers: dict[str, str]
    body: Any


class Clock:
    """A manual clock for breaker and spend-guard tests."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


class RecordingSleep:
    """Records requested backoff delays and yields instead of waiting them out."""

    def __init__(self) -> None:
        self.delays: list[float] = []

    async def __call__(self, seconds: float) -> None:
        self.delays.append(seconds)
        await asyncio.sleep(0)


def _last_user_text(body: dict[str, Any]) -> str:
    for message in reversed(body.get("messages") or []):
        if message.get("role") != "user":
            continue
        content = message.get("content")
        if isinstance(content, str):
            return content
        texts = [p.get("text", "") for p in content or [] if p.get("type") == "text"]
        if texts:
            return "\n".join(texts)
    return ""


def _openai_body(reply: Reply, request: dict[str, Any], empty: bool) -> dict[str, Any]:
    text = reply.text(request) if callable(reply.text) else reply.text
    message: dict[str, Any] = {"role": "assistant", "content": "" if empty else text}
    if reply.thinking and not empty:
        message["reasoning_content"] = reply.thinking
    if reply.tool_calls and not empty:
        message["tool_calls"] = [
            {"id": cid, "type": "function", "function": {"name": name, "arguments": json.dumps(args)}}
            for cid, name, args in reply.tool_calls
        ]
    prompt, completion = reply.usage
    return {
        "id": "chatcmpl-loopback",
        "object": "chat.completion",
        "created": 1700000000,
        "model": reply.model or request.get("model", "unknown"),
        "choices": [
            {"index": 0, "message": message, "finish_reason": "tool_calls" if message.get("tool_calls") else "stop"}
        ],
        "usage": {
            "prompt_tokens": prompt,
            "completion_tokens": completion,
            "total_tokens": prompt + completion,
            "prompt_tokens_details": {"cached_tokens": reply.cached},
        },
    }


def _anthropic_body(reply: Reply, request: dict[str, Any], empty: bool) -> dict[str, Any]:
    text = reply.text(request) if callable(reply.text) else reply.text
    content: list[dict[str, Any]] = []
    if not empty:
        if reply.thinking:
            content.append({"type": "thinking", "thinking": reply.thinking, "signature": "sig-loopback"})
        if text:
            content.append({"type": "text", "text": text})
        content += [{"type": "tool_use", "id": cid, "name": n, "input": a} for cid, n, a in reply.tool_calls]
    prompt, completion = reply.usage
    return {
        "id": "msg_loopback",
        "type": "message",
        "role": "assistant",
        "model": reply.model or request.get("model", "unknown"),
        "content": content,
        "stop_reason": "tool_use" if reply.tool_calls and not empty else "end_turn",
        "stop_sequence": None,
        "usage": {
            "input_tokens": prompt,
            "output_tokens": completion,
            "cache_read_input_tokens": reply.cached,
            "cache_creation_input_tokens": 0,
        },
    }


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: _Server

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - the stdlib's signature
        return

    def do_POST(self) -> None:
        raw = self.rfile.read(int(self.headers.get("content-length") or 0))
        try:
            body: Any = json.loads(raw)
        except ValueError:
            body = raw.decode("utf-8", "replace")
        headers = {k.lower(): v for k, v in self.headers.items()}
        owner = self.server.owner
        with owner.arrived:
            owner.requests.append(Recorded(self.path, headers, body))
            behaviour = owner.queue.pop(0) if owner.queue else owner.default
            owner.arrived.notify_all()
        try:
            self._behave(behaviour, body if isinstance(body, dict) else {})
        except (BrokenPipeError, ConnectionResetError):
            pass  # the client gave up (a timeout test); nothing to answer

    def _behave(self, behaviour: Any, request: dict[str, Any]) -> None:
        anthropic = self.path == ANTHROPIC_PATH
        if self.path not in (OPENAI_PATH, ANTHROPIC_PATH):
            return self._send(404, {"error": {"message": f"no route {self.path}", "type": "not_found"}})
        if isinstance(behaviour, Slow):
            if self.server.owner.stopping.wait(behaviour.seconds):
                return None
            return self._behave(behaviour.then, request)
        if isinstance(behaviour, Status):
            error = {"type": behaviour.error_type, "message": behaviour.message}
            body = {"type": "error", "error": error} if anthropic else {"error": {**error, "code": None}}
            return self._send(behaviour.code, body, behaviour.headers)
        if isinstance(behaviour, Raw):
            return self._send(behaviour.code, behaviour.body)
        if isinstance(behaviour, Malformed):
            return self._send_bytes(200, behaviour.body)
        if isinstance(behaviour, Cut):
            payload = json.dumps(_anthropic_body(Reply(), request, False)).encode()
            self.send_response(200)
            self.send_header("content-type", "application/json")
            self.send_header("content-length", str(len(payload)))
            self.end_headers()
            self.wfile.write(payload[: len(payload) // 3])
            self.wfile.flush()
            self.close_connection = True
            return None
        reply = behaviour if isinstance(behaviour, Reply) else Reply()
        build = _anthropic_body if anthropic else _openai_body
        return self._send(200, build(reply, request, isinstance(behaviour, Empty)))

    def _send(self, code: int, body: Any, headers: dict[str, str] | None = None) -> None:
        self._send_bytes(code, json.dumps(body).encode(), headers)

    def _send_bytes(self, code: int, payload: bytes, headers: dict[str, str] | None = None) -> None:
        self.send_response(code)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(payload)))
        for key, value in (headers or {}).items():
            self.send_header(key, value)
        self.end_headers()
        self.wfile.write(payload)


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    block_on_close = False
    owner: LoopbackServer

    def handle_error(self, request: Any, client_address: Any) -> None:
        return  # a client that hung up mid-test is expected here


class LoopbackServer:
    """Start with :meth:`start`, script with :meth:`script`, inspect :attr:`requests`, stop with :meth:`stop`."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.arrived = threading.Condition(self.lock)
        self.stopping = threading.Event()
        self.requests: list[Recorded] = []
        self.queue: list[Any] = []
        self.default: Any = Reply()
        self._server = _Server(("127.0.0.1", 0), _Handler)
        self._server.owner = self
        self._thread = threading.Thread(target=self._server.serve_forever, kwargs={"poll_interval": 0.05})

    @property
    def port(self) -> int:
        return int(self._server.server_address[1])

    @property
    def base_url(self) -> str:
        """For Anthropic clients (the path adds ``/v1/messages``)."""
        return f"http://127.0.0.1:{self.port}"

    @property
    def openai_url(self) -> str:
        """For OpenAI-compatible clients (the path adds ``/chat/completions``)."""
        return f"http://127.0.0.1:{self.port}/v1"

    def script(self, *behaviours: Any) -> None:
        """Queue behaviours for the next requests, in order."""
        with self.lock:
            self.queue.extend(behaviours)

    async def wait_requests(self, count: int, timeout_s: float = 10.0) -> None:
        """Return once `count` requests have arrived (e.g. a slow call is on the wire)."""

        def wait() -> bool:
            with self.arrived:
                return self.arrived.wait_for(lambda: len(self.requests) >= count, timeout_s)

        if not await asyncio.to_thread(wait):
            raise TimeoutError(f"only {len(self.requests)} of {count} requests arrived")

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self.stopping.set()
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=5)


@contextlib.contextmanager
def serve() -> Iterator[LoopbackServer]:
    """A running LoopbackServer, stopped on exit (each test module's `loopback` fixture wraps this)."""
    server = LoopbackServer()
    server.start()
    try:
        yield server
    finally:
        server.stop()
