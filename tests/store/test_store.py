"""The Store on a real SQLite file: pragmas, bad files, FTS in the same transaction, RESTRICT edges,
idempotent appends, concurrent writers."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

import pytest
from sqlalchemy import text
from sqlalchemy.exc import IntegrityError

from openclaw_ctx import testing
from openclaw_ctx.errors import DatabaseCorruptError, StoreError
from openclaw_ctx.messages import AssistantMessage, TextContent, UserMessage
from openclaw_ctx.store import repo
from openclaw_ctx.store.store import BUSY_TIMEOUT_MS, Store


def user(text_value: str) -> UserMessage:
    return testing.user(text_value, timestamp=1_700_000_000_000)


async def seed(store: Store, key: str, texts: list[str]) -> tuple[repo.SessionRow, list[repo.AppendResult]]:
    async with store.transaction() as conn:
        session = await repo.ensure_session(conn, key)
        items = [repo.NewMessage(user(t), entry_id=f"e{i}") for i, t in enumerate(texts)]
        results = await repo.append_messages(conn, session, items, store.counter)
    return session, results


# --- pragmas -------------------------------------------------------------------------------------


async def test_every_connection_has_the_pragmas(store: Store) -> None:
    async with store.read() as conn:
        values = {
            name: await conn.scalar(text(f"PRAGMA {name}"))
            for name in ("journal_mode", "foreign_keys", "synchronous", "busy_timeout")
        }
    assert values == {"journal_mode": "wal", "foreign_keys": 1, "synchronous": 1, "busy_timeout": BUSY_TIMEOUT_MS}
    assert BUSY_TIMEOUT_MS >= 1000


# --- files that are not databases ----------------------------------------------------------------


def write(path: Path, data: bytes) -> None:
    path.write_bytes(data)


def read(path: Path) -> bytes:
    return path.read_bytes()


async def make_db(path: Path) -> bytes:
    store = await Store.open(path)
    await seed(store, "k", ["hello"] * 50)
    await store.close()
    return read(path)


async def test_text_file_is_refused_clearly_and_untouched(tmp_path: Path) -> None:
    path = tmp_path / "notes.txt"
    write(path, b"just some notes\n")
    with pytest.raises(DatabaseCorruptError, match=r"notes\.txt: not an SQLite database"):
        await Store.open(path)
    assert read(path) == b"just some notes\n"


@pytest.mark.parametrize("damage", ["pages", "truncated", "header_only"])
async def test_damaged_sqlite_file_is_refused_clearly(tmp_path: Path, damage: str) -> None:
    good = await make_db(tmp_path / "good.db")
    path = tmp_path / "bad.db"
    if damage == "pages":
        data = good[:100] + os.urandom(len(good) - 100)
    elif damage == "truncated":
        data = good[:1000]
    else:
        data = b"SQLite format 3\x00" + os.urandom(4000)
    write(path, data)
    for upgrade in (True, False):
        with pytest.raises(DatabaseCorruptError, match=r"bad\.db: the database is corrupt or not SQLite"):
            await Store.open(path, upgrade=upgrade)
    assert read(path) == data


async def test_directory_is_refused(tmp_path: Path) -> None:
    with pytest.raises(StoreError, match="is a directory"):
        await Store.open(tmp_path)


# --- FTS in the same transaction -----------------------------------------------------------------


async def fts_ids(store: Store, table: str, term: str) -> list[int]:
    async with store.read() as conn:
        rows = await conn.execute(text(f"SELECT rowid FROM {table} WHERE {table} MATCH :q ORDER BY rowid"), {"q": term})
        return [r[0] for r in rows]


async def test_fts_finds_a_message_written_in_the_same_transaction(store: Store) -> None:
    async with store.transaction() as conn:
        session = await repo.ensure_session(conn, "k")
        [result] = await repo.append_messages(conn, session, [repo.NewMessage(user("zebra crossing"))], store.counter)
        found = await conn.scalar(text("SELECT rowid FROM messages_fts WHERE messages_fts MATCH 'zebra'"))
        assert found == result.message_id
    assert await fts_ids(store, "messages_fts", "zebra") == [result.message_id]
    # porter stemming: the plural finds the singular
    assert await fts_ids(store, "messages_fts", "crossings") == [result.message_id]


async def test_rolled_back_write_leaves_neither_row_nor_index_entry(store: Store) -> None:
    with pytest.raises(RuntimeError, match="boom"):
        async with store.transaction() as conn:
            session = await repo.ensure_session(conn, "k")
            await repo.append_messages(conn, session, [repo.NewMessage(user("platypus"))], store.counter)
            await repo.insert_summary(
                conn, session, repo.NewSummary(kind="leaf", content="platypus summary", token_count=3, summarizer="t")
            )
            raise RuntimeError("boom")
    async with store.read() as conn:
        assert await conn.scalar(text("SELECT count(*) FROM messages")) == 0
        assert await conn.scalar(text("SELECT count(*) FROM summaries")) == 0
        assert await conn.scalar(text("SELECT count(*) FROM sessions")) == 0
    assert await fts_ids(store, "messages_fts", "platypus") == []
    assert await fts_ids(store, "summaries_fts", "platypus") == []
    # The index is consistent with its content table (FTS5's own integrity check).
    async with store.transaction() as conn:
        await conn.execute(text("INSERT INTO messages_fts(messages_fts) VALUES ('integrity-check')"))
        await conn.execute(text("INSERT INTO summaries_fts(summaries_fts) VALUES ('integrity-check')"))


async def test_summary_content_is_searchable_and_updates_follow(store: Store) -> None:
    async with store.transaction() as conn:
        session = await repo.ensure_session(conn, "k")
        sid = await repo.insert_summary(
            conn, session, repo.NewSummary(kind="leaf", content="the walrus decided", token_count=4, summarizer="t")
        )
    assert len(await fts_ids(store, "summaries_fts", "walrus")) == 1
    async with store.transaction() as conn:
        renamed = text("UPDATE summaries SET content = 'the narwhal decided' WHERE summary_id = :s")
        await conn.execute(renamed, {"s": sid})
    assert await fts_ids(store, "summaries_fts", "walrus") == []
    assert len(await fts_ids(store, "summaries_fts", "narwhal")) == 1


# --- edges are RESTRICT ----------------------------------------------------------------------------


async def test_deleting_a_covered_message_fails(store: Store) -> None:
    session, results = await seed(store, "k", ["one", "two"])
    ids = [r.message_id for r in results]
    async with store.transaction() as conn:
        await conn.execute(text("DELETE FROM context_items WHERE session_id = :s"), {"s": session.session_id})
        await repo.insert_summary(
            conn,
            session,
            repo.NewSummary(kind="leaf", content="one two", token_count=2, summarizer="t", source_message_ids=ids),
        )
    with pytest.raises(IntegrityError, match="FOREIGN KEY"):
        async with store.transaction() as conn:
            await conn.execute(text("DELETE FROM messages WHERE message_id = :m"), {"m": ids[0]})
    async with store.read() as conn:
        assert await conn.scalar(text("SELECT count(*) FROM messages")) == 2


async def test_deleting_a_source_summary_fails(store: Store) -> None:
    session, _ = await seed(store, "k", ["x"])
    async with store.transaction() as conn:
        leaf = await repo.insert_summary(
            conn, session, repo.NewSummary(kind="leaf", content="leaf", token_count=1, summarizer="t")
        )
        await repo.insert_summary(
            conn,
            session,
            repo.NewSummary(
                kind="condensed", content="top", token_count=1, summarizer="t", depth=1, source_summary_ids=[leaf]
            ),
        )
    with pytest.raises(IntegrityError, match="FOREIGN KEY"):
        async with store.transaction() as conn:
            await conn.execute(text("DELETE FROM summaries WHERE summary_id = :s"), {"s": leaf})


# --- idempotent appends -----------------------------------------------------------------------------


async def test_append_is_idempotent_on_entry_id(store: Store) -> None:
    session, first = await seed(store, "k", ["a", "b"])
    async with store.transaction() as conn:
        again = await repo.append_messages(
            conn,
            session,
            [repo.NewMessage(user("a"), entry_id="e0"), repo.NewMessage(user("c"), entry_id="e2")],
            store.counter,
        )
    assert [r.inserted for r in again] == [False, True]
    assert again[0].message_id == first[0].message_id
    async with store.read() as conn:
        seqs = (await conn.execute(text("SELECT seq, entry_id FROM messages ORDER BY seq"))).all()
        items = await conn.scalar(text("SELECT count(*) FROM context_items"))
    assert [tuple(r) for r in seqs] == [(1, "e0"), (2, "e1"), (3, "e2")]
    assert items == 3


async def test_same_content_different_entry_ids_are_both_kept(store: Store) -> None:
    """Never dedupe by content: two identical messages with their own entry ids are two rows."""
    _, results = await seed(store, "k", ["same", "same"])
    assert [r.inserted for r in results] == [True, True]
    assert results[0].message_id != results[1].message_id


async def test_append_stores_the_token_count_at_write(store: Store) -> None:
    message = AssistantMessage(content=[TextContent(text="counting tokens once")])
    async with store.transaction() as conn:
        session = await repo.ensure_session(conn, "k")
        [result] = await repo.append_messages(conn, session, [repo.NewMessage(message)], store.counter)
    async with store.read() as conn:
        stored = await conn.scalar(text("SELECT token_count FROM messages"))
    assert stored == result.token_count == repo.message_token_count(message, store.counter)


# --- concurrent writers ------------------------------------------------------------------------------


async def test_two_stores_on_one_file_write_concurrently(db_path: Path) -> None:
    first = await Store.open(db_path)
    second = await Store.open(db_path)

    async def writer(store: Store, key: str, n: int) -> None:
        for i in range(n):
            async with store.transaction() as conn:
                session = await repo.ensure_session(conn, key)
                await repo.append_messages(
                    conn, session, [repo.NewMessage(user(f"{key} {i}"), entry_id=f"{key}-{i}")], store.counter
                )

    try:
        await asyncio.gather(*(writer(s, f"key{j}-{id(s)}", 12) for j, s in enumerate((first, second, first, second))))
    finally:
        await first.close()
        await second.close()
    check = await Store.open(db_path)
    async with check.read() as conn:
        per_key = (await conn.execute(text("SELECT session_key, count(*) FROM messages GROUP BY session_key"))).all()
    await check.close()
    assert sorted(n for _, n in per_key) == [12, 12, 12, 12]


# --- commit_compaction: the one compaction transaction -------------------------------------------


def _leaf(results: list[repo.AppendResult]) -> repo.NewSummary:
    return repo.NewSummary(
        kind="leaf",
        content="the first two",
        token_count=7,
        summarizer="test",
        source_message_ids=[r.message_id for r in results[:2]],
    )


async def test_commit_compaction_writes_summary_successor_and_audit_row(store: Store) -> None:
    session, results = await seed(store, "k", ["a", "b", "c"])
    leaf = _leaf(results)
    items = [
        repo.ItemRef("summary", leaf.summary_id, 7),
        repo.ItemRef("message", results[2].message_id, results[2].token_count),
    ]
    record = repo.CompactionRecord(
        engine_id="legacy", trigger="manual", tokens_before=99, duration_ms=3, details={"why": "test"}
    )
    async with store.transaction() as conn:
        successor = await repo.commit_compaction(conn, session, [leaf], items, record)
    async with store.read() as conn:
        old = await repo.get_session(conn, session.session_id)
        entries = await repo.load_context(conn, successor.session_id)
        audit = (await conn.execute(text("SELECT * FROM compactions"))).mappings().one()
    assert old.status == "rotated"
    assert (successor.parent_session_id, successor.rotation_reason) == (session.session_id, "compaction")
    assert [e.ref for e in entries] == items
    assert dict(audit) | {"compaction_id": 0, "started_at": ""} == {
        "compaction_id": 0,
        "session_key": "k",
        "before_session_id": session.session_id,
        "after_session_id": successor.session_id,
        "engine_id": "legacy",
        "trigger": "manual",
        "ok": 1,
        "compacted": 1,
        "reason": None,
        "tokens_before": 99,
        "tokens_after": 7 + results[2].token_count,
        "summary_id": leaf.summary_id,
        "first_kept_message_id": None,
        "first_kept_entry_id": None,
        "summaries_created": 1,
        "started_at": "",
        "duration_ms": 3,
        "details_json": '{"why": "test"}',
    }


async def test_commit_compaction_failing_at_the_audit_row_leaves_nothing(store: Store) -> None:
    session, results = await seed(store, "k", ["a", "b", "c"])
    leaf = _leaf(results)
    # The audit row is the last statement; a first-kept message that does not exist fails its FK.
    record = repo.CompactionRecord(engine_id="legacy", trigger="manual", tokens_before=9, duration_ms=0,
                                   first_kept_message_id=999_999)  # fmt: skip
    with pytest.raises(IntegrityError):
        async with store.transaction() as conn:
            await repo.commit_compaction(conn, session, [leaf], [repo.ItemRef("summary", leaf.summary_id, 7)], record)
    async with store.read() as conn:
        counts = [
            await conn.scalar(text(f"SELECT count(*) FROM {table}"))
            for table in ("summaries", "summary_messages", "compactions")
        ]
        sessions = (await conn.execute(text("SELECT session_id, status FROM sessions"))).all()
        active = await repo.active_session(conn, "k")
    assert counts == [0, 0, 0]
    assert sessions == [(session.session_id, "active")]
    assert active == session


# --- typed context items -------------------------------------------------------------------------


async def test_context_items_load_typed_and_their_refs_round_trip(store: Store) -> None:
    session, results = await seed(store, "k", ["a", "b", "c"])
    leaf = repo.NewSummary(
        kind="leaf",
        content="the first two",
        token_count=7,
        summarizer="test",
        source_message_ids=[r.message_id for r in results[:2]],
        descendant_count=2,
        earliest_at="2026-01-01T00:00:00.000Z",
        latest_at="2026-01-01T00:01:00.000Z",
    )
    record = repo.CompactionRecord(engine_id="legacy", trigger="manual", tokens_before=9, duration_ms=0)
    kept = repo.ItemRef("message", results[2].message_id, results[2].token_count)
    async with store.transaction() as conn:
        successor = await repo.commit_compaction(
            conn, session, [leaf], [repo.ItemRef("summary", leaf.summary_id, 11), kept], record
        )
        head, tail = await repo.load_context(conn, successor.session_id)
        # Carrying the loaded items' refs into another successor writes the same context again.
        again = await repo.rotate_session(conn, successor, [head.ref, tail.ref], reason="test", engine_id=None)
        copied = await repo.load_context(conn, again.session_id)
    assert isinstance(head, repo.SummaryItem) and head.kind == "summary"
    assert head.summary == repo.SummaryRef(
        leaf.summary_id, "leaf", 0, "the first two", 2, leaf.earliest_at, leaf.latest_at, "test", "none"
    )
    assert (head.ordinal, head.token_count, head.summary_id) == (0, 11, leaf.summary_id)
    assert isinstance(tail, repo.MessageItem) and tail.kind == "message"
    assert (tail.message_id, tail.entry_id, tail.seq, tail.message) == (results[2].message_id, "e2", 3, user("c"))
    assert [e.ref for e in copied] == [head.ref, tail.ref] == [("summary", leaf.summary_id, 11), kept]
    assert [type(e) for e in copied] == [repo.SummaryItem, repo.MessageItem]


async def test_a_closed_store_refuses_reads_and_writes(db_path: Path) -> None:
    store = await Store.open(db_path)
    await store.close()
    await store.close()  # a second close is harmless
    with pytest.raises(StoreError, match="was closed"):
        async with store.read():
            pass
    with pytest.raises(StoreError, match="was closed"):
        async with store.transaction():
            pass
    again = await Store.open(db_path)  # the file itself is fine
    async with again.read() as conn:
        assert (await conn.exec_driver_sql("SELECT count(*) FROM sessions")).scalar() == 0
    await again.close()
