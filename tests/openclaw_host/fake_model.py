"""A loopback OpenAI-compatible chat-completions model for driving the real OpenClaw host.

Streams SSE (``stream: true``) or answers plain JSON, logs every request body it received as one JSON
line in ``log_path``, and answers a user message that contains ``TOOL_MARKER`` with a tool call (to a
tool the request offered) before its text reply. Runs in a thread of the test process.
"""

from __future__ import annotations

import json
import re
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

TOOL_MARKER = "[[call-a-tool]]"
INTERNAL = "<<<BEGIN_OPENCLAW_INTERNAL_CONTEXT>>>"
# Tools the fake model prefers to call, in order: harmless reads inside the agent's workspace.
PREFERRED_TOOLS = ("session_status", "read", "ls", "list_files", "memory_search")
MODEL_ID = "fake-1"


def _text_of(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return " ".join(str(p.get("text", "")) for p in content if isinstance(p, dict))
    return ""


def _prompt_text(text: str) -> str:
    """The user's words: without the host's ``[timestamp]`` prefix and ``Runtime:`` trailer."""
    text = re.sub(r"^\[[^\]]*\]\s*", "", text)
    return text.split("\n\nRuntime:", 1)[0].strip()


def _tool_args(name: str) -> dict[str, Any]:
    if name in ("read",):
        return {"path": "AGENTS.md"}
    if name in ("ls", "list_files"):
        return {"path": "."}
    if name == "memory_search":
        return {"query": "fake"}
    return {}


class FakeModel:
    """``with FakeModel(log) as m: m.base_url`` — ``m.requests()`` reads back what it received."""

    def __init__(self, log_path: Path, host: str = "127.0.0.1", port: int = 0) -> None:
        self.log_path = log_path
        self._lock = threading.Lock()
        self._count = 0
        outer = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - stdlib signature
                return

            def do_GET(self) -> None:  # noqa: N802 - stdlib name
                if self.path.rstrip("/").endswith("/models"):
                    self._json({"object": "list", "data": [{"id": MODEL_ID, "object": "model"}]})
                else:
                    self._json({"error": {"message": "not found"}}, status=404)

            def do_POST(self) -> None:  # noqa: N802 - stdlib name
                length = int(self.headers.get("content-length") or 0)
                raw = self.rfile.read(length) if length else b""
                try:
                    body = json.loads(raw or b"{}")
                except ValueError:
                    self._json({"error": {"message": "bad json"}}, status=400)
                    return
                n = outer._record(self.path, dict(self.headers), body)
                if not self.path.rstrip("/").endswith("/chat/completions"):
                    self._json({"error": {"message": f"unsupported path {self.path}"}}, status=404)
                    return
                reply = outer.reply_for(body, n)
                if body.get("stream"):
                    self._sse(reply, n)
                else:
                    self._json(outer.completion(reply, n))

            def _json(self, obj: Any, status: int = 200) -> None:
                data = json.dumps(obj).encode()
                self.send_response(status)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def _sse(self, reply: dict[str, Any], n: int) -> None:
                self.send_response(200)
                self.send_header("content-type", "text/event-stream")
                self.send_header("cache-control", "no-cache")
                self.send_header("connection", "close")
                self.end_headers()
                for chunk in outer.chunks(reply, n):
                    self.wfile.write(b"data: " + json.dumps(chunk).encode() + b"\n\n")
                    self.wfile.flush()
                self.wfile.write(b"data: [DONE]\n\n")
                self.wfile.flush()
                self.close_connection = True

        self._server = ThreadingHTTPServer((host, port), Handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, name="fake-model", daemon=True)

    # -- lifecycle ---------------------------------------------------------------------------------
    @property
    def port(self) -> int:
        return int(self._server.server_address[1])

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def __enter__(self) -> FakeModel:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()

    # -- log ---------------------------------------------------------------------------------------
    def _record(self, path: str, headers: dict[str, str], body: Any) -> int:
        with self._lock:
            self._count += 1
            n = self._count
            # Authorization is logged only as present/absent, never its value.
            entry = {"n": n, "t": time.time(), "path": path, "auth": "authorization" in {k.lower() for k in headers}}
            entry["body"] = body
            with self.log_path.open("a", encoding="utf-8") as f:
                f.write(json.dumps(entry) + "\n")
        return n

    def requests(self) -> list[dict[str, Any]]:
        if not self.log_path.exists():
            return []
        return [json.loads(line) for line in self.log_path.read_text(encoding="utf-8").splitlines() if line]

    # -- replies -----------------------------------------------------------------------------------
    @staticmethod
    def reply_for(body: dict[str, Any], n: int) -> dict[str, Any]:
        """``{"text": ...}`` or ``{"tool": name, "args": {...}}`` for this request."""
        messages = body.get("messages") or []
        # The host appends its own internal-context user message after the user's; skip it.
        users = [i for i, m in enumerate(messages) if m.get("role") == "user"]
        real = [i for i in users if not _text_of(messages[i].get("content")).startswith(INTERNAL)]
        last = (real or users or [None])[-1]
        after_user = messages[last + 1 :] if last is not None else []
        prompt = _prompt_text(_text_of(messages[last].get("content"))) if last is not None else ""
        tool_done = any(m.get("role") == "tool" for m in after_user)
        offered = [t.get("function", {}).get("name") for t in body.get("tools") or [] if isinstance(t, dict)]
        if TOOL_MARKER in prompt and not tool_done and offered:
            name = next((t for t in PREFERRED_TOOLS if t in offered), offered[0])
            return {"tool": name, "args": _tool_args(name)}
        if tool_done:
            return {"text": f"fake reply {n}: the tool answered."}
        return {"text": f"fake reply {n}: {prompt[:80]}"}

    @staticmethod
    def _usage() -> dict[str, int]:
        return {"prompt_tokens": 50, "completion_tokens": 10, "total_tokens": 60}

    def completion(self, reply: dict[str, Any], n: int) -> dict[str, Any]:
        if "tool" in reply:
            msg: dict[str, Any] = {"role": "assistant", "content": None, "tool_calls": [self._call(reply, n)]}
            finish = "tool_calls"
        else:
            msg, finish = {"role": "assistant", "content": reply["text"]}, "stop"
        return {
            "id": f"chatcmpl-fake-{n}",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": MODEL_ID,
            "choices": [{"index": 0, "message": msg, "finish_reason": finish}],
            "usage": self._usage(),
        }

    @staticmethod
    def _call(reply: dict[str, Any], n: int) -> dict[str, Any]:
        return {
            "id": f"call_fake_{n}",
            "type": "function",
            "function": {"name": reply["tool"], "arguments": json.dumps(reply["args"])},
        }

    def chunks(self, reply: dict[str, Any], n: int) -> Iterator[dict[str, Any]]:
        base = {"id": f"chatcmpl-fake-{n}", "object": "chat.completion.chunk", "created": int(time.time())}
        base["model"] = MODEL_ID

        def chunk(delta: dict[str, Any], finish: str | None = None, **extra: Any) -> dict[str, Any]:
            return {**base, "choices": [{"index": 0, "delta": delta, "finish_reason": finish}], **extra}

        yield chunk({"role": "assistant", "content": ""})
        if "tool" in reply:
            call = self._call(reply, n)
            args = call["function"]["arguments"]
            yield chunk({"tool_calls": [{"index": 0, **call, "function": {"name": reply["tool"], "arguments": ""}}]})
            yield chunk({"tool_calls": [{"index": 0, "function": {"arguments": args}}]})
            yield chunk({}, "tool_calls")
        else:
            text = reply["text"]
            for i in range(0, len(text), 16):
                yield chunk({"content": text[i : i + 16]})
            yield chunk({}, "stop")
        yield {**base, "choices": [], "usage": self._usage()}


if __name__ == "__main__":  # manual use: python tests/openclaw_host/fake_model.py LOG [PORT]
    import sys

    with FakeModel(Path(sys.argv[1]), port=int(sys.argv[2]) if len(sys.argv) > 2 else 0) as m:
        print(m.base_url, flush=True)
        threading.Event().wait()
