"""The built-in `legacy` engine: ingest no-op, assemble pass-through, compaction delegated to the runtime.

For OpenClaw 2026.9's durable turns it declares the transcript semantics and commits each turn to
the shared store once (the host's own transcript stays the source of what the model sees).

It registers through the same entry-point group as any plugin; the registry reserves the id for core.
"""

from __future__ import annotations

from typing import Any

from openclaw_ctx._version import __version__
from openclaw_ctx.contract import (
    DURABLE_TURNS,
    AfterTurnParams,
    AssembleParams,
    AssembleResult,
    CommitTurnParams,
    CommitTurnResult,
    CompactParams,
    CompactResult,
    EngineContext,
    EngineInfo,
    IngestParams,
    IngestResult,
)
from openclaw_ctx.store import repo
from openclaw_ctx.transcripts.host_turns import with_host_entry_ids

__all__ = ["LegacyContextEngine", "register"]


class LegacyContextEngine:
    """OpenClaw's default engine; the host's own pipeline decides what the model sees."""

    def __init__(self, ctx: EngineContext | None = None) -> None:
        self._ctx = ctx or EngineContext()
        self._info = EngineInfo(
            id="legacy", name="Legacy Context Engine", version=__version__, transcript_semantics=DURABLE_TURNS
        )

    @property
    def info(self) -> EngineInfo:
        """`legacy`; does not own compaction."""
        return self._info

    async def ingest(self, params: IngestParams) -> IngestResult:
        """No-op: the host persists every message itself."""
        return IngestResult(ingested=False)

    async def assemble(self, params: AssembleParams) -> AssembleResult:
        """Pass-through: the very same list, and 0 so the host does the estimating."""
        return AssembleResult(messages=params.messages, estimated_tokens=0)

    async def compact(self, params: CompactParams) -> CompactResult:
        """The built-in summarising compaction (one summary of old history, recent messages kept)."""
        from openclaw_ctx.compaction import delegate_compaction_to_runtime

        return await delegate_compaction_to_runtime(params, self._ctx)

    async def commit_turn(self, params: CommitTurnParams) -> CommitTurnResult:
        """Keep the turn in the shared store, once per advancement key (without a store the host keeps it)."""
        store = self._ctx.store
        if store is None or params.is_heartbeat:
            return CommitTurnResult(status="committed")
        params = await with_host_entry_ids(params)  # the tool calls and results get their host entry ids
        async with store.transaction() as conn:
            done = await repo.commit_host_turn(conn, params, store.counter, engine_id="legacy")
        return CommitTurnResult(status=done.status)

    async def after_turn(self, params: AfterTurnParams) -> None:
        """No-op."""

    async def dispose(self) -> None:
        """Nothing to release."""


def register(api: Any) -> None:
    """Entry point of group `openclaw_ctx.engines`."""
    api.register_context_engine("legacy", LegacyContextEngine)
