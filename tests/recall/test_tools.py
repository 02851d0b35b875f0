"""The agent recall tools and delegated grants, against a real store with planted history."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest
from test_retrieval import History, build_planted

from engines.lossless.grants import Grant, GrantError, GrantStore, end_grant, prepare_grant
from engines.lossless.tools import ExpansionTask, build_tools
from openclaw_ctx.contract import PrepareSubagentSpawnParams, SubagentEndedParams
from openclaw_ctx.contract.model import ToolSpec
from openclaw_ctx.store import repo
from openclaw_ctx.store.store import Store


class Clock:
    """A controllable epoch-ms clock."""

    def __init__(self) -> None:
        self.now = 1_000_000

    def __call__(self) -> int:
        return self.now


def tools_of(store: Store, key: str, **kwargs: Any) -> dict[str, ToolSpec]:
    return {t.name: t for t in build_tools(store, session_key=key, **kwargs)}


async def call(tool: ToolSpec, args: Any) -> str:
    assert tool.handler is not None
    return await tool.handler(args)


async def test_tool_specs_have_schemas_and_handlers(store: Store) -> None:
    specs = build_tools(store, session_key="k")
    assert [t.name for t in specs] == ["lcm_grep", "lcm_recall", "lcm_describe", "lcm_expand", "lcm_expand_query"]
    for t in specs:
        assert t.parameters["type"] == "object" and t.parameters["additionalProperties"] is False
        assert t.description and t.handler is not None
        json.dumps(t.parameters)


async def test_grep_tool_finds_fact_across_sessions_and_keys(store: Store) -> None:
    a, b = await build_planted(store)
    tools = tools_of(store, a.key)
    out = await call(tools["lcm_grep"], {"pattern": "vault17 code", "scope": "messages"})
    lines = [ln for ln in out.splitlines() if ln.startswith("- ")]
    assert lines[0].startswith(f"- msg_{a.ids[-2]} ") and "raw in context" in lines[0]
    assert lines[1].startswith(f"- msg_{a.ids[0]} ") and f"covered by {a.leaves[0]}" in lines[1]
    assert f"msg_{b.ids[0]}" not in out
    everywhere = await call(tools["lcm_grep"], {"pattern": "vault17 code", "scope": "messages", "allSessions": True})
    assert f"msg_{b.ids[0]}" in everywhere and "123456" in everywhere
    assert "No matches" in await call(tools["lcm_grep"], {"pattern": "nonexistentword"})


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        ({}, "'pattern' is required"),
        ({"pattern": "  "}, "'pattern' is required"),
        ({"pattern": "x", "limit": 0}, "'limit' must be from 1 to 200"),
        ({"pattern": "x", "limit": "5"}, "'limit' must be an integer"),
        ({"pattern": "x", "limit": True}, "'limit' must be an integer"),
        ({"pattern": "x", "mode": "glob"}, "'mode' must be one of"),
        ({"pattern": "x", "bogus": 1}, "unknown argument(s) bogus"),
        ({"pattern": "x(", "mode": "regex"}, "invalid regular expression"),
        ({"pattern": "x", "since": "last week"}, "ISO-8601"),
        ("not an object", "must be a JSON object"),
    ],
)
async def test_grep_tool_bad_args_are_clear_errors(store: Store, args: Any, needle: str) -> None:
    out = await call(tools_of(store, "k")["lcm_grep"], args)
    assert out.startswith("error: lcm_grep: ") and needle in out


async def test_describe_tool(store: Store) -> None:
    a, _b = await build_planted(store)
    tools = tools_of(store, a.key)
    out = await call(tools["lcm_describe"], {"id": a.condensed[0], "tokenCap": 10_000})
    assert out.startswith(f"LCM_SUMMARY {a.condensed[0]}")
    assert f"sources: {a.leaves[0]}, {a.leaves[1]}" in out and "fits" in out
    assert "Earlier: vault codes and lunch" in out
    msg = await call(tools["lcm_describe"], {"id": f"msg_{a.ids[0]}"})
    assert f"covered by: {a.leaves[0]} → {a.condensed[0]}" in msg
    assert "no summary with id 'sum_zzz'" in await call(tools["lcm_describe"], {"id": "sum_zzz"})


async def test_expand_refuses_without_a_grant(store: Store) -> None:
    a, _b = await build_planted(store)
    out = await call(tools_of(store, a.key)["lcm_expand"], {"summaryIds": [a.leaves[0]]})
    assert out.startswith("error: lcm_expand:") and "no expansion grant" in out


async def test_expand_under_grant_is_scoped_and_capped(store: Store) -> None:
    a, b = await build_planted(store)
    b_leaf = await _leaf_for(store, b)
    clock = Clock()
    grants = GrantStore(store, clock=clock)
    child = f"{a.key}:subagent:1"
    await grants.create(a.key, child, token_cap=10_000, max_depth=3, ttl_ms=60_000)
    tools = tools_of(store, child, grant_store=grants)
    out = await call(tools["lcm_expand"], {"summaryIds": [a.condensed[0]], "includeMessages": True})
    assert "the vault17 code is 482913" in out and f"msg_{a.ids[0]}" in out
    used = (await grants.require(child)).tokens_used
    assert used > 0
    refused = await call(tools["lcm_expand"], {"summaryIds": [b_leaf]})
    assert "outside this grant" in refused
    by_query = await call(tools["lcm_expand"], {"query": "vault170", "includeMessages": True})
    assert "vault170 holds the spare key 555" in by_query
    # the child's grep is limited to the granted key, even when it asks for all sessions
    grep_out = await call(tools["lcm_grep"], {"pattern": "vault17", "allSessions": True, "scope": "messages"})
    assert f"msg_{b.ids[0]}" not in grep_out and f"msg_{a.ids[0]}" in grep_out


async def test_expand_spends_the_grant_budget(store: Store) -> None:
    a, _b = await build_planted(store)
    grants = GrantStore(store)
    child = f"{a.key}:subagent:2"
    await grants.create(a.key, child, token_cap=40, max_depth=3, ttl_ms=60_000)
    tools = tools_of(store, child, grant_store=grants)
    first = await call(tools["lcm_expand"], {"summaryIds": [a.condensed[0]], "includeMessages": True})
    assert "truncated" in first
    grant = await grants.require(child)
    assert 0 < grant.tokens_used <= 40
    await grants.consume(child, 1000)
    assert (await grants.require(child)).remaining_tokens == 0
    spent = await call(tools["lcm_expand"], {"summaryIds": [a.leaves[0]]})
    assert spent == "error: lcm_expand: the grant's token budget (40) is spent"


async def test_expired_and_revoked_grants_refuse(store: Store) -> None:
    a, _b = await build_planted(store)
    clock = Clock()
    grants = GrantStore(store, clock=clock)
    child = f"{a.key}:subagent:3"
    await grants.create(a.key, child, token_cap=1000, max_depth=3, ttl_ms=5_000)
    tools = tools_of(store, child, grant_store=grants)
    assert not (await call(tools["lcm_expand"], {"summaryIds": [a.leaves[0]]})).startswith("error")
    clock.now += 5_000
    assert "expired" in await call(tools["lcm_expand"], {"summaryIds": [a.leaves[0]]})
    clock.now -= 5_000
    await grants.revoke(child, "done")
    assert "revoked (done)" in await call(tools["lcm_expand"], {"summaryIds": [a.leaves[0]]})


async def test_grants_persist_and_children_never_exceed_parents(store: Store) -> None:
    clock = Clock()
    grants = GrantStore(store, clock=clock)
    await grants.create("main", "main:sub:1", token_cap=500, max_depth=2, ttl_ms=10_000)
    again = GrantStore(store, clock=clock)
    stored = await again.get("main:sub:1")
    assert stored is not None and stored.allowed_session_keys == ("main",) and stored.token_cap == 500
    await again.consume("main:sub:1", 200)
    nested = await again.create("main:sub:1", "main:sub:1:sub", token_cap=10_000, max_depth=9, ttl_ms=60_000)
    assert nested.token_cap == 300 and nested.max_depth == 2
    assert nested.expires_at_ms == stored.expires_at_ms and nested.allowed_session_keys == ("main",)
    with pytest.raises(GrantError, match="outside the parent's grant"):
        await again.create("main:sub:1", "x", token_cap=1, max_depth=1, ttl_ms=1, allowed_session_keys=["other"])
    clock.now += 10_000
    with pytest.raises(GrantError, match="cannot delegate: the grant for main:sub:1 expired"):
        await again.create("main:sub:1", "y", token_cap=1, max_depth=1, ttl_ms=1)
    with pytest.raises(GrantError, match="token_cap"):
        await again.create("main", "z", token_cap=0, max_depth=1, ttl_ms=1)
    with pytest.raises(GrantError, match="cannot grant itself"):
        await again.create("main", "main", token_cap=1, max_depth=1, ttl_ms=1)


async def test_prepare_and_end_grant_hooks(store: Store) -> None:
    params = PrepareSubagentSpawnParams(parent_session_key="p", child_session_key="p:sub", ttl_ms=1000)
    grants = GrantStore(store)
    preparation = await prepare_grant(store, params, token_cap=123, grants=grants)
    live = await grants.require("p:sub")
    assert live.token_cap == 123 and live.max_depth == 3
    await preparation.rollback()
    assert "spawn failed" in (await grants.get("p:sub")).revoked_reason  # type: ignore[union-attr, operator]
    await prepare_grant(store, params, token_cap=5)
    await end_grant(store, SubagentEndedParams(child_session_key="p:sub", reason="completed"))
    with pytest.raises(GrantError, match="subagent completed"):
        await grants.require("p:sub")


async def test_expand_query_in_process_answers_with_newest_fact(store: Store) -> None:
    a, _b = await build_planted(store)
    grants = GrantStore(store)
    tools = tools_of(store, a.key, grant_store=grants)
    out = json.loads(
        await call(tools["lcm_expand_query"], {"prompt": "What is the vault17 code?", "query": "vault17 code"})
    )
    assert set(out) == {"answer", "citedIds", "expandedSummaryCount", "totalSourceTokens", "truncated"}
    first_line = out["answer"].splitlines()[0]
    assert "777001" in first_line  # the update is raw and newest: it leads
    assert "482913" in out["answer"]  # the original, found by expanding the leaf under the condensed node
    assert a.leaves[0] in out["citedIds"] and f"msg_{a.ids[0]}" in out["citedIds"]
    assert out["expandedSummaryCount"] >= 1 and out["totalSourceTokens"] > 0
    async with store.read() as conn:
        rows = await conn.exec_driver_sql("SELECT session_key, value_json FROM engine_state WHERE name = 'grant'")
        states = [json.loads(r[1]) for r in rows]
    assert len(states) == 1 and states[0]["revoked_reason"] == "expansion finished"


async def test_expand_query_through_a_spawned_child(store: Store) -> None:
    a, _b = await build_planted(store)
    grants = GrantStore(store)
    seen: list[ExpansionTask] = []

    async def spawn(task: ExpansionTask) -> str:
        # what Runtime.spawn_subagent does: the engine's prepare hook grants the child, then it runs
        seen.append(task)
        params = PrepareSubagentSpawnParams(
            parent_session_key=task.parent_session_key, child_session_key=task.child_session_key
        )
        await prepare_grant(store, params, token_cap=task.token_cap, grants=grants)
        child = tools_of(store, task.child_session_key, grant_store=grants)
        text_out = await call(child["lcm_expand"], {"summaryIds": task.summary_ids, "includeMessages": True})
        refused = await call(child["lcm_expand_query"], {"prompt": "nested?", "query": "x"})
        assert "cannot be called from a delegated sub-agent" in refused
        answer = "482913" if "482913" in text_out else "unknown"
        return "Here you go:\n" + json.dumps(
            {
                "answer": answer,
                "citedIds": task.summary_ids,
                "expandedSummaryCount": 1,
                "totalSourceTokens": 9,
                "truncated": False,
            }
        )

    tools = tools_of(store, a.key, grant_store=grants, spawn=spawn)
    out = json.loads(
        await call(tools["lcm_expand_query"], {"prompt": "old vault17 code?", "summaryIds": [a.leaves[0]]})
    )
    assert out["answer"] == "482913" and out["citedIds"] == [a.leaves[0]]
    task = seen[0]
    assert task.parent_session_key == a.key and task.child_session_key.startswith(a.key + ":subagent:")
    assert a.leaves[0] in task.prompt and "Never call lcm_expand_query" in task.prompt
    with pytest.raises(GrantError, match="revoked"):
        await grants.require(task.child_session_key)


@pytest.mark.parametrize(
    ("reply", "code"),
    [
        ("", "DELEGATED_EXPANSION_REPLY_MISSING"),
        ("not json", "DELEGATED_EXPANSION_REPLY_INVALID"),
        ('{"answer": 3}', "DELEGATED_EXPANSION_REPLY_INVALID"),
    ],
)
async def test_expand_query_bad_child_replies(store: Store, reply: str, code: str) -> None:
    async def spawn(_task: ExpansionTask) -> str:
        return reply

    a, _b = await build_planted(store)
    tools = tools_of(store, a.key, spawn=spawn)
    out = json.loads(await call(tools["lcm_expand_query"], {"prompt": "q", "summaryIds": [a.leaves[0]]}))
    assert out["errorCode"] == code and out["answer"] == ""


async def test_expand_query_spawn_failure_and_timeout(store: Store) -> None:
    async def broken(_task: ExpansionTask) -> str:
        raise RuntimeError("gateway down")

    async def slow(_task: ExpansionTask) -> str:
        await asyncio.Event().wait()
        return ""

    out = json.loads(await call(tools_of(store, "k", spawn=broken)["lcm_expand_query"], {"prompt": "q", "query": "x"}))
    assert out["errorCode"] == "DELEGATED_EXPANSION_SPAWN_FAILED" and "gateway down" in out["error"]
    out = json.loads(
        await call(
            tools_of(store, "k", spawn=slow)["lcm_expand_query"], {"prompt": "q", "query": "x", "timeoutMs": 1000}
        )
    )
    assert out["errorCode"] == "DELEGATED_EXPANSION_TIMEOUT"


async def test_expand_query_needs_query_or_ids(store: Store) -> None:
    out = await call(tools_of(store, "k")["lcm_expand_query"], {"prompt": "q"})
    assert out == "error: lcm_expand_query: give 'query' or 'summaryIds'"


async def _leaf_for(store: Store, history: History) -> str:
    """A leaf summary over the first two messages of `history`'s key."""
    async with store.transaction() as conn:
        session = await repo.active_session(conn, history.key)
        assert session is not None
        summary = repo.NewSummary(
            kind="leaf", content="b leaf", token_count=3, summarizer="test", source_message_ids=history.ids[:2]
        )
        return await repo.insert_summary(conn, session, summary)


async def test_engine_hooks_grant_and_revoke_the_child_tools(store: Store) -> None:
    """The lossless engine's prepare/ended hooks drive the same grants the child's lcm_expand checks."""
    from engines.lossless.engine import create_engine
    from openclaw_ctx.contract import EngineContext

    a, _b = await build_planted(store)
    engine = create_engine(EngineContext(store=store, config={"maxExpandTokens": 5000}))
    child = f"{a.key}:subagent:engine"
    await engine.prepare_subagent_spawn(PrepareSubagentSpawnParams(parent_session_key=a.key, child_session_key=child))
    tools = {t.name: t for t in engine.tools(child)}
    out = await call(tools["lcm_expand"], {"summaryIds": [a.leaves[0]], "includeMessages": True})
    assert "the vault17 code is 482913" in out
    await engine.on_subagent_ended(SubagentEndedParams(child_session_key=child, reason="completed"))
    assert "revoked" in await call(tools["lcm_expand"], {"summaryIds": [a.leaves[0]]})
    main_tools = {t.name: t for t in engine.tools(a.key)}
    answer = json.loads(await call(main_tools["lcm_expand_query"], {"prompt": "vault170?", "query": "vault170"}))
    assert "vault170 holds the spare key 555" in answer["answer"]


async def test_grep_tool_over_sqlite_like_bounds_answers_with_the_limit(store: Store) -> None:
    """Issue #13: the model's lcm_grep gets an error naming the bound, never a crash."""
    a, _b = await build_planted(store)
    tools = tools_of(store, a.key)
    many = await call(tools["lcm_grep"], {"pattern": " ".join(f"文{i}" for i in range(1001))})
    assert many.startswith("error: lcm_grep: ") and "at most 256" in many
    long = await call(tools["lcm_grep"], {"pattern": "中" * 20_000, "allSessions": True})
    assert long.startswith("error: lcm_grep: ") and "at most 50000" in long


def test_a_grant_stored_before_reads_back_and_stores_the_same() -> None:
    """Grants in engine_state keep their snake_case shape: a database written before opens unchanged."""
    stored = {
        "child_session_key": "k:subagent:1",
        "parent_session_key": "k",
        "allowed_session_keys": ["k", "other"],
        "token_cap": 4000,
        "max_depth": 3,
        "created_at_ms": 1_000,
        "expires_at_ms": 301_000,
        "tokens_used": 120,
        "revoked_at_ms": None,
        "revoked_reason": None,
    }
    grant = Grant.from_json(stored)
    assert grant.allowed_session_keys == ("k", "other") and grant.remaining_tokens == 3880
    assert grant.live(2_000) and not grant.live(301_000) and grant.allows("other")
    assert grant.to_json() == stored
