"""Deferred compaction through the real runtime: the reply does not wait for it, the next turn does."""

from __future__ import annotations

import asyncio

import pytest
from lcm_helpers import SMALL, summary_rows
from sqlalchemy import text

from openclaw_ctx.config import OpenClawConfig
from openclaw_ctx.host.runtime import Runtime
from openclaw_ctx.store.store import Store
from openclaw_ctx.summarize.base import SummaryOutput, SummaryRequest
from openclaw_ctx.testing import ScriptedModel, reply

KEY = "agent:main:deferred"


class GatedSummarizer:
    """Summarises only once the test opens the gate: stands in for a slow provider."""

    name = "gated"

    def __init__(self) -> None:
        self.gate = asyncio.Event()
        self.asked = asyncio.Event()

    async def summarize(self, request: SummaryRequest) -> SummaryOutput:
        self.asked.set()
        await self.gate.wait()
        return SummaryOutput(text="short", summarizer=self.name)


def config() -> OpenClawConfig:
    return OpenClawConfig.model_validate(
        {
            "plugins": {
                "slots": {"contextEngine": "lossless-claw"},
                "entries": {"lossless-claw": {"config": {**SMALL, "contextThreshold": 0.2}}},
            }
        }
    )


async def compactions(store: Store) -> int:
    async with store.read() as conn:
        return int(await conn.scalar(text("SELECT count(*) FROM compactions WHERE compacted = 1")) or 0)


async def test_reply_returns_before_the_deferred_compaction_and_the_next_turn_waits(store: Store) -> None:
    words = " ".join(f"word{i}" for i in range(120))
    summarizer = GatedSummarizer()
    model = ScriptedModel([reply(f"answer {i} {words}") for i in range(6)], context_window=4_000)
    runtime = await Runtime.create(store, config=config(), model=model, summarizer=summarizer)
    settling: asyncio.Task[object] | None = None
    for i in range(4):
        # A deadlock guard, not a timing assertion: were the drain awaited here, the gate would hold it.
        async with asyncio.timeout(30):
            await runtime.run_turn(KEY, f"question {i} {words}")
        # Either the background drain asks for a summary, or it finds no debt and finishes.
        settling = asyncio.create_task(runtime.settle(KEY))
        asked = asyncio.create_task(summarizer.asked.wait())
        await asyncio.wait({settling, asked}, return_when=asyncio.FIRST_COMPLETED)
        if asked.done():
            break
        asked.cancel()
    assert summarizer.asked.is_set(), "the threshold was crossed and a summary was asked for"
    assert settling is not None and not settling.done()
    assert await compactions(store) == 0, "the reply came back while the compaction was still pending"

    next_turn = asyncio.create_task(runtime.run_turn(KEY, "one more"))
    await asyncio.sleep(0.05)
    assert not next_turn.done(), "the next turn on the key waits for the deferred compaction"
    summarizer.gate.set()
    async with asyncio.timeout(30):
        await settling
        await next_turn
    assert await compactions(store) >= 1
    assert {r["summarizer"] for r in await summary_rows(store, KEY)} == {"gated"}
    await runtime.dispose()


@pytest.mark.parametrize("concurrent", [False, True])
async def test_back_to_back_turns_pay_the_debt_before_the_next_turn(store: Store, concurrent: bool) -> None:
    """No settle() between turns, even turns started together: each starts after the deferred compaction."""
    words = " ".join(f"word{i}" for i in range(120))
    model = ScriptedModel([reply(f"answer {i} {words}") for i in range(12)], context_window=8_000)
    runtime = await Runtime.create(store, config=config(), model=model)
    for i in range(0, 12, 2):
        first, second = (runtime.run_turn(KEY, f"question {i + j} {words}") for j in range(2))
        if concurrent:
            await asyncio.gather(first, second)
        else:
            await first
            await second
    await runtime.dispose()
    async with store.read() as conn:
        rows = (await conn.execute(text("SELECT turn, session_id, compacted FROM turns ORDER BY turn"))).all()
    debts = [(a, b) for a, b in zip(rows, rows[1:], strict=False) if a.compacted]
    assert debts, "the threshold was crossed"
    for debt_turn, next_turn in debts:
        assert next_turn.session_id != debt_turn.session_id, f"turn {next_turn.turn} ran before the compaction"
