"""A compaction killed at any point leaves the store as before or fully after.

A real Python subprocess runs compactions against a real database file and is SIGKILLed: once
before each SQL statement of a compaction in turn (the grandchild kills itself from a statement
hook), and at random moments while it loops over turns and compactions. After every kill the test
opens the file and checks the invariants.

The fork server and the checks every engine shares live in ``crash_harness``; this file is the
built-in (legacy) compaction's scenario and its own invariants.
"""

from __future__ import annotations

import os
import random
import sqlite3
from pathlib import Path

import pytest
from crash_harness import CrashServer, check_store, create_schema

pytestmark = pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork")

SCENARIO = """
from openclaw_ctx.compaction import compact_session
from openclaw_ctx.config import CompactionSettings
from openclaw_ctx.messages import AssistantMessage, TextContent, ToolCall, ToolResultMessage, UserMessage
from openclaw_ctx.store import repo
from openclaw_ctx.summarize.extractive import ExtractiveSummarizer

SETTINGS = CompactionSettings(keep_recent_tokens=60, reserve_tokens=200, reserve_tokens_floor=0)
KEYS = ["agent:a", "agent:b"]

def turn(n):
    return [
        UserMessage(content=f"turn {n}: check /srv/data/file{n}.txt " + "words " * 40),
        AssistantMessage(content=[ToolCall(id=f"c{n}", name="read", arguments={"path": f"/srv/data/file{n}.txt"})]),
        ToolResultMessage(tool_call_id=f"c{n}", tool_name="read", content=[TextContent(text="line\\n" * 60)]),
        AssistantMessage(content=[TextContent(text=f"Finished turn {n}.")]),
    ]

async def one_round(store, n, arm):
    key = KEYS[n % 2]
    async with store.transaction() as conn:
        session = await repo.ensure_session(conn, key, engine_id="legacy")
        await repo.append_messages(
            conn,
            session,
            [repo.NewMessage(m, entry_id=f"{n}-{i}") for i, m in enumerate(turn(n) + turn(n + 500))],
            store.counter,
        )
    arm()
    await compact_session(
        store, session.session_id, settings=SETTINGS, summarizer=ExtractiveSummarizer(), token_budget=600,
        custom_instructions=None, force=True, trigger="manual",
    )
"""


def check_invariants(db: Path) -> dict[str, int]:
    """Assert the store is consistent; return a few counts."""
    conn = sqlite3.connect(db)
    try:
        check_store(conn)
        q = lambda sql: conn.execute(sql).fetchall()  # noqa: E731
        # Every summary belongs to exactly one compaction, has its message edges, and heads its successor.
        assert q("SELECT count(*) FROM summaries")[0][0] == q("SELECT count(*) FROM compactions")[0][0]
        assert (
            q(
                "SELECT count(*) FROM summaries s WHERE NOT EXISTS "
                "(SELECT 1 FROM summary_messages e WHERE e.summary_id = s.summary_id)"
            )[0][0]
            == 0
        )
        assert (
            q(
                "SELECT count(*) FROM compactions c WHERE NOT EXISTS (SELECT 1 FROM context_items ci "
                "WHERE ci.session_id = c.after_session_id AND ci.ordinal = 0 AND ci.summary_id = c.summary_id)"
            )[0][0]
            == 0
        )
        # A later compaction's summary updates the earlier one.
        assert (
            q(
                "SELECT count(*) FROM compactions c JOIN sessions b ON b.session_id = c.before_session_id "
                "WHERE b.parent_session_id IS NOT NULL AND NOT EXISTS "
                "(SELECT 1 FROM summary_parents p WHERE p.summary_id = c.summary_id)"
            )[0][0]
            == 0
        )
        # (check_store also matches each successor's context tokens to the audit log.)
        return {
            "compactions": q("SELECT count(*) FROM compactions")[0][0],
            "messages": q("SELECT count(*) FROM messages")[0][0],
        }
    finally:
        conn.close()


def test_killed_compactions_leave_store_before_or_after(tmp_path: Path) -> None:
    db = tmp_path / "crash.db"
    create_schema(db)
    rng = random.Random(20251202)
    outcomes: list[str] = []
    base = 0
    with CrashServer(tmp_path, SCENARIO) as server:
        # Full rounds first, to learn how many statements one compaction issues (one per key: the
        # first round of a key has no previous summary, later ones update it).
        counts = []
        for _ in range(2):
            before = check_invariants(db)
            done = server.run(db, "stmt", 0, base)
            assert done.status == "finished" and done.error is None and done.statements is not None, done
            counts.append(done.statements)
            assert check_invariants(db)["compactions"] == before["compactions"] + 1
            base += 1
        statements = max(counts)
        plan = [("stmt", n) for n in range(1, statements + 1)] + [("stmt", n) for n in range(1, statements + 1, 2)]
        plan += [("time", rng.randint(50, 1500)) for _ in range(6)]
        for mode, arg in plan:
            before = check_invariants(db)
            outcome = server.run(db, mode, arg, base)
            assert outcome.error is None, outcome
            outcomes.append(outcome.status)
            after = check_invariants(db)
            if mode == "stmt":
                # One round: its messages were committed first; its compaction happened entirely or not at all.
                assert after["compactions"] - before["compactions"] in (0, 1)
                if outcome.status == "killed" and arg <= 2:
                    assert after["compactions"] == before["compactions"]
            base += 1000 if mode == "time" else 1
    assert outcomes.count("killed") == len(outcomes)
    assert statements >= 10
    assert check_invariants(db)["compactions"] > 0
