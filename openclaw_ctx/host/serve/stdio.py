"""The server's process plumbing: stdout kept for protocol lines, stdin read off the loop, logs to stderr."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import sys
import threading
from collections.abc import Callable
from typing import BinaryIO

from openclaw_ctx.host.serve.scrub import ScrubbingFormatter

__all__ = ["claim_stdout", "configure_logging", "line_sender", "read_stdin"]

LOG_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"
READ_SIZE = 1 << 16


def claim_stdout() -> BinaryIO:
    """The process's real stdout, for protocol lines only; fd 1 and ``sys.stdout`` then go to stderr,
    so a stray ``print`` anywhere (an engine, a library) can never corrupt the protocol."""
    sys.stdout.flush()
    protocol = os.fdopen(os.dup(1), "wb")
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    return protocol


def configure_logging(level: str | None = None) -> None:
    """Log to stderr through the scrubbing formatter (``OPENCLAW_CTX_LOG_LEVEL``, default INFO)."""
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(ScrubbingFormatter(LOG_FORMAT))
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(logging.WARNING)
    logging.getLogger("openclaw_ctx").setLevel((level or os.environ.get("OPENCLAW_CTX_LOG_LEVEL") or "INFO").upper())
    logging.captureWarnings(True)


def line_sender(out: BinaryIO) -> Callable[[bytes], None]:
    """Write one protocol line and flush; a client gone away is logged once, not raised."""
    gone = False

    def send(line: bytes) -> None:
        nonlocal gone
        try:
            out.write(line)
            out.flush()
        except OSError as exc:
            if not gone:
                logging.getLogger("openclaw_ctx.host.serve").warning("stdout closed: %s", exc)
            gone = True

    return send


def read_stdin(loop: asyncio.AbstractEventLoop, fd: int = 0) -> asyncio.Queue[bytes | None]:
    """Lines from `fd`, read by a daemon thread (raw reads: no line-length limit, no buffer lock held at
    exit) and queued on `loop`; None marks EOF. Between calls the thread just blocks in ``read``."""
    queue: asyncio.Queue[bytes | None] = asyncio.Queue()

    def put(item: bytes | None) -> None:
        with contextlib.suppress(RuntimeError):  # the loop closed first: the process is exiting
            loop.call_soon_threadsafe(queue.put_nowait, item)

    def pump() -> None:
        pending = b""
        try:
            while chunk := os.read(fd, READ_SIZE):
                *lines, pending = (pending + chunk).split(b"\n")
                for line in lines:
                    put(line)
        except OSError:
            pass
        if pending.strip():
            put(pending)
        put(None)

    threading.Thread(target=pump, name="serve-stdin", daemon=True).start()
    return queue
