"""Stored conversations the turn, compaction, peer and memory benchmarks start from, cached per size.

A history is one session key holding `n` generated messages (:func:`bench.data.conversation`, seed 11),
written through the store's own batch path, optionally compacted to fit a 128k budget by an engine:

- ``raw``: ingested only (every message is a context item);
- ``lossless-claw``: then one full lossless sweep (unlimited iterations and depth, embedded
  extractive summarizer), so the context is summaries plus the fresh tail;
- ``legacy``: then the built-in summarising compaction legacy delegates to (one summary + kept tail).

Builds are slow at 100k messages (minutes), so each is written once into the cache directory
(``bench/results/cache``) and *copied* into the scratch directory for every run that mutates it.
"""

from __future__ import annotations

import asyncio
import shutil
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from bench import data, rawdb
from bench.core import BenchContext
from openclaw_ctx.contract import CompactParams, EngineContext
from openclaw_ctx.store import repo
from openclaw_ctx.store.store import Store

__all__ = [
    "BUDGET",
    "SESSION_KEY",
    "SWEEP_CONFIG",
    "Compacted",
    "History",
    "engine_for",
    "history",
    "ingest_conversation",
    "next_turns",
]

BUILD_VERSION = 1
SESSION_KEY = "agent:main:bench-history"
SEED = 11
BUDGET = 128_000
BATCH = 1000
# One compact() call sweeps the whole history (lossless-claw's defaults stop after 12 passes per call).
SWEEP_CONFIG: dict[str, Any] = {"maxSweepIterations": 1_000_000, "sweepMaxDepth": -1, "sweepDeadlineMs": 10**9}

Compacted = Literal["raw", "lossless-claw", "legacy"]


@dataclass(frozen=True)
class History:
    """A cached history database and what building it cost."""

    path: Path
    n: int
    compacted: Compacted
    build_seconds: float


def engine_for(store: Store, engine_id: str, config: dict[str, Any] | None = None) -> Any:
    """A lossless-claw or legacy engine over `store` (embedded summarizer)."""
    ctx = EngineContext(store=store, config=config)
    if engine_id == "legacy":
        from engines.legacy import LegacyContextEngine

        return LegacyContextEngine(ctx)
    from engines.lossless.engine import LosslessContextEngine

    return LosslessContextEngine(ctx)


async def ingest_conversation(store: Store, n: int, *, seed: int = SEED, key: str = SESSION_KEY) -> repo.SessionRow:
    """Write `n` generated messages to `key` through ``repo.append_messages``, 1000 per transaction."""
    async with store.transaction() as conn:
        session = await repo.ensure_session(conn, key)
    items = rawdb.new_messages(data.conversation(n, seed=seed))
    for start in range(0, n, BATCH):
        async with store.transaction() as conn:
            await repo.append_messages(conn, session, items[start : start + BATCH], store.counter)
    return session


async def compact_full(store: Store, engine_id: str, key: str = SESSION_KEY) -> Any:
    """Compact `key` with `engine_id` down to the 128k budget's target in one call; the CompactResult."""
    engine = engine_for(store, engine_id, SWEEP_CONFIG if engine_id != "legacy" else None)
    return await compact_full_with(engine, store, key)


async def compact_full_with(engine: Any, store: Store, key: str = SESSION_KEY) -> Any:
    """Forced threshold compaction of `key` by `engine` at the 128k budget; the CompactResult."""
    async with store.read() as conn:
        session = await repo.active_session(conn, key)
        assert session is not None
        current = await repo.context_tokens(conn, session.session_id)
    result = await engine.compact(
        CompactParams(
            session_id=session.session_id,
            session_key=key,
            session_file=session.session_file,
            token_budget=BUDGET,
            force=True,
            current_token_count=current,
            compaction_target="threshold",
        )
    )
    if not result.ok:
        raise RuntimeError(f"{engine.info.id} compaction failed: {result.reason}")
    return result


async def _build(path: Path, n: int, compacted: Compacted) -> None:
    store = await Store.open(path)
    try:
        await ingest_conversation(store, n)
        if compacted != "raw":
            await compact_full(store, compacted)
    finally:
        await store.close()


def history(ctx: BenchContext, n: int, compacted: Compacted, *, copy_as: str | None = None) -> History:
    """The cached history (built on first use); with `copy_as`, a fresh copy of it in the scratch dir."""
    cache = ctx.cache_dir or ctx.workdir
    cached = cache / f"history-{n}-{compacted}-v{BUILD_VERSION}.db"
    marker = cached.with_suffix(".seconds")
    if not cached.exists():
        building = cached.with_name(cached.name + ".building")
        for suffix in ("", "-wal", "-shm"):
            Path(f"{building}{suffix}").unlink(missing_ok=True)
        ctx.log(f"history: building {n:,} messages ({compacted}) into {cached.name}")
        start = time.perf_counter()
        asyncio.run(_build(building, n, compacted))
        marker.write_text(f"{time.perf_counter() - start:.3f}")
        building.replace(cached)
    seconds = float(marker.read_text()) if marker.exists() else 0.0
    if copy_as is None:
        return History(cached, n, compacted, seconds)
    target = ctx.path(copy_as)
    shutil.copyfile(cached, target)
    return History(target, n, compacted, seconds)


def next_turns(n_history: int, turns: int, per_turn: int = 4, *, seed: int = 99) -> list[list[dict[str, Any]]]:
    """`turns` batches of `per_turn` new wire messages continuing a history of `n_history` messages.

    Tool-call ids are numbered from `n_history` on, so they never collide with the stored history.
    """
    flat = list(data.stream(turns * per_turn, seed=seed, offset=n_history))
    return [flat[i : i + per_turn] for i in range(0, len(flat), per_turn)]


class CountingTimer:
    """Wraps a TokenCounter and accumulates the seconds spent counting (to show its share of a turn)."""

    def __init__(self, inner: Any, clock: Callable[[], float] = time.perf_counter) -> None:
        self._inner = inner
        self._clock = clock
        self.name = inner.name
        self.exact = inner.exact
        self.seconds = 0.0
        self.calls = 0

    def count(self, text: str) -> int:
        """Count through the wrapped counter, timing it."""
        start = self._clock()
        try:
            result: int = self._inner.count(text)
            return result
        finally:
            self.seconds += self._clock() - start
            self.calls += 1
