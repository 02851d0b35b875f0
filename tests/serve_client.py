"""A JSON-RPC client for a real `python -m openclaw_ctx serve` subprocess, over its pipes (tests only)."""

from __future__ import annotations

import itertools
import json
import os
import queue
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

TIMEOUT_S = 60.0

Handler = Callable[[dict[str, Any]], Any]


class ServeProcess:
    """`openclaw-ctx --db DB serve ARGS` with stdout read by a thread; stderr goes to a file."""

    def __init__(self, tmp: Path, *args: str, env: dict[str, str] | None = None, db: Path | None = None) -> None:
        self.db = db or tmp / "serve.db"
        self.stderr_path = tmp / f"serve-stderr-{time.monotonic_ns()}.log"
        environment = {k: v for k, v in os.environ.items() if not k.startswith(("OPENCLAW_", "LCM_"))}
        environment.update({"HOME": str(tmp), "OPENCLAW_STATE_DIR": str(tmp), "PYTHONUNBUFFERED": "1"})
        environment.update(env or {})
        self._stderr = self.stderr_path.open("wb")
        self.started = time.perf_counter()
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "openclaw_ctx", "--db", str(self.db), "serve", *args],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self._stderr,
            env=environment,
        )
        self._ids = itertools.count(1)
        self._lines: queue.Queue[dict[str, Any] | None] = queue.Queue()
        self._stash: dict[Any, dict[str, Any]] = {}
        self.raw_stdout: list[bytes] = []
        self.server_requests: queue.Queue[dict[str, Any]] = queue.Queue()
        threading.Thread(target=self._pump, daemon=True).start()

    def _pump(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.raw_stdout.append(line)
            self._lines.put(json.loads(line))
        self._lines.put(None)

    # --- sending --------------------------------------------------------------------------------

    def send_raw(self, line: bytes) -> None:
        """Write `line` (a newline is added) to the server's stdin."""
        assert self.proc.stdin is not None
        self.proc.stdin.write(line + b"\n")
        self.proc.stdin.flush()

    def send(self, message: dict[str, Any]) -> None:
        self.send_raw(json.dumps(message).encode())

    def request(self, method: str, params: Any = None) -> int:
        """Send a request; returns its id (read the answer with :meth:`response`)."""
        request_id = next(self._ids)
        self.send({"jsonrpc": "2.0", "id": request_id, "method": method, "params": {} if params is None else params})
        return request_id

    def notify(self, method: str, params: Any) -> None:
        self.send({"jsonrpc": "2.0", "method": method, "params": params})

    def call(self, method: str, params: Any = None) -> dict[str, Any]:
        """Send a request and return its whole response object."""
        return self.response(self.request(method, params))

    def result(self, method: str, params: Any = None) -> Any:
        """The result of a call that must succeed."""
        answer = self.call(method, params)
        assert "error" not in answer, answer
        return answer["result"]

    # --- receiving ------------------------------------------------------------------------------

    def response(self, request_id: Any, timeout_s: float = TIMEOUT_S) -> dict[str, Any]:
        """The response to `request_id` (others that arrive first are kept for later)."""
        deadline = time.monotonic() + timeout_s
        while request_id not in self._stash:
            message = self._lines.get(timeout=max(0.01, deadline - time.monotonic()))
            if message is None:
                raise EOFError(f"the server closed stdout before answering {request_id!r}: {self.stderr()}")
            if "method" in message:
                self.server_requests.put(message)
            else:
                self._stash[message.get("id")] = message
        return self._stash.pop(request_id)

    def server_request(self, timeout_s: float = TIMEOUT_S) -> dict[str, Any]:
        """The next server → client request (reading past responses, which are kept)."""
        deadline = time.monotonic() + timeout_s
        while self.server_requests.empty():
            message = self._lines.get(timeout=max(0.01, deadline - time.monotonic()))
            if message is None:
                raise EOFError("the server closed stdout")
            if "method" in message:
                return message
            self._stash[message.get("id")] = message
        return self.server_requests.get()

    def answer_server_requests(self, request_id: Any, answer: Callable[[dict[str, Any]], Any]) -> dict[str, Any]:
        """Answer every server request with ``answer(request)`` until `request_id` is answered; its response."""
        deadline = time.monotonic() + TIMEOUT_S
        while not self.answered(request_id):
            try:
                ask = self.server_requests.get(timeout=0.05)
            except queue.Empty:
                assert time.monotonic() < deadline, f"no answer to {request_id!r}"
                continue
            self.send({"jsonrpc": "2.0", "id": ask["id"], "result": answer(ask)})
        return self._stash.pop(request_id)

    def answered(self, request_id: Any) -> bool:
        """Whether the response to `request_id` has arrived (without waiting)."""
        while True:
            try:
                message = self._lines.get_nowait()
            except queue.Empty:
                return request_id in self._stash
            if message is None:
                return request_id in self._stash
            if "method" in message:
                self.server_requests.put(message)
            else:
                self._stash[message.get("id")] = message

    # --- ending ---------------------------------------------------------------------------------

    def initialize(self, engine: str, **extra: Any) -> dict[str, Any]:
        result: dict[str, Any] = self.result("initialize", {"protocolVersion": 1, "engine": engine, **extra})
        return result

    def shutdown(self, timeout_s: float = TIMEOUT_S) -> int:
        """`shutdown`, then the exit status."""
        answer = self.call("shutdown")
        assert answer.get("result", "missing") is None, answer
        return self.wait(timeout_s)

    def wait(self, timeout_s: float = TIMEOUT_S) -> int:
        code = self.proc.wait(timeout=timeout_s)
        self._stderr.close()
        return code

    def stderr(self) -> str:
        if not self._stderr.closed:
            self._stderr.flush()
        return self.stderr_path.read_text(encoding="utf-8", errors="replace")

    def kill(self) -> None:
        """Kill the process if it still runs, and close every pipe and file."""
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        for stream in (self.proc.stdin, self.proc.stdout, self._stderr):
            if stream is not None and not stream.closed:
                try:
                    stream.close()
                except OSError:
                    pass
