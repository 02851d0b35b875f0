"""Properties over random histories: ingests, turns, compactions, restarts, engine switches.

After every step: nothing ingested is lost (every message row of the key is reachable from the
current context through summary_messages / summary_parents, by a recursive CTE), the DAG is acyclic
with consistent depths, every message is covered by exactly one leaf/legacy node or is still raw in
the context (never both), and assembly stays within the budget unless the protected tail alone
exceeds it — in which case it says so.
"""

from __future__ import annotations

import asyncio
import shutil
import tempfile
from pathlib import Path
from typing import Any

import networkx as nx
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from lcm_helpers import (
    active_id,
    all_message_ids,
    conversation,
    host_persist,
    make_engine,
    reachable_message_ids,
)
from sqlalchemy import text

from engines.lossless.engine import LosslessContextEngine
from openclaw_ctx.compaction import compact_session
from openclaw_ctx.config import CompactionSettings
from openclaw_ctx.contract import (
    AfterTurnParams,
    AssembleParams,
    BootstrapParams,
    CompactParams,
    IngestBatchParams,
)
from openclaw_ctx.store import repo
from openclaw_ctx.store.repo import message_token_count
from openclaw_ctx.store.store import Store
from openclaw_ctx.summarize import default_summarizer

KEY = "agent:main:prop:1"

step = st.one_of(
    st.tuples(st.just("turn"), st.integers(1, 4)),
    st.tuples(st.just("ingest"), st.integers(1, 3)),
    st.tuples(st.just("replay"), st.just(0)),
    st.tuples(st.just("compact"), st.sampled_from([500, 900, 2000])),
    st.tuples(st.just("budget"), st.sampled_from([900, 1500])),
    st.tuples(st.just("assemble"), st.sampled_from([300, 1000, 4000])),
    st.tuples(st.just("restart"), st.just(0)),
    st.tuples(st.just("drain"), st.just(0)),
    # The slot switched to legacy for a compaction (the built-in one), then back to lossless-claw.
    st.tuples(st.just("legacy"), st.sampled_from([300, 800])),
)


async def _legacy_start(store: Store) -> None:
    """The state a legacy engine leaves: a legacy node over the oldest messages, session rotated."""
    session = await host_persist(store, KEY, conversation(4, start=1000))
    async with store.transaction() as conn:
        entries = await repo.load_context(conn, session.session_id)
        covered, kept = entries[:6], entries[6:]
        node = repo.NewSummary(
            kind="legacy",
            content="Legacy summary of the first turns.",
            token_count=8,
            summarizer="extractive-v2",
            source_message_ids=[e.message_id for e in covered if e.message_id is not None],
        )
        await repo.insert_summary(conn, session, node)
        items: list[Any] = [("summary", node.summary_id, 20)]
        items += [("message", e.message_id, e.token_count) for e in kept]
        await repo.rotate_session(conn, session, items, reason="compaction", engine_id="legacy")


async def _check_dag(store: Store) -> None:
    sid = await active_id(store, KEY)
    async with store.read() as conn:
        edges = (
            await conn.execute(
                text(
                    "SELECT sp.summary_id, sp.source_summary_id, a.depth, b.depth FROM summary_parents sp "
                    "JOIN summaries a ON a.summary_id = sp.summary_id "
                    "JOIN summaries b ON b.summary_id = sp.source_summary_id WHERE a.session_key = :k"
                ),
                {"k": KEY},
            )
        ).all()
        coverage = dict(
            (
                await conn.execute(
                    text(
                        "SELECT sm.message_id, count(*) FROM summary_messages sm "
                        "JOIN summaries s ON s.summary_id = sm.summary_id WHERE s.session_key = :k "
                        "GROUP BY sm.message_id"
                    ),
                    {"k": KEY},
                )
            ).all()
        )
        raw = {
            r[0]
            for r in await conn.execute(
                text("SELECT message_id FROM context_items WHERE session_id = :s AND message_id IS NOT NULL"),
                {"s": sid},
            )
        }
    graph: nx.DiGraph[str] = nx.DiGraph()
    graph.add_edges_from((a, b) for a, b, _, _ in edges)
    assert nx.is_directed_acyclic_graph(graph)
    assert all(parent_depth > child_depth for _, _, parent_depth, child_depth in edges)
    for mid in await all_message_ids(store, KEY):
        covered = coverage.get(mid, 0)
        assert covered <= 1, f"message {mid} covered by {covered} leaves"
        assert (covered == 1) != (mid in raw), f"message {mid}: covered={covered}, raw={mid in raw}"


async def _check_assembly(store: Store, engine: LosslessContextEngine, budget: int) -> None:
    sid = await active_id(store, KEY)
    result = await engine.assemble(AssembleParams(session_id=sid, session_key=KEY, messages=[], token_budget=budget))
    true = sum(message_token_count(m, store.counter) for m in result.messages)
    assert result.estimated_tokens == true
    diagnostics = result.diagnostics  # type: ignore[attr-defined]
    assert result.prompt_authority == "assembled"
    if diagnostics["tail_overflow"]:
        # Over the budget only by the protected tail, and it says so.
        assert diagnostics["tail_tokens"] > budget
        assert diagnostics["evicted_items"] == diagnostics["items"] - diagnostics["tail_items"]
        assert "may overflow" in (result.system_prompt_addition or "")
    else:
        assert true <= budget


async def _scenario(steps: list[tuple[str, int]], legacy: bool, folder: Path) -> None:
    path = folder / "ctx.db"
    store = await Store.open(path)
    engine = make_engine(store, maxSweepIterations=30)
    turn = 0
    last_batch: IngestBatchParams | None = None
    try:
        if legacy:
            await _legacy_start(store)
            sid = await active_id(store, KEY)
            assert (await engine.bootstrap(BootstrapParams(session_id=sid, session_key=KEY))).bootstrapped
        for kind, arg in steps:
            if kind == "turn":
                pairs = conversation(arg, start=turn, words=12)
                turn += arg
                await host_persist(store, KEY, pairs)
                sid = await active_id(store, KEY)
                turn_messages = [m for m, _ in pairs]
                await engine.after_turn(
                    AfterTurnParams(
                        session_id=sid,
                        session_key=KEY,
                        messages=turn_messages,
                        pre_prompt_message_count=0,
                        token_budget=1200,
                    )
                )
            elif kind == "ingest":
                pairs = conversation(arg, start=turn, words=12)
                turn += arg
                last_batch = IngestBatchParams(
                    session_id="direct",
                    session_key=KEY,
                    messages=[m for m, _ in pairs],
                    entry_ids=[e for _, e in pairs],
                )
                assert (await engine.ingest_batch(last_batch)).ingested_count == len(pairs)
            elif kind == "replay" and last_batch is not None:
                assert (await engine.ingest_batch(last_batch)).ingested_count == 0
            elif kind in ("compact", "budget"):
                if await _has_session(store):
                    sid = await active_id(store, KEY)
                    target = "budget" if kind == "budget" else "threshold"
                    result = await engine.compact(
                        CompactParams(
                            session_id=sid, session_key=KEY, token_budget=arg, force=True, compaction_target=target
                        )
                    )
                    assert result.ok, result.reason
            elif kind == "assemble" and await _has_session(store):
                await _check_assembly(store, engine, arg)
            elif kind == "restart":
                await store.close()
                store = await Store.open(path)
                engine = make_engine(store, maxSweepIterations=30)
            elif kind == "drain":
                result = await engine.drain_debt(KEY)
                assert result is None or result.ok
            elif kind == "legacy" and await _has_session(store):
                result = await compact_session(
                    store,
                    await active_id(store, KEY),
                    settings=CompactionSettings(keep_recent_tokens=arg, reserve_tokens=0, reserve_tokens_floor=0),
                    summarizer=default_summarizer(),
                    token_budget=None,
                    custom_instructions=None,
                    force=True,
                    trigger="manual",
                )
                assert result.ok, result.reason
                sid = await active_id(store, KEY)
                adopted = await engine.bootstrap(BootstrapParams(session_id=sid, session_key=KEY))
                # The session legacy's compaction rotated to is adopted anew.
                assert adopted.bootstrapped or not result.compacted, adopted.reason
            if await _has_session(store):
                assert await reachable_message_ids(store, KEY) == await all_message_ids(store, KEY)
                await _check_dag(store)
    finally:
        await store.close()


async def _has_session(store: Store) -> bool:
    async with store.read() as conn:
        return await repo.active_session(conn, KEY) is not None


@settings(
    max_examples=40,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(steps=st.lists(step, min_size=1, max_size=10), legacy=st.booleans())
def test_random_histories_keep_every_message_and_a_valid_dag(steps: list[tuple[str, int]], legacy: bool) -> None:
    folder = Path(tempfile.mkdtemp(prefix="lcm-prop-"))
    try:
        asyncio.run(_scenario(steps, legacy, folder))
    finally:
        shutil.rmtree(folder, ignore_errors=True)
