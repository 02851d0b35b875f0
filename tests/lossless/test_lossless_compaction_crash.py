"""A lossless-claw compaction killed at any point leaves the store as before or fully after.

`LosslessContextEngine._compact` plans in memory and `_write` then stores, in one transaction, the
new summary nodes and their edges, the successor session with its context items, the `compactions`
row, and the cleared compaction debt. Each round here records a debt with the turn's messages (as
deferred mode does) and pays it with `drain_debt`.

Statement kills run on copies of one prepared database, so every copy replays the very same
compaction and the kill lands before each of its SQL statements in turn; the state after each kill
must equal the state before the compaction or the state a completed one leaves, table by table.
Timed kills run against one database that keeps growing. After every kill the file passes the
`doctor --deep` checks, every message is reachable from the active context, and a further
compaction succeeds. The fork server and the shared checks are in ``crash_harness``.
"""

from __future__ import annotations

import json
import os
import random
import sqlite3
from pathlib import Path

import pytest
from crash_harness import CrashServer, check_store, cli_doctor, copy_database, create_schema, library_doctor

pytestmark = pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork")

KEYS = ["agent:lcm:a", "agent:lcm:b"]  # round n writes to and compacts KEYS[n % 2]

SCENARIO = (
    f"KEYS = {KEYS!r}\n"
    + """
from engines.lossless.engine import DEBT_STATE, ENGINE_ID, create_engine
from openclaw_ctx.contract import EngineContext
from openclaw_ctx.messages import AssistantMessage, TextContent, ToolCall, ToolResultMessage, UserMessage
from openclaw_ctx.store import repo

# Small enough that one compaction writes leaves and condensed nodes over earlier ones.
CONFIG = {
    "freshTailCount": 4,
    "leafChunkTokens": 300,
    "leafMinFanout": 2,
    "condensedMinFanout": 2,
    "condensedTargetTokens": 40,
    "leafTargetTokens": 48,
    "sweepMaxDepth": 1,
}
BUDGET = 2000

def turn(n):
    path = f"/srv/data/file{n}.txt"
    return [
        UserMessage(content=f"turn {n}: check {path} " + "words " * 40),
        AssistantMessage(content=[ToolCall(id=f"c{n}", name="read", arguments={"path": path})]),
        ToolResultMessage(tool_call_id=f"c{n}", tool_name="read", content=[TextContent(text=f"row {n}\\n" * 40)]),
        AssistantMessage(content=[TextContent(text=f"Finished turn {n}.")]),
    ]

async def one_round(store, n, arm):
    key = KEYS[n % 2]
    engine = create_engine(EngineContext(config=CONFIG, store=store))
    async with store.transaction() as conn:
        session = await repo.ensure_session(conn, key, engine_id=ENGINE_ID)
        await repo.append_messages(
            conn,
            session,
            [repo.NewMessage(m, entry_id=f"{n}-{i}") for i, m in enumerate(turn(n) + turn(n + 500))],
            store.counter,
        )
        # What deferred mode records after the turn; the compaction clears it in its transaction.
        debt = {"pending": True, "reason": "threshold", "attempts": 0, "token_budget": BUDGET,
                "projected_tokens": 10 * BUDGET, "session_id": session.session_id}
        await repo.set_engine_state(conn, ENGINE_ID, key, DEBT_STATE, debt)
    arm()
    result = await engine.drain_debt(key)
    if result is None or not result.compacted:
        raise RuntimeError(f"round {n} did not compact: {result}")
"""
)

TABLES = (
    "messages",
    "sessions",
    "context_items",
    "summaries",
    "summary_messages",
    "summary_parents",
    "compactions",
    "engine_state",
    "summaries_fts_docsize",
    "large_content",
)


def check_invariants(db: Path) -> dict[str, int]:
    """Assert the store is consistent after a lossless compaction or a kill; return row counts."""
    conn = sqlite3.connect(db)
    try:
        check_store(conn)
        q = lambda sql: conn.execute(sql).fetchall()  # noqa: E731
        # Every summary was written by a compaction that is recorded (none half-written).
        assert (
            q("SELECT count(*) FROM summaries")[0][0]
            == q("SELECT coalesce(sum(summaries_created), 0) FROM compactions")[0][0]
        )
        # A leaf has its message edges, a condensed node its parent edges.
        assert (
            q(
                "SELECT count(*) FROM summaries s WHERE (s.kind = 'leaf' AND NOT EXISTS "
                "(SELECT 1 FROM summary_messages e WHERE e.summary_id = s.summary_id)) OR (s.kind = 'condensed' AND "
                "NOT EXISTS (SELECT 1 FROM summary_parents p WHERE p.summary_id = s.summary_id))"
            )[0][0]
            == 0
        )
        # Each compaction's newest node is in its successor's context (check_store matches the totals).
        assert (
            q(
                "SELECT count(*) FROM compactions c WHERE NOT EXISTS (SELECT 1 FROM context_items ci "
                "WHERE ci.session_id = c.after_session_id AND ci.summary_id = c.summary_id)"
            )[0][0]
            == 0
        )
        # Every summary is indexed for recall.
        assert q("SELECT count(*) FROM summaries_fts_docsize")[0][0] == q("SELECT count(*) FROM summaries")[0][0]
        counts = {t: q(f"SELECT count(*) FROM {t}")[0][0] for t in TABLES}
        counts["debts"] = q("SELECT count(*) FROM engine_state WHERE name = 'compaction_debt'")[0][0]
        return counts
    finally:
        conn.close()


def assert_healthy(db: Path) -> None:
    """The checks `doctor --deep` runs, in process."""
    assert library_doctor(db) == [], db


def compact_again(server: CrashServer, db: Path, base: int) -> None:
    """A further round on the store a kill left: its compaction succeeds and keeps every invariant."""
    before = check_invariants(db)
    done = server.run(db, "stmt", 0, base)
    assert done.status == "finished" and done.error is None, done
    after = check_invariants(db)
    assert after["compactions"] == before["compactions"] + 1
    assert after["summaries"] > before["summaries"]
    conn = sqlite3.connect(db)
    try:
        debt = "SELECT count(*) FROM engine_state WHERE name = 'compaction_debt' AND session_key = ?"
        assert conn.execute(debt, (KEYS[base % 2],)).fetchone()[0] == 0, "the compaction paid the key's debt"
    finally:
        conn.close()


def test_lossless_compaction_killed_before_each_statement(tmp_path: Path) -> None:
    prepared = tmp_path / "prepared.db"
    create_schema(prepared)
    with CrashServer(tmp_path, SCENARIO) as server:
        # A few full rounds first, so the compaction under test builds on earlier summaries.
        for n in range(4):
            done = server.run(prepared, "stmt", 0, n)
            assert done.status == "finished" and done.error is None, done
        start = check_invariants(prepared)
        assert start["debts"] == 0
        round_no = 4  # key agent:lcm:a again

        reference = tmp_path / "reference.db"
        copy_database(prepared, reference)
        done = server.run(reference, "stmt", 0, round_no)
        assert done.status == "finished" and done.error is None and done.statements is not None, done
        statements = done.statements
        full = check_invariants(reference)
        assert full["compactions"] == start["compactions"] + 1 and full["sessions"] == start["sessions"] + 1
        assert full["summaries"] - start["summaries"] >= 2, "the compaction writes several nodes"
        assert full["summary_parents"] > start["summary_parents"], "…condensed ones among them"
        assert full["debts"] == 0

        work = tmp_path / "work.db"
        untouched: dict[str, int] | None = None
        seen = {"before": 0, "after": 0}
        for n in range(1, statements + 1):
            copy_database(prepared, work)
            outcome = server.run(work, "stmt", n, round_no)
            assert outcome.status == "killed" and outcome.error is None, (n, outcome)
            after = check_invariants(work)
            if untouched is None:
                # Killed before the compaction's first statement: the turn's messages and debt only.
                untouched = after
                assert untouched["debts"] == 1 and untouched["messages"] == full["messages"]
            assert after in (untouched, full), f"killed before statement {n} of {statements}: {after}"
            seen["before" if after == untouched else "after"] += 1
            assert_healthy(work)
            compact_again(server, work, round_no + 2)
            assert_healthy(work)
        # The commit is the last statement or later: every kill before one left the store untouched.
        assert seen == {"before": statements, "after": 0}, seen
        assert statements >= 20, statements
        print(f"{statements} statements killed in turn")

        # The CLI agrees on a store killed in the middle of the write, and on one compacted after it.
        copy_database(prepared, work)
        assert server.run(work, "stmt", statements - 3, round_no).status == "killed"
        for again in (round_no + 2, round_no + 4):
            doctor = cli_doctor(work)
            assert doctor.returncode == 0, doctor.stdout + doctor.stderr
            checks = {c["name"]: c["status"] for c in json.loads(doctor.stdout)["checks"]}
            assert checks["deep check"] == "ok" and checks["database"] == "ok", checks
            compact_again(server, work, again)


def test_lossless_compaction_killed_at_random_times(tmp_path: Path) -> None:
    db = tmp_path / "crash.db"
    create_schema(db)
    rng = random.Random(20251203)
    base = 0
    kills = 0
    with CrashServer(tmp_path, SCENARIO) as server:
        for _ in range(6):
            before = check_invariants(db)
            outcome = server.run(db, "time", rng.randint(100, 1500), base)
            assert outcome.status == "killed" and outcome.error is None, outcome
            kills += 1
            after = check_invariants(db)
            assert after["compactions"] >= before["compactions"]
            assert after["debts"] <= 2
            assert_healthy(db)
            base += 1000
            compact_again(server, db, base)
            base += 1
    assert kills == 6
    assert check_invariants(db)["compactions"] >= 6
