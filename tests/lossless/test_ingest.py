"""Ingest, batch ingest and bootstrap: idempotent on entry ids, never on content; legacy state adopted."""

from __future__ import annotations

from pathlib import Path

import pytest
from lcm_helpers import (
    active_id,
    all_message_ids,
    conversation,
    host_persist,
    make_engine,
    reachable_message_ids,
    tool_result,
    user,
)
from sqlalchemy import text

from engines.lossless.large_content import load_large_content
from openclaw_ctx.contract import BootstrapParams, CompactParams, IngestBatchParams, IngestParams
from openclaw_ctx.errors import NotFoundError
from openclaw_ctx.messages import AssistantMessage, TextContent
from openclaw_ctx.store import repo
from openclaw_ctx.store.store import Store

KEY = "agent:main:ing:1"


async def count(store: Store, sql: str, **params: object) -> int:
    async with store.read() as conn:
        return int((await conn.execute(text(sql), params)).scalar_one())


async def test_ingest_is_idempotent_on_entry_id_not_content(store: Store) -> None:
    engine = make_engine(store)
    m = user("same words")
    first = await engine.ingest(IngestParams(session_id="s1", session_key=KEY, message=m, entry_id="e1"))
    again = await engine.ingest(IngestParams(session_id="s1", session_key=KEY, message=m, entry_id="e1"))
    other = await engine.ingest(IngestParams(session_id="s1", session_key=KEY, message=m, entry_id="e2"))
    assert (first.ingested, again.ingested, other.ingested) == (True, False, True)
    assert await count(store, "SELECT count(*) FROM messages WHERE session_key=:k", k=KEY) == 2
    assert await count(store, "SELECT count(*) FROM context_items") == 2


async def test_a_replayed_provider_reply_without_entry_ids_is_ingested_once(store: Store) -> None:
    engine = make_engine(store)

    def reply(text_: str, response_id: str) -> AssistantMessage:
        return AssistantMessage(content=[TextContent(text=text_)], provider="openai", response_id=response_id)

    batch = [user("hi"), reply("hello", "chatcmpl-1")]
    first = await engine.ingest_batch(IngestBatchParams(session_id="s1", session_key=KEY, messages=batch))
    # A restarted host replays the reply with no entry id: the response id (and its content) matches.
    again = await engine.ingest(IngestParams(session_id="s1", session_key=KEY, message=batch[1]))
    # A server that answers every request with one constant id loses nothing: the content differs.
    constant = await engine.ingest(IngestParams(session_id="s1", session_key=KEY, message=reply("bye", "chatcmpl-1")))
    assert (first.ingested_count, again.ingested, constant.ingested) == (2, False, True)
    assert await count(store, "SELECT count(*) FROM messages WHERE session_key=:k", k=KEY) == 3


async def test_host_persisted_messages_are_not_ingested_twice(store: Store) -> None:
    pairs = conversation(2)
    await host_persist(store, KEY, pairs)
    engine = make_engine(store)
    sid = await active_id(store, KEY)
    result = await engine.ingest_batch(
        IngestBatchParams(
            session_id=sid, session_key=KEY, messages=[m for m, _ in pairs], entry_ids=[e for _, e in pairs]
        )
    )
    assert result.ingested_count == 0
    single = await engine.ingest(IngestParams(session_id=sid, session_key=KEY, message=pairs[0][0], entry_id="e0u"))
    assert not single.ingested
    assert await count(store, "SELECT count(*) FROM messages") == len(pairs)


async def test_batch_replay_after_restart_adds_nothing(store: Store, db_path: Path) -> None:
    pairs = conversation(3)
    batch = IngestBatchParams(
        session_id="s1", session_key=KEY, messages=[m for m, _ in pairs], entry_ids=[e for _, e in pairs]
    )
    assert (await make_engine(store).ingest_batch(batch)).ingested_count == len(pairs)
    await store.close()
    reopened = await Store.open(db_path)
    try:
        assert (await make_engine(reopened).ingest_batch(batch)).ingested_count == 0
        assert await count(reopened, "SELECT count(*) FROM messages") == len(pairs)
        assert await count(reopened, "SELECT count(*) FROM context_items") == len(pairs)
    finally:
        await reopened.close()


async def test_batch_with_a_repeated_id_is_refused_whole(store: Store) -> None:
    engine = make_engine(store)
    with pytest.raises(ValueError, match="twice"):
        await engine.ingest_batch(
            IngestBatchParams(session_id="s", session_key=KEY, messages=[user("a"), user("b")], entry_ids=["x", "x"])
        )
    with pytest.raises(ValueError, match="entry_ids"):
        await engine.ingest_batch(
            IngestBatchParams(session_id="s", session_key=KEY, messages=[user("a")], entry_ids=["x", "y"])
        )
    assert await count(store, "SELECT count(*) FROM messages") == 0


async def test_heartbeats_and_ignored_sessions_store_nothing(store: Store) -> None:
    engine = make_engine(store, ignoreSessionPatterns=["agent:*:cron:**"])
    beat = await engine.ingest(IngestParams(session_id="s", session_key=KEY, message=user("HB"), is_heartbeat=True))
    cron = await engine.ingest(IngestParams(session_id="c", session_key="agent:main:cron:daily", message=user("x")))
    assert not beat.ingested and not cron.ingested
    assert await count(store, "SELECT count(*) FROM messages") == 0
    boot = await engine.bootstrap(BootstrapParams(session_id="c", session_key="agent:main:cron:daily"))
    assert not boot.bootstrapped and "ignore" in (boot.reason or "")
    assert await count(store, "SELECT count(*) FROM engine_state") == 0


async def test_engine_side_ingest_externalises_large_content(store: Store) -> None:
    engine = make_engine(store, largeFileTokenThreshold=300)
    body = "\n".join(f"def handler_{i}(request):\n    return {i}" for i in range(200))
    await engine.ingest(IngestParams(session_id="s", session_key=KEY, message=tool_result("t1", body), entry_id="t1"))
    async with store.read() as conn:
        file_id = (await conn.execute(text("SELECT file_id FROM large_content"))).scalar_one()
        record = await load_large_content(conn, file_id)
        item_tokens = (await conn.execute(text("SELECT token_count FROM context_items"))).scalar_one()
        full_tokens = (await conn.execute(text("SELECT token_count FROM messages"))).scalar_one()
        with pytest.raises(NotFoundError):
            await load_large_content(conn, "file_0000000000000000")
    assert record.content == body and record.kind == "tool_output" and record.name == "read_file"
    assert "symbols: def handler_0" in record.stub
    assert item_tokens < full_tokens // 5


async def _legacy_history(store: Store) -> str:
    """Write what a legacy compaction leaves: a legacy summary over old messages, and a rotated session."""
    pairs = conversation(8)
    session = await host_persist(store, KEY, pairs)
    async with store.transaction() as conn:
        entries = await repo.load_context(conn, session.session_id)
        covered, kept = entries[:12], entries[12:]
        summary = repo.NewSummary(
            kind="legacy",
            content="Legacy summary of turns 0-3: FACT_0 FACT_1 FACT_2 FACT_3",
            token_count=20,
            summarizer="extractive-v2",
            source_message_ids=[e.message_id for e in covered if e.message_id is not None],
        )
        await repo.insert_summary(conn, session, summary)
        items = [("summary", summary.summary_id, 30)] + [("message", e.message_id, e.token_count) for e in kept]
        successor = await repo.rotate_session(conn, session, items, reason="compaction", engine_id="legacy")  # type: ignore[arg-type]
    return successor.session_id


async def test_bootstrap_adopts_legacy_history_and_compaction_keeps_it(store: Store) -> None:
    sid = await _legacy_history(store)
    await host_persist(store, KEY, conversation(6, start=8))
    engine = make_engine(store)
    async with store.read() as conn:
        before = [e.ref for e in await repo.load_context(conn, sid)]
    boot = await engine.bootstrap(BootstrapParams(session_id=sid, session_key=KEY))
    assert boot.bootstrapped and "legacy" in (boot.reason or "")
    again = await engine.bootstrap(BootstrapParams(session_id=sid, session_key=KEY))
    assert not again.bootstrapped
    async with store.read() as conn:
        after = [e.ref for e in await repo.load_context(conn, sid)]
        mark = await repo.get_engine_state(conn, "lossless-claw", KEY, "bootstrap")
    assert after == before and mark["previous_engine"] == "legacy" and mark["adopted_summaries"] == 1
    result = await engine.compact(CompactParams(session_id=sid, session_key=KEY, token_budget=800, force=True))
    assert result.compacted
    assert await reachable_message_ids(store, KEY) == await all_message_ids(store, KEY)
    # The legacy node is a depth-0 source like any leaf: condensed passes may take it.
    async with store.read() as conn:
        legacy_parent = await conn.scalar(
            text(
                "SELECT count(*) FROM summary_parents sp JOIN summaries s ON s.summary_id = sp.source_summary_id "
                "WHERE s.kind = 'legacy'"
            )
        )
        in_context = await conn.scalar(
            text(
                "SELECT count(*) FROM context_items ci JOIN summaries s ON s.summary_id = ci.summary_id "
                "WHERE ci.session_id = :sid AND s.kind = 'legacy'"
            ),
            {"sid": await active_id(store, KEY)},
        )
    assert legacy_parent + in_context == 1
