"""Compaction: pure planners, sweeps through the real store, rotation, escalation, deferred debt."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest
from lcm_helpers import (
    SMALL,
    active_id,
    all_message_ids,
    assistant,
    conversation,
    host_persist,
    make_engine,
    reachable_message_ids,
    summary_rows,
    tool_result,
    user,
)
from sqlalchemy import select, text

from engines.lossless.assemble import fresh_tail_start
from engines.lossless.config import resolve_config
from engines.lossless.engine import DEBT_STATE, LosslessContextEngine, create_engine
from engines.lossless.planning import MAX_SWEEP_ROUNDS, PlanItem, plan_condensed_pass, plan_leaf_pass
from engines.lossless.prompts import EXPAND_FOOTER, condensed_prompt, leaf_prompt
from openclaw_ctx.contract import AbortSignal, AfterTurnParams, CompactParams, EngineContext, MaintainParams
from openclaw_ctx.errors import SummarizerAuthError, SummarizerError
from openclaw_ctx.messages import AgentMessage
from openclaw_ctx.store import repo
from openclaw_ctx.store.models import Compaction
from openclaw_ctx.store.store import Store
from openclaw_ctx.summarize.base import SummaryOutput, SummaryRequest
from openclaw_ctx.testing import FakeSummarizer

KEY = "agent:main:test:1"


def msg(ref: int, m: AgentMessage, tokens: int = 10) -> PlanItem:
    return PlanItem("message", ref, tokens, message=m)


def node(ref: str, depth: int, tokens: int = 50) -> PlanItem:
    return PlanItem("summary", ref, tokens, depth=depth, content=f"summary {ref}")


# --- pure planning --------------------------------------------------------------------------


def tail_view(items: list[PlanItem]) -> list[tuple[AgentMessage | None, int]]:
    return [(i.message, i.tokens) for i in items]


def test_fresh_tail_counts_raw_messages_and_reaches_back_to_the_newest_user() -> None:
    items = [msg(1, user("a")), msg(2, assistant("b")), node("s", 0), msg(3, user("c")), msg(4, assistant("d"))]
    assert fresh_tail_start(tail_view(items), 2) == 3
    # One protected message would be the assistant reply; the tail extends back to its user turn.
    assert fresh_tail_start(tail_view(items), 1) == 3
    # Summaries inside the walk do not count as messages.
    assert fresh_tail_start(tail_view(items), 3) == 1


def test_fresh_tail_never_splits_a_tool_call_from_its_result() -> None:
    items = [
        msg(1, user("go")),
        msg(2, assistant("a", calls=[("c1", "read"), ("c2", "read")])),
        msg(3, tool_result("c1", "r1")),
        msg(4, tool_result("c2", "r2")),
        msg(5, assistant("done")),
    ]
    # Protecting 2 messages would start at the second result; the call (and its user turn) come along.
    assert fresh_tail_start(tail_view(items), 2) == 0


def test_fresh_tail_token_cap_keeps_at_least_one_message() -> None:
    items = [msg(i, assistant(f"m{i}"), 100) for i in range(6)] + [msg(9, user("q"), 100)]
    assert fresh_tail_start(tail_view(items), 64, max_tokens=250) == 5
    assert fresh_tail_start(tail_view(items), 64, max_tokens=10) == 6


def test_leaf_pass_takes_the_oldest_raw_chunk_and_stops_at_summaries_and_the_cap() -> None:
    items = [node("s0", 0), msg(1, user("a"), 50), msg(2, assistant("b"), 50), msg(3, user("c"), 50), node("s1", 0)]
    assert plan_leaf_pass(items, 5, leaf_chunk_tokens=120) == (1, 3)
    assert plan_leaf_pass(items, 5, leaf_chunk_tokens=1000) == (1, 4)
    # A single message bigger than the cap is still taken.
    assert plan_leaf_pass(items, 5, leaf_chunk_tokens=10) == (1, 2)
    assert plan_leaf_pass(items, 1, leaf_chunk_tokens=1000) is None
    assert plan_leaf_pass([node("x", 0)], 1, 100) is None


def test_leaf_pass_keeps_tool_results_with_their_call() -> None:
    items = [
        msg(1, user("a"), 50),
        msg(2, assistant("b", calls=[("c1", "read")]), 50),
        msg(3, tool_result("c1", "r"), 50),
        msg(4, user("z"), 50),
    ]
    assert plan_leaf_pass(items, 4, leaf_chunk_tokens=100) == (0, 3)


def test_condensed_pass_fanout_depth_order_and_limits() -> None:
    cfg = resolve_config(
        {"leafMinFanout": 3, "condensedMinFanout": 2, "condensedTargetTokens": 10, "leafChunkTokens": 500}, env={}
    )
    items = [node("a", 1), node("b", 1), node("c", 0), node("d", 0), msg(1, user("x")), node("e", 0)]
    # Depth 0 has runs of 2 and 1: below the leaf fan-in of 3; depth 1 has a run of 2.
    assert plan_condensed_pass(items, 6, cfg, max_depth=-1, hard=False) == (0, 2)
    # sweepMaxDepth 1 forbids making a depth-2 node.
    assert plan_condensed_pass(items, 6, cfg, max_depth=1, hard=False) is None
    # The hard fan-in (2) lets depth 0 go first (shallowest first).
    assert plan_condensed_pass(items, 6, cfg, max_depth=-1, hard=True) == (2, 4)
    # Items in the tail are never condensed.
    assert plan_condensed_pass(items, 3, cfg, max_depth=-1, hard=True) == (0, 2)


def test_condensed_pass_needs_enough_tokens_unless_hard() -> None:
    cfg = resolve_config({"leafMinFanout": 2, "condensedTargetTokens": 500, "leafChunkTokens": 1000}, env={})
    items = [node("a", 0, 100), node("b", 0, 100)]
    assert plan_condensed_pass(items, 2, cfg, max_depth=-1, hard=False) is None
    assert plan_condensed_pass(items, 2, cfg, max_depth=-1, hard=True) == (0, 2)


@pytest.mark.parametrize("depth", [1, 2, 3, 5])
def test_prompts_are_depth_aware_and_demand_the_footer(depth: int) -> None:
    prompts = {
        condensed_prompt("S", depth=d, previous_context="P", target_tokens=10, aggressive=False) for d in (1, 2, 3)
    }
    assert len(prompts) == 3
    p = condensed_prompt("S", depth=depth, previous_context="P", target_tokens=10, aggressive=False)
    assert EXPAND_FOOTER in p and "<summaries>\nS\n</summaries>" in p
    assert ("<previous_context>" in p) is (depth == 1)
    leaf = leaf_prompt("SEG", previous_context=None, target_tokens=10, aggressive=True, custom_instructions="keep SHAs")
    assert EXPAND_FOOTER in leaf and "keep SHAs" in leaf and "SEG" in leaf


# --- through the store ----------------------------------------------------------------------


async def test_compact_rotates_the_session_and_loses_nothing(store: Store) -> None:
    await host_persist(store, KEY, conversation(12))
    old = await active_id(store, KEY)
    engine = make_engine(store)
    result = await engine.compact(CompactParams(session_id=old, session_key=KEY, token_budget=600, force=True))
    assert result.ok and result.compacted, result.reason
    assert result.result is not None and result.result.session_id is not None
    new = await active_id(store, KEY)
    assert result.result.session_id == new != old
    assert result.result.tokens_after is not None and result.result.tokens_after < result.result.tokens_before
    async with store.read() as conn:
        predecessor = await repo.get_session(conn, old)
        successor = await repo.get_session(conn, new)
        audit = (await conn.execute(text("SELECT * FROM compactions"))).mappings().all()
        stored = await repo.context_tokens(conn, new)
    assert predecessor.status == "rotated" and successor.parent_session_id == old
    assert successor.session_file == result.result.session_file and successor.engine_id == "lossless-claw"
    assert len(audit) == 1 and audit[0]["after_session_id"] == new and audit[0]["engine_id"] == "lossless-claw"
    assert audit[0]["summaries_created"] >= 1 and stored == result.result.tokens_after
    assert await reachable_message_ids(store, KEY) == await all_message_ids(store, KEY)
    rows = await summary_rows(store, KEY)
    leaves = [r for r in rows if r["kind"] == "leaf"]
    assert leaves and all(r["summary_id"].startswith("sum_") and len(r["summary_id"]) == 20 for r in rows)
    assert all(EXPAND_FOOTER in r["content"] for r in rows)
    assert all(r["earliest_at"] and r["latest_at"] and r["earliest_at"] <= r["latest_at"] for r in leaves)
    assert all(r["source_message_token_count"] > 0 for r in leaves)
    assert all(
        (r["summarizer"], r["fallback_level"])
        in {
            ("extractive-v2", "none"),
            ("extractive-v2", "aggressive"),
            ("deterministic-fallback", "deterministic"),
        }
        for r in rows
    )
    assert any(r["summarizer"] == "extractive-v2" for r in leaves)
    condensed = [r for r in rows if r["kind"] == "condensed"]
    assert condensed and all(r["depth"] >= 1 and r["descendant_count"] >= 2 for r in condensed)


async def test_threshold_compaction_skips_when_below_threshold(store: Store) -> None:
    await host_persist(store, KEY, conversation(2))
    engine = make_engine(store)
    sid = await active_id(store, KEY)
    result = await engine.compact(CompactParams(session_id=sid, session_key=KEY, token_budget=100_000))
    assert result.ok and not result.compacted and result.reason == "below threshold"
    assert await active_id(store, KEY) == sid


async def test_budget_target_compacts_until_under_and_goes_deep(store: Store) -> None:
    await host_persist(store, KEY, conversation(40))
    engine = make_engine(store, maxSweepIterations=40)
    sid = await active_id(store, KEY)
    result = await engine.compact(
        CompactParams(session_id=sid, session_key=KEY, token_budget=1200, compaction_target="budget")
    )
    assert result.ok and result.compacted and result.result is not None
    assert result.result.tokens_after is not None and result.result.tokens_after <= 1200
    assert max(r["depth"] for r in await summary_rows(store, KEY)) >= 2
    assert await reachable_message_ids(store, KEY) == await all_message_ids(store, KEY)


@pytest.mark.parametrize(
    ("context", "force", "expected"),
    [({"trigger": "overflow"}, True, "overflow"), (None, True, "manual"), (None, False, "budget")],
)
async def test_audit_row_names_the_hosts_trigger(
    store: Store, context: dict[str, str] | None, force: bool, expected: str
) -> None:
    await host_persist(store, KEY, conversation(40))
    engine = make_engine(store)
    sid = await active_id(store, KEY)
    params = CompactParams(
        session_id=sid,
        session_key=KEY,
        token_budget=1200,
        compaction_target="budget",
        force=force,
        runtime_context=context,
    )
    result = await engine.compact(params)
    assert result.compacted
    async with store.read() as conn:
        triggers = (await conn.execute(select(Compaction.trigger).where(Compaction.session_key == KEY))).scalars()
        assert list(triggers) == [expected]


def doubled(request: SummaryRequest) -> str:
    """A "summary" twice as long as its source: never accepted, so the engine escalates."""
    return request.source_text * 2


class ReplySummarizer(FakeSummarizer):
    """A provider stand-in that answers with a fixed reply (default: a doubled source) or raises a given error."""

    def __init__(self, reply: str = "", error: Exception | None = None) -> None:
        super().__init__(reply or doubled, error=error, name="reply-provider")


@pytest.mark.parametrize("error", [None, SummarizerError("boom")])
async def test_escalation_normal_aggressive_then_fallback(store: Store, error: Exception | None) -> None:
    await host_persist(store, KEY, conversation(6))
    provider = ReplySummarizer(error=error)
    engine = create_engine(EngineContext(config={**SMALL, "sweepMaxDepth": 0}, store=store, summarizer=provider))
    sid = await active_id(store, KEY)
    result = await engine.compact(CompactParams(session_id=sid, session_key=KEY, token_budget=100, force=True))
    assert result.ok and result.compacted
    assert [r.aggressive for r in provider.requests[:2]] == [False, True]
    rows = await summary_rows(store, KEY)
    assert rows and all(r["fallback_level"] == "deterministic" for r in rows)
    assert all("[Truncated from" in r["content"] and r["summarizer"] == "deterministic-fallback" for r in rows)


async def test_aggressive_result_is_marked(store: Store) -> None:
    await host_persist(store, KEY, conversation(6))

    class SecondTry(ReplySummarizer):
        async def summarize(self, request: SummaryRequest) -> SummaryOutput:
            self.requests.append(request)
            reply = "short summary" if request.aggressive else request.source_text + " more"
            return SummaryOutput(text=reply, summarizer=self.name, model="m1")

    provider = SecondTry()
    engine = create_engine(EngineContext(config={**SMALL, "sweepMaxDepth": 0}, store=store, summarizer=provider))
    sid = await active_id(store, KEY)
    assert (
        await engine.compact(CompactParams(session_id=sid, session_key=KEY, token_budget=100, force=True))
    ).compacted
    rows = await summary_rows(store, KEY)
    assert rows and {r["fallback_level"] for r in rows} == {"aggressive"}
    assert all(r["content"].startswith("short summary") and EXPAND_FOOTER in r["content"] for r in rows)
    assert provider.requests[0].system_prompt and "SECURITY" in provider.requests[0].system_prompt


async def test_rows_name_the_model_that_answered_and_requests_carry_the_key(store: Store) -> None:
    await host_persist(store, KEY, conversation(6))

    class Named(ReplySummarizer):
        async def summarize(self, request: SummaryRequest) -> SummaryOutput:
            self.requests.append(request)
            return SummaryOutput(text="brief", summarizer="openai", model="gpt-summary-1")

    provider = Named()
    engine = create_engine(EngineContext(config={**SMALL, "sweepMaxDepth": 0}, store=store, summarizer=provider))
    sid = await active_id(store, KEY)
    assert (
        await engine.compact(CompactParams(session_id=sid, session_key=KEY, token_budget=100, force=True))
    ).compacted
    rows = await summary_rows(store, KEY)
    assert rows and {(r["summarizer"], r["model"]) for r in rows} == {("openai", "gpt-summary-1")}
    assert {r.metadata.get("session_key") for r in provider.requests} == {KEY}
    assert {r.timeout_s for r in provider.requests} == {60.0}


async def test_a_hung_summarizer_is_timed_out_into_the_marked_fallback(store: Store) -> None:
    await host_persist(store, KEY, conversation(6))

    class Hung(ReplySummarizer):
        async def summarize(self, request: SummaryRequest) -> SummaryOutput:
            self.requests.append(request)
            await asyncio.Event().wait()  # never answers
            raise AssertionError("unreachable")

    provider = Hung()
    config = {**SMALL, "sweepMaxDepth": 0, "summaryTimeoutMs": 20}
    engine = create_engine(EngineContext(config=config, store=store, summarizer=provider))
    sid = await active_id(store, KEY)
    result = await engine.compact(CompactParams(session_id=sid, session_key=KEY, token_budget=100, force=True))
    assert result.ok and result.compacted
    assert [r.aggressive for r in provider.requests[:2]] == [False, True], "timed out, then escalated"
    rows = await summary_rows(store, KEY)
    assert rows and all(r["fallback_level"] == "deterministic" and "[Truncated from" in r["content"] for r in rows)


async def test_auth_failure_writes_nothing(store: Store) -> None:
    await host_persist(store, KEY, conversation(6))
    engine = create_engine(
        EngineContext(config=SMALL, store=store, summarizer=ReplySummarizer(error=SummarizerAuthError("401")))
    )
    sid = await active_id(store, KEY)
    result = await engine.compact(CompactParams(session_id=sid, session_key=KEY, token_budget=100, force=True))
    assert not result.ok and not result.compacted and "auth" in (result.reason or "")
    assert await summary_rows(store, KEY) == []
    assert await active_id(store, KEY) == sid
    async with store.read() as conn:
        assert await conn.scalar(text("SELECT count(*) FROM compactions")) == 0


async def over_threshold_turn(store: Store, new_messages: int | None) -> tuple[LosslessContextEngine, str]:
    """A deferred-mode engine after a 10-exchange turn over a 400-token budget (the last `new_messages`
    of it new; None: all of it)."""
    pairs = conversation(10)
    await host_persist(store, KEY, pairs)
    engine = make_engine(store)
    sid = await active_id(store, KEY)
    turn = [m for m, _ in pairs]
    await engine.after_turn(
        AfterTurnParams(
            session_id=sid,
            session_key=KEY,
            messages=turn,
            pre_prompt_message_count=0 if new_messages is None else len(turn) - new_messages,
            token_budget=400,
        )
    )
    return engine, sid


async def test_deferred_debt_survives_a_restart_and_is_drained(store: Store, db_path: Path) -> None:
    engine, sid = await over_threshold_turn(store, new_messages=3)
    assert await active_id(store, KEY) == sid  # deferred: nothing compacted inline
    debt = await engine.pending_debt(KEY)
    assert debt is not None and debt["pending"] and debt["token_budget"] == 400
    await store.close()

    reopened = await Store.open(db_path)
    try:
        engine2 = make_engine(reopened)
        assert (await engine2.pending_debt(KEY)) == debt
        result = await engine2.drain_debt(KEY)
        assert result is not None and result.compacted
        assert await engine2.pending_debt(KEY) is None
        assert await active_id(reopened, KEY) != sid
        assert await engine2.drain_debt(KEY) is None
        assert await reachable_message_ids(reopened, KEY) == await all_message_ids(reopened, KEY)
    finally:
        await reopened.close()


async def test_maintain_pays_the_debt_only_when_the_host_allows_deferred_work(store: Store) -> None:
    engine, sid = await over_threshold_turn(store, new_messages=None)
    assert await engine.pending_debt(KEY) is not None

    # A foreground maintenance run (before or after a turn) leaves the debt for later.
    for context in (None, {}, {"allowDeferredCompactionExecution": False}):
        held = await engine.maintain(MaintainParams(session_id=sid, session_key=KEY, runtime_context=context))
        assert not held.changed and "not allowed" in (held.reason or "")
        assert await active_id(store, KEY) == sid and await engine.pending_debt(KEY) is not None

    background = MaintainParams(
        session_id=sid, session_key=KEY, runtime_context={"allowDeferredCompactionExecution": True}
    )
    paid = await engine.maintain(background)
    assert paid.reason == "paid the compaction debt" and not paid.changed  # the host's transcript is untouched
    assert paid.model_dump(by_alias=True)["bytesFreed"] == 0
    assert await active_id(store, KEY) != sid and await engine.pending_debt(KEY) is None
    assert await reachable_message_ids(store, KEY) == await all_message_ids(store, KEY)
    again = await engine.maintain(background)
    assert again.reason == "nothing to do: no compaction debt"


async def test_inline_mode_compacts_after_the_turn(store: Store) -> None:
    pairs = conversation(10)
    await host_persist(store, KEY, pairs)
    engine = make_engine(store, proactiveThresholdCompactionMode="inline")
    sid = await active_id(store, KEY)
    turn = [m for m, _ in pairs]
    await engine.after_turn(
        AfterTurnParams(session_id=sid, session_key=KEY, messages=turn, pre_prompt_message_count=0, token_budget=400)
    )
    assert await active_id(store, KEY) != sid
    async with store.read() as conn:
        assert await repo.get_engine_state(conn, "lossless-claw", KEY, DEBT_STATE) is None


async def test_after_turn_uses_observed_prompt_tokens(store: Store) -> None:
    pairs = conversation(2)
    await host_persist(store, KEY, pairs)
    engine = make_engine(store)
    sid = await active_id(store, KEY)
    reply = assistant("ok", 99, usage=90_000)
    await engine.after_turn(
        AfterTurnParams(
            session_id=sid, session_key=KEY, messages=[reply], pre_prompt_message_count=0, token_budget=100_000
        )
    )
    debt = await engine.pending_debt(KEY)
    assert debt is not None and debt["projected_tokens"] == 90_000


async def test_stateless_session_never_writes(store: Store) -> None:
    key = "agent:main:sub:7"
    await host_persist(store, key, conversation(8))
    engine = make_engine(store, statelessSessionPatterns=["agent:*:sub:**"])
    sid = await active_id(store, key)
    result = await engine.compact(CompactParams(session_id=sid, session_key=key, token_budget=100, force=True))
    assert result.ok and not result.compacted and "read-only" in (result.reason or "")
    assert await summary_rows(store, key) == []
    async with store.read() as conn:
        assert json.loads(json.dumps(await repo.get_engine_state(conn, "lossless-claw", key, DEBT_STATE))) is None


# --- the sweep's bounds ----------------------------------------------------------------------------


async def test_sweeps_chain_past_the_pass_cap_while_work_is_left(store: Store) -> None:
    await host_persist(store, KEY, conversation(40))
    sid = await active_id(store, KEY)
    capped = make_engine(store, maxSweepIterations=1, leafChunkTokens=120)
    result = await capped.compact(CompactParams(session_id=sid, session_key=KEY, token_budget=100_000, force=True))
    assert result.compacted and result.result is not None
    passes = result.result.details["passes"]
    assert 1 < passes <= MAX_SWEEP_ROUNDS, "one pass per round, rounds chained while raw chunks are left"


async def test_the_sweep_deadline_stops_a_slow_summarizer(store: Store) -> None:
    await host_persist(store, KEY, conversation(40))

    class Slow(ReplySummarizer):
        async def summarize(self, request: SummaryRequest) -> SummaryOutput:
            self.requests.append(request)
            await asyncio.sleep(0.05)
            return SummaryOutput(text="brief", summarizer=self.name)

    provider = Slow()
    # Each summary takes 50 ms; the deadline (20 ms) passes during the first one.
    config = {**SMALL, "leafChunkTokens": 120, "sweepDeadlineMs": 20, "compactUntilUnderDeadlineMs": 20}
    engine = create_engine(EngineContext(config=config, store=store, summarizer=provider))
    sid = await active_id(store, KEY)
    result = await engine.compact(CompactParams(session_id=sid, session_key=KEY, token_budget=100_000, force=True))
    assert result.compacted and result.result is not None
    assert result.result.details["passes"] == len(provider.requests) == 1, "no pass starts after the deadline"


async def test_an_abort_mid_sweep_writes_nothing(store: Store) -> None:
    await host_persist(store, KEY, conversation(40))
    signal = AbortSignal()

    class Aborting(ReplySummarizer):
        async def summarize(self, request: SummaryRequest) -> SummaryOutput:
            self.requests.append(request)
            signal.abort("host shutting down")  # the host cancels while the first summary is made
            return SummaryOutput(text="brief", summarizer=self.name)

    engine = create_engine(EngineContext(config={**SMALL, "leafChunkTokens": 120}, store=store, summarizer=Aborting()))
    sid = await active_id(store, KEY)
    params = CompactParams(session_id=sid, session_key=KEY, token_budget=100_000, force=True, abort_signal=signal)
    result = await engine.compact(params)
    assert not result.ok and not result.compacted and "host shutting down" in (result.reason or "")
    assert await summary_rows(store, KEY) == [] and await active_id(store, KEY) == sid
