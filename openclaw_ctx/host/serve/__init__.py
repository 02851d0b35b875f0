"""``openclaw-ctx serve``: the engines over newline-delimited JSON-RPC 2.0 on stdio (docs/serve.md).

:mod:`.protocol` frames messages, :mod:`.dispatch` serves the hooks of the HOOKS table by wire name,
:mod:`.lanes` orders calls per session, :mod:`.host_llm` asks the client (``host/llmComplete``),
:mod:`.scrub` keeps secrets out, :mod:`.server` ties them together and :mod:`.stdio` is the process plumbing.
"""

from __future__ import annotations

import asyncio
from typing import BinaryIO

from openclaw_ctx.config import OpenClawConfig
from openclaw_ctx.host.serve.server import PROTOCOL_VERSION, Server
from openclaw_ctx.host.serve.stdio import claim_stdout, configure_logging, line_sender, read_stdin
from openclaw_ctx.store.store import Store

__all__ = ["PROTOCOL_VERSION", "Server", "claim_stdout", "configure_logging", "serve_stdio"]


async def serve_stdio(
    store: Store, config: OpenClawConfig, out: BinaryIO, *, engine_id: str | None, summarizer: str | None
) -> None:
    """Serve stdin's requests, answering on `out` (from :func:`claim_stdout`), until shutdown or EOF."""
    server = Server(store, config, line_sender(out), engine_id=engine_id, summarizer=summarizer)
    await server.run(read_stdin(asyncio.get_running_loop()))
