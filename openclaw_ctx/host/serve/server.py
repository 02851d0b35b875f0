"""The ``serve`` server: one engine for the process, its hooks answered over JSON-RPC (docs/serve.md).

Lines are handled in arrival order by :meth:`Server.run`; ``initialize``, ``$/cancel`` and responses to the
server's own requests are handled inline, hooks go to their session's lane (:mod:`.lanes`) and answer when
they finish. ``shutdown`` or EOF: no new calls are taken, running ones finish (responses to the server's
``host/llmComplete`` requests are still read meanwhile), the engine is disposed, and :meth:`run` returns.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import os
import time
from collections.abc import Callable
from typing import Any

from pydantic import BaseModel

from openclaw_ctx._version import __version__
from openclaw_ctx.config import OpenClawConfig
from openclaw_ctx.contract import supports_dispose
from openclaw_ctx.host.serve.dispatch import SERVED_HOOKS, call_hook, served_hooks, session_lane
from openclaw_ctx.host.serve.host_llm import ClientRequests, HostSummarizer
from openclaw_ctx.host.serve.lanes import Job, Lanes
from openclaw_ctx.host.serve.protocol import (
    CANCELLED,
    ENGINE_ERROR,
    INTERNAL_ERROR,
    INVALID_PARAMS,
    METHOD_NOT_FOUND,
    NOT_INITIALIZED,
    SHUTTING_DOWN,
    Incoming,
    RpcError,
    error_line,
    parse_line,
    result_line,
)
from openclaw_ctx.host.serve.scrub import drop_secrets
from openclaw_ctx.host.serve.setup import pick_summarizer, resolve_engine
from openclaw_ctx.host.serve.spawns import ROLLBACK_METHOD, SpawnPreparations
from openclaw_ctx.host.serve.transcript import persists_for, record_messages
from openclaw_ctx.registry import ResolvedEngine
from openclaw_ctx.store.store import Store
from openclaw_ctx.summarize import Summarizer

__all__ = ["PROTOCOL_VERSION", "Server"]

PROTOCOL_VERSION = 1
log = logging.getLogger("openclaw_ctx.host.serve")


class Server:
    """One client's server over `send` (writes one protocol line) and the lines :meth:`run` is given."""

    def __init__(
        self,
        store: Store,
        config: OpenClawConfig,
        send: Callable[[bytes], None],
        *,
        engine_id: str | None = None,
        summarizer: str | None = None,
    ) -> None:
        self._store = store
        self._config = config
        self._send = send
        self._engine_id = engine_id
        self._summarizer_choice = summarizer
        self._lanes = Lanes()
        self._jobs: dict[int | str, Job] = {}
        self.requests = ClientRequests(send)
        self._host_llm = False
        self._resolved: ResolvedEngine | None = None
        self._summarizer: Summarizer | None = None
        self._closing: asyncio.Task[None] | None = None
        self._spawns = SpawnPreparations()

    # --- the loop -------------------------------------------------------------------------------

    async def run(self, lines: asyncio.Queue[bytes | None]) -> None:
        """Handle `lines` (None = EOF) until ``shutdown`` has been answered or EOF and the calls finished."""
        while True:
            line = await self._next_line(lines)
            if line is None:
                break
            if line.strip():
                await self._handle_line(line)
        if self._closing is None:
            self.requests.fail_all("the client closed stdin")
            await self._close()

    async def _next_line(self, lines: asyncio.Queue[bytes | None]) -> bytes | None:
        if self._closing is None:
            return await lines.get()
        get = asyncio.ensure_future(lines.get())
        await asyncio.wait({get, self._closing}, return_when=asyncio.FIRST_COMPLETED)
        if get.done():
            line = get.result()
            if line is None:  # EOF while closing: nobody can answer the server's requests any more
                self.requests.fail_all("the client closed stdin")
                await self._closing
            return line
        get.cancel()
        return None

    async def _handle_line(self, line: bytes) -> None:
        log.debug("line of %d bytes", len(line))
        message: Incoming | None = None
        try:
            message = parse_line(line)
            message = dataclasses.replace(message, params=drop_secrets(message.params))
            await self._handle(message)
        except RpcError as exc:
            if message is None or not message.is_notification:
                self._send(error_line(exc, message.id if message else None))
        except Exception as exc:
            log.exception("internal error handling a %s line", message.method if message else "bad")
            if message is not None and not message.is_notification:
                self._send(error_line(RpcError(INTERNAL_ERROR, f"internal error: {type(exc).__name__}"), message.id))

    async def _handle(self, message: Incoming) -> None:
        if message.is_response:
            if not self.requests.resolve(message):
                log.warning("a response to no pending server request (id %r)", message.id)
        elif message.method == "$/cancel":
            self._cancel(message.params)
            self._reply(message, None)
        elif self._closing is not None:
            raise RpcError(SHUTTING_DOWN, "the server is shutting down")
        elif message.method == "initialize":
            self._reply(message, await self._initialize(message.params))
        elif message.method == "shutdown":
            self._closing = asyncio.create_task(self._shutdown(message))
        elif self._resolved is None:
            raise RpcError(NOT_INITIALIZED, f"{message.method}: initialize must come first")
        elif message.method not in SERVED_HOOKS and message.method != ROLLBACK_METHOD:
            raise RpcError(METHOD_NOT_FOUND, f"unknown method {message.method!r}")
        else:
            self._submit(message)

    def _reply(self, message: Incoming, result: Any) -> None:
        if not message.is_notification:
            self._send(result_line(message.id, result))

    # --- initialize -----------------------------------------------------------------------------

    async def _initialize(self, params: Any) -> dict[str, Any]:
        engine_id, host_llm, engine_config = _initialize_params(params)
        if self._resolved is not None:
            if engine_id and engine_id != self._resolved.engine_id:
                raise RpcError(INVALID_PARAMS, "already initialized", {"errors": [f"engine: already {engine_id!r}"]})
            return self._info()
        self._host_llm = host_llm
        host = HostSummarizer(self.requests, lambda: self._host_llm)
        try:
            self._summarizer = pick_summarizer(self._summarizer_choice, self._config, host)
            selected = engine_id or self._engine_id
            self._resolved = await resolve_engine(
                self._store, self._config, selected, self._summarizer, engine_config=engine_config
            )
        except Exception as exc:
            kind = type(exc).__name__
            log.error("initialize failed: %s: %s", kind, exc)
            raise RpcError(ENGINE_ERROR, str(exc) or kind, {"hook": "initialize", "kind": kind}) from None
        info = self._resolved.engine.info
        log.info("serving engine %s (%s), summarizer %s", info.id, self._resolved.source, self._summarizer.name)
        return self._info()

    def _info(self) -> dict[str, Any]:
        assert self._resolved is not None and self._summarizer is not None
        engine = self._resolved.engine
        return {
            "protocolVersion": PROTOCOL_VERSION,
            "serverVersion": __version__,
            "pid": os.getpid(),
            "engine": engine.info.model_dump(mode="json", by_alias=True, exclude_none=True),
            "hooks": served_hooks(engine),
            "summarizer": self._summarizer.name,
        }

    # --- hooks ----------------------------------------------------------------------------------

    def _submit(self, message: Incoming) -> None:
        job = Job(lambda job: self._run_hook(message, job), lambda job: self._cancelled(message))
        if message.id is not None:
            self._jobs[message.id] = job
        self._lanes.submit(session_lane(message.params), job)

    async def _run_hook(self, message: Incoming, job: Job) -> None:
        assert self._resolved is not None and message.method is not None
        started = time.perf_counter()
        try:
            engine = self._resolved.engine
            if message.method == ROLLBACK_METHOD:
                result = await self._rollback_spawn(message.params)
            else:
                before = self._record if persists_for(engine) else None
                result = await call_hook(engine, message.method, message.params, job.signal, before, self._spawns)
            line = result_line(message.id, result)
        except RpcError as exc:
            line = error_line(exc, message.id)
        except Exception as exc:  # a result that would not serialise, say: an error answer, never a crash
            log.exception("%s: internal error", message.method)
            line = error_line(RpcError(INTERNAL_ERROR, f"internal error: {type(exc).__name__}: {exc}"), message.id)
        self._forget(message)
        if not message.is_notification:
            self._send(line)
        log.debug("%s answered in %.1f ms", message.method, (time.perf_counter() - started) * 1000)

    async def _rollback_spawn(self, params: Any) -> dict[str, bool]:
        try:
            return await self._spawns.rollback(params)
        except RpcError:
            raise
        except Exception as exc:
            log.warning("%s failed: %s: %s", ROLLBACK_METHOD, type(exc).__name__, exc)
            data = {"hook": ROLLBACK_METHOD, "kind": type(exc).__name__}
            raise RpcError(ENGINE_ERROR, str(exc).strip() or type(exc).__name__, data) from None

    async def _record(self, params: BaseModel) -> None:
        await record_messages(self._store, params)

    def _cancel(self, params: Any) -> None:
        request_id = params.get("id") if isinstance(params, dict) else None
        job = self._jobs.get(request_id) if isinstance(request_id, int | str) else None
        if job is None:
            log.debug("$/cancel for no running call (id %r)", request_id)
            return
        job.cancel()

    def _cancelled(self, message: Incoming) -> None:
        self._forget(message)
        if not message.is_notification:
            self._send(error_line(RpcError(CANCELLED, f"{message.method}: cancelled"), message.id))

    def _forget(self, message: Incoming) -> None:
        if message.id is not None:
            self._jobs.pop(message.id, None)

    # --- shutdown -------------------------------------------------------------------------------

    async def _shutdown(self, message: Incoming) -> None:
        await self._close()
        self._reply(message, None)

    async def _close(self) -> None:
        await self._lanes.drain()
        if self._resolved is None:
            return
        engine = self._resolved.engine
        if supports_dispose(engine):
            try:
                await engine.dispose()
            except Exception as exc:
                log.warning("engine dispose failed: %s: %s", type(exc).__name__, exc)


def _initialize_params(params: Any) -> tuple[str | None, bool, dict[str, Any] | None]:
    if not isinstance(params, dict):
        raise RpcError(INVALID_PARAMS, "initialize: invalid params", {"errors": ["params: expected an object"]})
    errors = []
    if params.get("protocolVersion") != PROTOCOL_VERSION:
        errors.append(f"protocolVersion: expected {PROTOCOL_VERSION}, got {params.get('protocolVersion')!r}")
    engine_id = params.get("engine")
    if engine_id is not None and not (isinstance(engine_id, str) and engine_id):
        errors.append("engine: expected an engine id")
    host_llm = params.get("hostLlm", False)
    if not isinstance(host_llm, bool):
        errors.append("hostLlm: expected a boolean")
    engine_config = params.get("engineConfig")
    if engine_config is not None and not isinstance(engine_config, dict):
        errors.append("engineConfig: expected an object of the engine's settings")
    if errors:
        raise RpcError(INVALID_PARAMS, "initialize: invalid params", {"errors": errors})
    return engine_id, host_llm, engine_config
