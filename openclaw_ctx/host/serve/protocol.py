"""JSON-RPC 2.0 framing for ``serve``: one message per line, the error codes of docs/serve.md.

Parsing never raises anything but :class:`RpcError`; encoding gives one ``\\n``-terminated line of UTF-8
with no embedded newline (``json.dumps`` escapes them inside strings).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

__all__ = [
    "CANCELLED",
    "ENGINE_ERROR",
    "INTERNAL_ERROR",
    "INVALID_PARAMS",
    "INVALID_REQUEST",
    "METHOD_NOT_FOUND",
    "NOT_INITIALIZED",
    "PARSE_ERROR",
    "SHUTTING_DOWN",
    "Incoming",
    "RpcError",
    "error_line",
    "parse_line",
    "request_line",
    "result_line",
]

PARSE_ERROR = -32700
INVALID_REQUEST = -32600
METHOD_NOT_FOUND = -32601
INVALID_PARAMS = -32602
NOT_INITIALIZED = -32002
ENGINE_ERROR = -32000
CANCELLED = -32800
INTERNAL_ERROR = -32603
SHUTTING_DOWN = -32001

RequestId = int | str | None


class RpcError(Exception):
    """An error answer: `code`, `message` and optional `data`, for the request `request_id`."""

    def __init__(self, code: int, message: str, data: Any = None, request_id: RequestId = None) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.data = data
        self.request_id = request_id


@dataclass(frozen=True)
class Incoming:
    """One parsed message: a request (`id` set), a notification (`is_notification`) or a response."""

    method: str | None
    params: Any
    id: RequestId
    is_notification: bool
    result: Any = None
    error: Any = None

    @property
    def is_response(self) -> bool:
        """A response to a server → client request (no method)."""
        return self.method is None


def _check_id(raw: Any) -> RequestId:
    if raw is None or isinstance(raw, str) or (isinstance(raw, int) and not isinstance(raw, bool)):
        return raw
    raise RpcError(INVALID_REQUEST, "id must be a string, an integer or null")


def parse_line(line: bytes | str) -> Incoming:
    """Parse one line.

    Raises:
        RpcError: ``-32700`` not JSON, ``-32600`` not a JSON-RPC 2.0 message (with the id when it had one).
    """
    try:
        message = json.loads(line)
    except (ValueError, UnicodeDecodeError) as exc:
        raise RpcError(PARSE_ERROR, f"parse error: {exc}") from None
    if not isinstance(message, dict):
        raise RpcError(INVALID_REQUEST, "expected a JSON-RPC 2.0 object (batches are not supported)")
    request_id = _check_id(message.get("id"))
    if message.get("jsonrpc") != "2.0":
        raise RpcError(INVALID_REQUEST, 'jsonrpc must be "2.0"', request_id=request_id)
    if "method" not in message:
        if "result" in message or "error" in message:
            return Incoming(None, None, request_id, False, message.get("result"), message.get("error"))
        raise RpcError(INVALID_REQUEST, "a request needs a method", request_id=request_id)
    method = message["method"]
    if not isinstance(method, str):
        raise RpcError(INVALID_REQUEST, "method must be a string", request_id=request_id)
    params = message.get("params", {})
    if not isinstance(params, dict | list):
        raise RpcError(INVALID_REQUEST, "params must be an object or an array", request_id=request_id)
    return Incoming(method, params, request_id, "id" not in message)


def _line(message: dict[str, Any]) -> bytes:
    return (json.dumps(message, ensure_ascii=False, separators=(",", ":"), allow_nan=False) + "\n").encode()


def result_line(request_id: RequestId, result: Any) -> bytes:
    """A success response."""
    return _line({"jsonrpc": "2.0", "id": request_id, "result": result})


def error_line(error: RpcError, request_id: RequestId = None) -> bytes:
    """An error response (the id is `request_id`, else the error's own)."""
    body: dict[str, Any] = {"code": error.code, "message": error.message}
    if error.data is not None:
        body["data"] = error.data
    rid = request_id if request_id is not None else error.request_id
    return _line({"jsonrpc": "2.0", "id": rid, "error": body})


def request_line(request_id: str, method: str, params: dict[str, Any]) -> bytes:
    """A server → client request."""
    return _line({"jsonrpc": "2.0", "id": request_id, "method": method, "params": params})
