"""describe and expand over real stores: sources, children, manifests, caps and depths, with index-driven plans."""

from __future__ import annotations

import hashlib

import pytest
from sqlalchemy import text
from test_retrieval import History, add_messages, build_planted, condense, filler, summarize_oldest

from openclaw_ctx import recall as retrieval
from openclaw_ctx.errors import NotFoundError, RecallQueryError
from openclaw_ctx.recall import describe, expand
from openclaw_ctx.recall.covers import COVER_SQL
from openclaw_ctx.recall.subtree import SUBTREE_SQL
from openclaw_ctx.store import repo
from openclaw_ctx.store.store import Store

# --- describe ------------------------------------------------------------------------------------


async def test_describe_summary_sources_children_and_manifest(store: Store) -> None:
    a, _b = await build_planted(store)
    root = await describe(store, a.condensed[0], token_cap=60)
    assert isinstance(root, retrieval.SummaryDescription)
    assert [s["id"] for s in root.sources] == a.leaves
    assert root.children == [] and root.in_context
    assert root.row["depth"] == 1 and root.manifest_total == 3
    async with store.read() as conn:
        tokens = {r[0]: r[1] for r in await conn.execute(text("SELECT summary_id, token_count FROM summaries"))}
        msg_tokens = {r[0]: r[1] for r in await conn.execute(text("SELECT message_id, token_count FROM messages"))}
    lines = {m.id: m for m in root.manifest}
    assert lines[a.condensed[0]].summaries_cost == tokens[a.leaves[0]] + tokens[a.leaves[1]]
    assert lines[a.condensed[0]].messages_cost == sum(msg_tokens[i] for i in a.ids[:8])
    assert lines[a.leaves[0]].messages_cost == sum(msg_tokens[i] for i in a.ids[:4])
    assert lines[a.leaves[0]].summaries_cost == 0 and lines[a.leaves[0]].level == 1
    assert lines[a.leaves[0]].fits_cap == (lines[a.leaves[0]].messages_cost <= 60)
    leaf = await describe(store, a.leaves[0])
    assert isinstance(leaf, retrieval.SummaryDescription)
    assert leaf.source_message_ids == a.ids[:4]
    assert [c["id"] for c in leaf.children] == [a.condensed[0]] and not leaf.in_context


async def test_describe_message(store: Store) -> None:
    a, _b = await build_planted(store)
    for ref in (f"msg_{a.ids[0]}", a.ids[0], str(a.ids[0])):
        d = await describe(store, ref)
        assert isinstance(d, retrieval.MessageDescription)
        assert d.row["text"] == "the vault17 code is 482913"
        assert [c["id"] for c in d.covering] == [a.leaves[0], a.condensed[0]]
        assert d.covering[1]["inContext"] and not d.in_context
    raw = await describe(store, f"msg_{a.ids[-1]}")
    assert isinstance(raw, retrieval.MessageDescription) and raw.in_context and raw.covering == []


async def test_describe_errors(store: Store) -> None:
    with pytest.raises(NotFoundError, match="sum_nope"):
        await describe(store, "sum_nope")
    with pytest.raises(NotFoundError, match="msg_999"):
        await describe(store, "msg_999")
    with pytest.raises(RecallQueryError, match="not a summary id"):
        await describe(store, "banana")


async def test_subtree_query_plans_use_indexes(store: Store) -> None:
    """Pinned join order: every recursive step is an index SEARCH, never a SCAN of the edge tables.

    SQLite names a PRIMARY KEY's index ``sqlite_autoindex_<table>_1`` (the constraint name
    ``pk_summary_parents`` never appears in a plan).
    """
    await build_planted(store)
    async with store.read() as conn:
        rows = await conn.execute(text("EXPLAIN QUERY PLAN " + SUBTREE_SQL), {"root": "x", "max_lvl": 64})
        plan = [r[3] for r in rows]
        cover = await conn.execute(text("EXPLAIN QUERY PLAN " + COVER_SQL.text.replace("IN :ids", "IN (1, 2)")))
        cover_plan = [r[3] for r in cover]
    joined = " | ".join(plan)
    assert "USING COVERING INDEX sqlite_autoindex_summary_parents_1 (summary_id=?)" in joined
    assert "sqlite_autoindex_summary_messages_1 (summary_id=?)" in joined
    assert not any(p.startswith("SCAN summary_messages") or p.startswith("SCAN sm") for p in plan)
    assert not any(p.startswith("SCAN sp") for p in plan)
    cover_joined = " | ".join(cover_plan)
    assert "ix_summary_messages_message (message_id=?)" in cover_joined
    assert "ix_summary_parents_source (source_summary_id=?)" in cover_joined
    assert not any(p.startswith(("SCAN sm", "SCAN sp", "SCAN ci")) for p in cover_plan)


# --- expand --------------------------------------------------------------------------------------


async def test_expand_returns_original_messages_hash_equal(store: Store) -> None:
    a, _b = await build_planted(store)
    result = await expand(store, a.condensed[0], include_messages=True, token_cap=100_000)
    messages = [e for e in result.entries if e.kind == "message"]
    assert [e.id for e in messages] == [f"msg_{i}" for i in a.ids[:8]]
    for e in messages:
        original = a.texts[int(e.id[4:])]
        assert hashlib.sha256(e.text.encode()).digest() == hashlib.sha256(original.encode()).digest()
    headers = [e for e in result.entries if e.kind == "summary"]
    assert [e.id for e in headers] == a.leaves and all(e.text == "" and e.token_count == 0 for e in headers)
    assert not result.truncated and "msg_" in result.render()
    assert result.total_tokens == sum(e.token_count for e in messages)


async def test_expand_summaries_only(store: Store) -> None:
    a, _b = await build_planted(store)
    result = await expand(store, a.condensed[0])
    assert [e.id for e in result.entries] == a.leaves
    assert "Vault codes were discussed" in result.entries[0].text
    assert result.cited_ids == a.leaves


async def test_expand_token_cap_truncates(store: Store) -> None:
    a, _b = await build_planted(store)
    full = await expand(store, a.condensed[0], include_messages=True, token_cap=100_000)
    first_three = sum(e.token_count for e in full.entries if e.kind == "message")  # whole cost
    cap = full.entries[1].token_count + full.entries[2].token_count  # header(0) + two messages
    capped = await expand(store, a.condensed[0], include_messages=True, token_cap=cap)
    assert capped.truncated and capped.total_tokens <= cap < first_three
    kept, every = [e.id for e in capped.entries], [e.id for e in full.entries]
    assert kept[:3] == every[:3] and kept == [i for i in every if i in kept], "nearest first, in tree order"
    assert sorted(kept + capped.more_ids) == sorted(every) and not set(kept) & set(capped.more_ids)
    assert "truncated" in capped.render()


async def test_expand_returns_what_a_summary_covers_directly_before_older_history(store: Store) -> None:
    # A legacy summary folds in the previous one: its own messages must not lose to the older ones.
    h = History("agent:main:direct")
    await add_messages(store, h, ["an old and long note " * 200, "an old short note"])
    older = await summarize_oldest(store, h, 2, "older summary")
    direct = await add_messages(store, h, ["the planted fact: the vault code is 4417"])
    async with store.transaction() as conn:
        session = await repo.active_session(conn, h.key)
        assert session is not None
        content = "newer summary"
        sid = await repo.insert_summary(conn, session, repo.NewSummary(
            kind="legacy", content=content, token_count=store.counter.count(content), summarizer="test",
            source_summary_ids=[older], source_message_ids=direct, descendant_count=3,
        ))  # fmt: skip
    small = await expand(store, sid, include_messages=True, token_cap=60)
    assert f"msg_{direct[0]}" in small.cited_ids and small.truncated
    assert any("short note" in e.text for e in small.entries), "a smaller older message still fits after a big one"
    assert small.total_tokens <= 60


async def test_expand_max_depth(store: Store) -> None:
    h = History("agent:main:deep")
    for round_ in range(4):
        await add_messages(store, h, filler(f"r{round_}", 2))
        await summarize_oldest(store, h, 2, f"leaf {round_}")
    await condense(store, h, 2, "d1 first")
    await condense(store, h, 2, "d1 second")
    root = await condense(store, h, 2, "d2 root", depth=1)
    shallow = await expand(store, root, include_messages=True, max_depth=1, token_cap=100_000)
    assert [e.id for e in shallow.entries] == h.condensed[:2] and shallow.depth_limited
    deep = await expand(store, root, include_messages=True, max_depth=2, token_cap=100_000)
    assert [e.id for e in deep.entries if e.kind == "message"] == [f"msg_{i}" for i in h.ids]
    assert not deep.depth_limited
    summaries_only = await expand(store, root, max_depth=2)
    assert [e.id for e in summaries_only.entries] == [h.condensed[0], *h.leaves[:2], h.condensed[1], *h.leaves[2:]]
    with pytest.raises(RecallQueryError, match="max_depth"):
        await expand(store, root, max_depth=0)
    with pytest.raises(RecallQueryError, match="token_cap"):
        await expand(store, root, token_cap=0)
    with pytest.raises(NotFoundError):
        await expand(store, "sum_missing")
