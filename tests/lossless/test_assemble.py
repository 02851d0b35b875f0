"""Assembly: XML summaries, fresh tail, eviction, true token estimates, cache-stable prefix, large content."""

from __future__ import annotations

import json
import re
from pathlib import Path

from lcm_helpers import (
    active_id,
    assistant,
    conversation,
    host_persist,
    make_engine,
    tool_result,
    user,
)
from sqlalchemy import text

from engines.lossless.large_content import load_large_content
from openclaw_ctx.compaction.pairing import is_well_paired
from openclaw_ctx.contract import AssembleParams, AssembleResult, CompactParams
from openclaw_ctx.messages import AgentMessage, ToolResultMessage, UserMessage, flatten_text, to_wire
from openclaw_ctx.store import repo
from openclaw_ctx.store.repo import message_token_count
from openclaw_ctx.store.store import Store

KEY = "agent:main:asm:1"


async def assemble(
    engine: object, store: Store, budget: int, messages: list[AgentMessage] | None = None
) -> AssembleResult:
    sid = await active_id(store, KEY)
    return await engine.assemble(  # type: ignore[attr-defined, no-any-return]
        AssembleParams(session_id=sid, session_key=KEY, messages=messages or [], token_budget=budget)
    )


def true_tokens(store: Store, result: AssembleResult) -> int:
    return sum(message_token_count(m, store.counter) for m in result.messages)


async def compacted_engine(store: Store, turns: int = 12) -> object:
    await host_persist(store, KEY, conversation(turns))
    engine = make_engine(store)
    sid = await active_id(store, KEY)
    result = await engine.compact(CompactParams(session_id=sid, session_key=KEY, token_budget=600, force=True))
    assert result.compacted
    return engine


async def test_summaries_render_as_untrusted_xml_with_parents(store: Store) -> None:
    engine = await compacted_engine(store)
    result = await assemble(engine, store, 100_000)
    xml = [m for m in result.messages if isinstance(m, UserMessage) and flatten_text(m).startswith("<summary ")]
    assert xml
    for m in xml:
        body = flatten_text(m)
        assert re.match(
            r'<summary id="sum_[0-9a-f]{16}" kind="(leaf|condensed)" depth="\d+" descendant_count="\d+" '
            r'trust="untrusted" earliest_at="[^"]*" latest_at="[^"]*">',
            body,
        )
        assert body.endswith("</content></summary>")
    condensed = [flatten_text(m) for m in xml if 'kind="condensed"' in flatten_text(m)]
    assert condensed and all("<parents><summary_ref id=" in c for c in condensed)
    shown = [re.match(r'<summary id="(sum_[0-9a-f]{16})"', c).group(1) for c in condensed]  # type: ignore[union-attr]
    async with store.read() as conn:
        rows = await conn.execute(text("SELECT summary_id, count(*) FROM summary_parents GROUP BY summary_id"))
        parents = {row[0]: row[1] for row in rows.all()}
    assert [parents[sid] for sid in shown] == [c.count("<summary_ref ") for c in condensed]
    assert result.estimated_tokens == true_tokens(store, result)
    addition = result.system_prompt_addition or ""
    for word in ("lcm_grep", "lcm_describe", "lcm_expand_query", "untrusted", "Expand for details about"):
        assert word in addition
    assert result.prompt_authority == "assembled"


async def test_content_is_escaped(store: Store) -> None:
    await host_persist(store, KEY, [(user(f"<b>&{i}</b> " + "pad " * 40, i), f"x{i}") for i in range(12)])
    engine = make_engine(store)
    sid = await active_id(store, KEY)
    assert (
        await engine.compact(CompactParams(session_id=sid, session_key=KEY, token_budget=400, force=True))
    ).compacted
    result = await assemble(engine, store, 100_000)
    summaries = [flatten_text(m) for m in result.messages if flatten_text(m).startswith("<summary ")]
    assert summaries and all("<b>" not in s for s in summaries)


async def test_over_budget_drops_oldest_first_and_keeps_the_tail(store: Store) -> None:
    pairs = conversation(10)
    await host_persist(store, KEY, pairs)
    engine = make_engine(store, proactiveThresholdCompactionMode="inline", freshTailCount=6)
    full = await assemble(engine, store, 1_000_000)
    # Stay within the budget without compacting: disable writes for the key by asking read-only.
    stateless = make_engine(store, statelessSessionPatterns=[KEY], freshTailCount=6)
    budget = full.estimated_tokens // 2
    cut = await assemble(stateless, store, budget)
    assert cut.estimated_tokens <= budget and cut.estimated_tokens == true_tokens(store, cut)
    assert [to_wire(m) for m in cut.messages] == [to_wire(m) for m in full.messages[-len(cut.messages) :]]
    assert to_wire(cut.messages[-1]) == to_wire(pairs[-1][0])
    assert is_well_paired(cut.messages)
    assert not isinstance(cut.messages[0], ToolResultMessage)
    assert cut.diagnostics["evicted_items"] > 0  # type: ignore[attr-defined]


async def test_tail_overflow_is_reported(store: Store) -> None:
    await host_persist(store, KEY, conversation(3))
    engine = make_engine(store, statelessSessionPatterns=[KEY], freshTailCount=64)
    result = await assemble(engine, store, 50)
    # Reported in the estimate and diagnostics; the raw history is not what overflows, so no
    # `preassembly_may_overflow` (that would make the host precheck the whole un-windowed history).
    assert result.prompt_authority == "assembled"
    assert result.estimated_tokens > 50 and result.estimated_tokens == true_tokens(store, result)
    assert "may overflow" in (result.system_prompt_addition or "")
    assert result.diagnostics["tail_overflow"] is True  # type: ignore[attr-defined]


async def test_prefix_is_byte_identical_turn_to_turn(store: Store, db_path: Path) -> None:
    engine = await compacted_engine(store)
    first = await assemble(engine, store, 100_000)
    previous = [json.dumps(to_wire(m), sort_keys=True) for m in first.messages]
    for t in range(20, 24):
        await host_persist(store, KEY, conversation(1, start=t))
        result = await assemble(engine, store, 100_000)
        wire = [json.dumps(to_wire(m), sort_keys=True) for m in result.messages]
        assert wire[: len(previous)] == previous
        assert result.system_prompt_addition == first.system_prompt_addition
        previous = wire
    await store.close()
    reopened = await Store.open(db_path)
    try:
        again = await assemble(make_engine(reopened), reopened, 100_000)
        assert [json.dumps(to_wire(m), sort_keys=True) for m in again.messages] == previous
    finally:
        await reopened.close()


async def test_unpersisted_live_messages_are_appended(store: Store) -> None:
    pairs = conversation(2)
    await host_persist(store, KEY, pairs)
    engine = make_engine(store)
    prompt = user("a brand new question", 50)
    result = await assemble(engine, store, 100_000, messages=[m for m, _ in pairs] + [prompt])
    assert to_wire(result.messages[-1]) == to_wire(prompt)
    assert len(result.messages) == len(pairs) + 1
    same = await assemble(engine, store, 100_000, messages=[m for m, _ in pairs])
    assert len(same.messages) == len(pairs)


async def test_assemble_pays_compaction_when_over_budget(store: Store) -> None:
    await host_persist(store, KEY, conversation(12))
    engine = make_engine(store)
    before = await active_id(store, KEY)
    result = await assemble(engine, store, 1500)
    assert await active_id(store, KEY) != before
    assert result.estimated_tokens <= 1500 and result.estimated_tokens == true_tokens(store, result)
    assert any(flatten_text(m).startswith("<summary ") for m in result.messages)


async def test_large_tool_output_is_a_stub_and_stays_retrievable(store: Store) -> None:
    rows = "\n".join(f"row_{i},{i * 3},name_{i}" for i in range(400))
    big = f"id,value,name\n{rows}"
    pairs = [
        (user("load the csv", 0), "l0"),
        (assistant("reading", 1, calls=[("c9", "read_file")]), "l1"),
        (tool_result("c9", big, 2), "l2"),
        (assistant("done", 3), "l3"),
    ]
    await host_persist(store, KEY, pairs)
    engine = make_engine(store, largeFileTokenThreshold=500)
    sid = await active_id(store, KEY)
    from openclaw_ctx.contract import AfterTurnParams

    turn = [m for m, _ in pairs]
    await engine.after_turn(AfterTurnParams(session_id=sid, session_key=KEY, messages=turn, pre_prompt_message_count=0))
    result = await assemble(engine, store, 100_000)
    shown = next(m for m in result.messages if isinstance(m, ToolResultMessage))
    stub = flatten_text(shown)
    match = re.match(r"\[LCM Tool Output: (file_[0-9a-f]{16}) \| tool=read_file \| (\d+) bytes\]", stub)
    assert match and int(match.group(2)) == len(big.encode())
    assert "CSV with 3 columns and 400 data rows" in stub and shown.tool_call_id == "c9"
    assert result.estimated_tokens == true_tokens(store, result)
    async with store.read() as conn:
        record = await load_large_content(conn, match.group(1))
        stored = (await repo.load_context(conn, sid))[2]
        original = (await conn.execute(text("SELECT text FROM messages WHERE entry_id='l2'"))).scalar_one()
    assert record.content == big == original
    assert stored.token_count == message_token_count(shown, store.counter)
    # The stub's own instruction works: lcm_describe(id=file_…, expandFile=true) gives the text back.
    describe = next(t for t in engine.tools(KEY) if t.name == "lcm_describe")
    assert describe.handler is not None and "expandFile" in describe.parameters["properties"]
    brief = await describe.handler({"id": match.group(1)})
    assert brief.startswith(f"LCM_FILE {match.group(1)}") and "row_399" not in brief
    full = await describe.handler({"id": match.group(1), "expandFile": True})
    assert full.endswith(big) and "first 32768 bytes" not in full
