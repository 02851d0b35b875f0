"""grep / describe / expand over a real store: planted facts across rotated sessions and across keys.

The helpers at the top build history the way the lossless engine does (append → leaf summary over
the oldest raw run → rotate → condensed summary over a run of summaries → rotate); the other
recall test files import them from here.
"""

from __future__ import annotations

import asyncio
import sqlite3
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sqlalchemy import event

from openclaw_ctx.errors import RecallQueryError
from openclaw_ctx.messages import AssistantMessage, TextContent, UserMessage
from openclaw_ctx.recall import grep
from openclaw_ctx.store import repo
from openclaw_ctx.store.store import Store

BASE_MS = 1_780_000_000_000  # 2026-05-28
HOUR = 3_600_000


@dataclass
class History:
    """What a build produced for one key."""

    key: str
    ids: list[int] = field(default_factory=list)
    texts: dict[int, str] = field(default_factory=dict)
    leaves: list[str] = field(default_factory=list)
    condensed: list[str] = field(default_factory=list)


async def add_messages(store: Store, history: History, texts: list[str], *, start_ms: int | None = None) -> list[int]:
    """Append messages (alternating user/assistant) to the key's active session and its context."""
    first = len(history.ids)
    items = []
    for i, body in enumerate(texts):
        ts = (start_ms if start_ms is not None else BASE_MS + (first + i) * HOUR) + i * (HOUR if start_ms else 0)
        msg: Any = (
            UserMessage(content=body, timestamp=ts)
            if (first + i) % 2 == 0
            else AssistantMessage(content=[TextContent(text=body)], timestamp=ts)
        )
        items.append(repo.NewMessage(msg, entry_id=f"{history.key}-e{first + i}"))
    async with store.transaction() as conn:
        session = await repo.ensure_session(conn, history.key)
        results = await repo.append_messages(conn, session, items, store.counter)
    ids = [r.message_id for r in results]
    history.ids.extend(ids)
    history.texts.update(zip(ids, texts, strict=True))
    return ids


async def summarize_oldest(store: Store, history: History, count: int, content: str) -> str:
    """Replace the oldest `count` raw messages of the active context by a leaf summary; rotate."""
    async with store.transaction() as conn:
        session = await repo.active_session(conn, history.key)
        assert session is not None
        entries = await repo.load_context(conn, session.session_id)
        start = next(i for i, e in enumerate(entries) if e.kind == "message")
        run = entries[start : start + count]
        assert len(run) == count and all(e.kind == "message" for e in run)
        summary = repo.NewSummary(
            kind="leaf",
            content=content,
            token_count=store.counter.count(content),
            summarizer="test",
            source_message_ids=[e.message_id for e in run],
            descendant_count=count,
            earliest_at=iso(min(getattr(e.message, "timestamp", 0) or 0 for e in run)),
            latest_at=iso(max(getattr(e.message, "timestamp", 0) or 0 for e in run)),
        )
        sid = await repo.insert_summary(conn, session, summary)
        await _rotate(conn, session, entries, start, count, ("summary", sid, summary.token_count))
    history.leaves.append(sid)
    return sid


async def condense(store: Store, history: History, count: int, content: str, *, depth: int = 0) -> str:
    """Replace the oldest run of `count` depth-`depth` summaries in the context by a condensed one; rotate."""
    async with store.transaction() as conn:
        session = await repo.active_session(conn, history.key)
        assert session is not None
        entries = await repo.load_context(conn, session.session_id)
        start = next(i for i, e in enumerate(entries) if e.kind == "summary" and e.summary.depth == depth)
        run = entries[start : start + count]
        assert len(run) == count and all(e.kind == "summary" and e.summary.depth == depth for e in run)
        summary = repo.NewSummary(
            kind="condensed",
            content=content,
            token_count=store.counter.count(content),
            summarizer="test",
            source_summary_ids=[e.summary_id for e in run],
            depth=depth + 1,
            earliest_at=min(e.summary.earliest_at for e in run),
            latest_at=max(e.summary.latest_at for e in run),
        )
        sid = await repo.insert_summary(conn, session, summary)
        await _rotate(conn, session, entries, start, count, ("summary", sid, summary.token_count))
    history.condensed.append(sid)
    return sid


async def _rotate(
    conn: Any, session: repo.SessionRow, entries: list[repo.ResolvedItem], start: int, count: int, new: Any
) -> None:
    items = [e.ref for e in entries[:start]] + [repo.ItemRef(*new)] + [e.ref for e in entries[start + count :]]
    await repo.rotate_session(conn, session, items, reason="compaction", engine_id="lossless-claw")


def iso(ms: int) -> str:
    """Epoch ms as the store's ISO text."""
    return datetime.fromtimestamp(ms / 1000, UTC).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"


def filler(prefix: str, n: int) -> list[str]:
    """Distinct, unremarkable messages."""
    return [f"{prefix} note {i}: we discussed the weather and lunch options number {i}" for i in range(n)]


async def build_planted(store: Store) -> tuple[History, History]:
    """Two keys. Key A: a fact, its near-duplicate, an update, across 3 rotations and a depth-1 node.

    A: [vault17 fact, vault170 distractor, filler] → leaf1; [filler] → leaf2; condensed(leaf1, leaf2);
       then the update of vault17 (raw, in the fresh tail). B: the same key name with another value.
    """
    a, b = History("agent:main:a"), History("agent:main:b")
    await add_messages(store, a, ["the vault17 code is 482913", "vault170 holds the spare key 555", *filler("a", 2)])
    await summarize_oldest(store, a, 4, "Vault codes were discussed. Expand for details about: vault17, vault170")
    await add_messages(store, a, filler("a2", 4))
    await summarize_oldest(store, a, 4, "Weather and lunch talk. Expand for details about: lunch")
    await condense(store, a, 2, "Earlier: vault codes and lunch. Expand for details about: vault17")
    await add_messages(store, a, ["update: the vault17 code is now 777001", *filler("a3", 1)])
    await add_messages(store, b, ["in this other chat the vault17 code is 123456", *filler("b", 3)])
    return a, b


# --- grep ----------------------------------------------------------------------------------------


async def test_planted_fact_found_across_rotated_sessions_and_scoped_by_key(store: Store) -> None:
    a, b = await build_planted(store)
    hits = await grep(store, "vault17", session_key=a.key, scope="messages")
    assert [h.id for h in hits] == [f"msg_{a.ids[-2]}", f"msg_{a.ids[0]}"]  # newest first; no vault170
    assert all(h.session_key == a.key for h in hits)
    old = hits[1]
    assert old.covering_summary_id == a.leaves[0]
    assert old.context_summary_id == a.condensed[0]
    assert not old.in_context
    assert hits[0].in_context and hits[0].covering_summary_id is None
    async with store.read() as conn:
        chain = await repo.session_chain(conn, a.key)
    assert len(chain) == 4 and old.session_id == chain[0].session_id != hits[0].session_id


async def test_all_keys_search_finds_every_key(store: Store) -> None:
    a, b = await build_planted(store)
    hits = await grep(store, "vault17 code", scope="messages")
    assert {h.id for h in hits} == {f"msg_{a.ids[0]}", f"msg_{a.ids[-2]}", f"msg_{b.ids[0]}"}
    assert {h.session_key for h in hits} == {a.key, b.key}


async def test_updated_fact_recency_wins(store: Store) -> None:
    a, _b = await build_planted(store)
    top = (await grep(store, "vault17 code", session_key=a.key, sort="recency", limit=1))[0]
    assert "777001" in top.snippet
    ranked = await grep(store, "vault17 code", session_key=a.key, sort="relevance", scope="messages")
    assert {h.id for h in ranked} == {f"msg_{a.ids[0]}", f"msg_{a.ids[-2]}"}
    assert all(h.score is not None and h.score < 0 for h in ranked)
    assert [h.score for h in ranked] == sorted(h.score or 0 for h in ranked)


async def test_absent_key_returns_nothing(store: Store) -> None:
    await build_planted(store)
    assert list(await grep(store, "vault99")) == []
    assert list(await grep(store, "vault17", session_key="agent:main:nobody")) == []


async def test_summary_scope_reports_depth_and_kind(store: Store) -> None:
    a, _b = await build_planted(store)
    hits = await grep(store, "vault17", session_key=a.key, scope="summaries")
    by_id = {h.id: h for h in hits}
    assert set(by_id) == {a.leaves[0], a.condensed[0]}
    assert by_id[a.condensed[0]].depth == 1 and by_id[a.condensed[0]].summary_kind == "condensed"
    assert by_id[a.leaves[0]].depth == 0


async def test_both_scopes_merge(store: Store) -> None:
    a, _b = await build_planted(store)
    hits = await grep(store, "vault17", session_key=a.key)
    assert {h.kind for h in hits} == {"message", "summary"}
    assert hits[0].id == f"msg_{a.ids[-2]}"  # the raw update is the newest evidence


async def test_regex_mode(store: Store) -> None:
    a, b = await build_planted(store)
    hits = await grep(store, r"vault17\b.*\d{6}", mode="regex", scope="messages")
    assert {h.id for h in hits} == {f"msg_{a.ids[0]}", f"msg_{a.ids[-2]}", f"msg_{b.ids[0]}"}
    assert hits.strategy == "regex" and hits.complete
    alternation = await grep(store, "482913|123456", mode="regex", scope="messages")  # lossless-claw #669
    assert {h.id for h in alternation} == {f"msg_{a.ids[0]}", f"msg_{b.ids[0]}"}
    scoped = await grep(store, "vault1[0-9]0", mode="regex", session_key=a.key, scope="messages")
    assert [h.id for h in scoped] == [f"msg_{a.ids[1]}"]
    with pytest.raises(RecallQueryError, match="invalid regular expression"):
        await grep(store, "vault(", mode="regex")


async def test_regex_scan_is_bounded(store: Store, monkeypatch: pytest.MonkeyPatch) -> None:
    h = History("agent:main:big")
    await add_messages(store, h, [f"row {i} zz" for i in range(30)])
    monkeypatch.setattr("openclaw_ctx.recall.regex_scan.REGEX_PAGE", 5)
    monkeypatch.setattr("openclaw_ctx.recall.regex_scan.REGEX_MAX_SCAN", 10)
    hits = await grep(store, r"row \d+ zz$", mode="regex", session_key=h.key, limit=50)
    assert len(hits) == 10 and not hits.complete
    assert hits[0].snippet == "row 29 zz"


async def test_cjk_falls_back_to_like_scoped_by_key(store: Store) -> None:
    a, b = History("k:cjk:a"), History("k:cjk:b")
    await add_messages(store, a, ["我的密码是四八二九一三", "别的内容"])
    await add_messages(store, b, ["他的密码是一二三"])
    hits = await grep(store, "密码", session_key=a.key)
    assert [h.id for h in hits] == [f"msg_{a.ids[0]}"] and hits.strategy.startswith("like")
    both = await grep(store, "密码 一二三", scope="messages")  # AND semantics
    assert [h.id for h in both] == [f"msg_{b.ids[0]}"]


async def test_any_fts_failure_falls_back_to_like(store: Store, db_path: Path) -> None:
    a, _b = await build_planted(store)
    conn = sqlite3.connect(db_path)
    conn.executescript(
        "DROP TRIGGER messages_fts_ai; DROP TRIGGER messages_fts_ad; DROP TRIGGER messages_fts_au; "
        "DROP TABLE messages_fts;"
    )
    conn.close()
    hits = await grep(store, "vault17 code", session_key=a.key, scope="messages")
    assert hits.strategy == "like"
    assert [h.id for h in hits] == [f"msg_{a.ids[-2]}", f"msg_{a.ids[0]}"]


@pytest.mark.parametrize("pattern", ['a, b "', "(vault17", "NEAR(x y", "code:*", "🙂", "^x", "vault17 AND"])
async def test_hostile_patterns_never_fail(store: Store, pattern: str) -> None:
    await build_planted(store)
    await grep(store, pattern)


async def test_since_and_before(store: Store) -> None:
    h = History("agent:main:time")
    await add_messages(store, h, ["alpha report one", "alpha report two", "alpha report three"])
    # timestamps are BASE_MS + i hours
    since = iso(BASE_MS + HOUR)
    hits = await grep(store, "alpha", session_key=h.key, since=since)
    assert [x.id for x in hits] == [f"msg_{h.ids[2]}", f"msg_{h.ids[1]}"]
    hits = await grep(store, "alpha", session_key=h.key, before=since)
    assert [x.id for x in hits] == [f"msg_{h.ids[0]}"]
    with pytest.raises(RecallQueryError, match="ISO-8601"):
        await grep(store, "alpha", since="yesterday")


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"limit": 0}, "limit"),
        ({"limit": 201}, "limit"),
        ({"mode": "fuzzy"}, "mode"),
        ({"scope": "files"}, "scope"),
        ({"sort": "random"}, "sort"),
    ],
)
async def test_bad_arguments(store: Store, kwargs: dict[str, Any], message: str) -> None:
    with pytest.raises(RecallQueryError, match=message):
        await grep(store, "x", **kwargs)
    with pytest.raises(RecallQueryError, match="empty"):
        await grep(store, "  ")


async def test_scoped_fts_query_plan_is_index_driven(store: Store) -> None:
    """The key-scoped FTS query drives from the FTS index and looks messages up by rowid: no table scan."""
    a, _b = await build_planted(store)
    captured: list[tuple[str, Any]] = []

    def capture(_conn: Any, _cursor: Any, statement: str, parameters: Any, _ctx: Any, _many: bool) -> None:
        if "MATCH" in statement:
            captured.append((statement, parameters))

    event.listen(store.engine.sync_engine, "before_cursor_execute", capture)
    try:
        await grep(store, "vault17", session_key=a.key, sort="relevance")
    finally:
        event.remove(store.engine.sync_engine, "before_cursor_execute", capture)
    assert len(captured) == 2
    async with store.read() as conn:
        for statement, parameters in captured:
            plan = " | ".join(r[3] for r in await conn.exec_driver_sql("EXPLAIN QUERY PLAN " + statement, parameters))
            assert "VIRTUAL TABLE INDEX" in plan
            assert "USING INTEGER PRIMARY KEY" in plan
            scans = [p for p in plan.split(" | ") if p.startswith("SCAN") and "VIRTUAL TABLE" not in p]
            assert scans == [] and " IN " not in statement


@pytest.fixture(scope="module")
def planted_db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One planted database shared by the property test below (it only reads)."""
    path = tmp_path_factory.mktemp("prop") / "planted.db"

    async def build() -> None:
        store = await Store.open(path)
        try:
            await build_planted(store)
        finally:
            await store.close()

    asyncio.run(build())
    return path


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(pattern=st.text(min_size=1, max_size=40), mode=st.sampled_from(["full_text", "regex"]))
def test_any_pattern_gives_hits_or_a_clear_error(planted_db: Path, pattern: str, mode: str) -> None:
    async def search() -> None:
        store = await Store.open(planted_db, upgrade=False)
        try:
            for key in ("agent:main:a", None):
                try:
                    await grep(store, pattern, mode=mode, session_key=key)  # type: ignore[arg-type]
                except RecallQueryError as exc:
                    assert "empty" in exc.detail or "invalid regular expression" in exc.detail
        finally:
            await store.close()

    asyncio.run(search())


async def test_catastrophic_regex_is_stopped_with_a_clear_error(store: Store) -> None:
    h = History("agent:main:redos")
    await add_messages(store, h, ["a" * 32 + "!"])
    with pytest.raises(RecallQueryError, match="too slow to evaluate"):
        await grep(store, r"(a|aa)+$", mode="regex", session_key=h.key)


async def test_summary_time_window_uses_the_covered_range(store: Store) -> None:
    a, _b = await build_planted(store)
    # leaf 0 covers messages 0..3 (hours 0..3), leaf 1 covers 4..7; the condensed node spans both
    late = await grep(store, "vault17", session_key=a.key, scope="summaries", since=iso(BASE_MS + 5 * HOUR))
    assert {h.id for h in late} == {a.condensed[0]}
    early = await grep(store, "vault17", session_key=a.key, scope="summaries", before=iso(BASE_MS + 2 * HOUR))
    assert {h.id for h in early} == {a.leaves[0], a.condensed[0]}
