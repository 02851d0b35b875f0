"""A compaction killed at any point leaves the store as before or fully after.

A real Python subprocess runs compactions against a real database file and is SIGKILLed: once
before each SQL statement of a compaction in turn (the grandchild kills itself from a statement
hook), and at random moments while it loops over turns and compactions. After every kill the test
opens the file and checks the invariants.

To keep it fast on a busy machine, one helper process imports everything once and forks a fresh
grandchild per kill, before any database or event loop exists.
"""

from __future__ import annotations

import os
import random
import sqlite3
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

pytestmark = pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork")

HELPER = textwrap.dedent(
    """
    import asyncio, os, random, signal, sys
    from sqlalchemy import event
    from openclaw_ctx.compaction import compact_session
    from openclaw_ctx.config import CompactionSettings
    from openclaw_ctx.messages import AssistantMessage, TextContent, ToolCall, ToolResultMessage, UserMessage
    from openclaw_ctx.store import repo
    from openclaw_ctx.store.store import Store
    from openclaw_ctx.summarize.extractive import ExtractiveSummarizer

    DB = sys.argv[1]
    SETTINGS = CompactionSettings(keep_recent_tokens=60, reserve_tokens=200, reserve_tokens_floor=0)
    KEYS = ["agent:a", "agent:b"]

    def turn(n):
        return [
            UserMessage(content=f"turn {n}: check /srv/data/file{n}.txt " + "words " * 40),
            AssistantMessage(content=[ToolCall(id=f"c{n}", name="read", arguments={"path": f"/srv/data/file{n}.txt"})]),
            ToolResultMessage(tool_call_id=f"c{n}", tool_name="read", content=[TextContent(text="line\\n" * 60)]),
            AssistantMessage(content=[TextContent(text=f"Finished turn {n}.")]),
        ]

    async def one_round(store, key, n, arm):
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

    async def scenario(mode, arg, base):
        store = await Store.open(DB, upgrade=False)
        state = {"armed": False, "count": 0}

        @event.listens_for(store.engine.sync_engine, "before_cursor_execute")
        def _count(*_a):
            if state["armed"]:
                state["count"] += 1
                if mode == "stmt" and state["count"] == arg:
                    os.kill(os.getpid(), signal.SIGKILL)

        def arm():
            state["armed"] = True

        if mode == "stmt":
            await one_round(store, KEYS[base % 2], base, arm)
            print(f"statements {state['count']}", flush=True)
        else:
            n = base
            while True:
                await one_round(store, KEYS[n % 2], n, lambda: None)
                n += 1
        await store.close()

    for line in sys.stdin:
        mode, arg, base = line.split()
        pid = os.fork()
        if pid == 0:
            try:
                asyncio.run(scenario(mode, int(arg), int(base)))
            finally:
                os._exit(0)
        if mode == "time":
            import time
            time.sleep(float(arg) / 1000)
            os.kill(pid, signal.SIGKILL)
        _, status = os.waitpid(pid, 0)
        killed = os.WIFSIGNALED(status) and os.WTERMSIG(status) == signal.SIGKILL
        print("killed" if killed else "finished", flush=True)
    """
)


def check_invariants(db: Path) -> dict[str, int]:
    """Assert the store is consistent; return a few counts."""
    conn = sqlite3.connect(db)
    try:
        assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
        q = lambda sql: conn.execute(sql).fetchall()  # noqa: E731
        keys = [k for (k,) in q("SELECT DISTINCT session_key FROM sessions")]
        for key in keys:
            active = q(f"SELECT count(*) FROM sessions WHERE session_key='{key}' AND status='active'")[0][0]
            assert active == 1, f"{key}: {active} active sessions"
            sessions = q(f"SELECT count(*) FROM sessions WHERE session_key='{key}'")[0][0]
            compactions = q(f"SELECT count(*) FROM compactions WHERE session_key='{key}'")[0][0]
            assert sessions == compactions + 1, key
        assert (
            q(
                "SELECT count(*) FROM sessions s WHERE s.status='rotated' AND "
                "(SELECT count(*) FROM sessions c WHERE c.parent_session_id = s.session_id) != 1"
            )[0][0]
            == 0
        )
        # Every context item resolves.
        assert (
            q(
                "SELECT count(*) FROM context_items ci LEFT JOIN messages m ON m.message_id = ci.message_id "
                "LEFT JOIN summaries s ON s.summary_id = ci.summary_id "
                "WHERE m.message_id IS NULL AND s.summary_id IS NULL"
            )[0][0]
            == 0
        )
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
        # Context token totals match the audit log.
        assert (
            q(
                "SELECT count(*) FROM compactions c WHERE c.tokens_after != "
                "(SELECT sum(token_count) FROM context_items WHERE session_id = c.after_session_id)"
                " AND NOT EXISTS (SELECT 1 FROM messages m WHERE m.session_id = c.after_session_id)"
            )[0][0]
            == 0
        )
        # Nothing is lost: every message is in an active context or reachable from one through summary edges.
        unreachable = q(
            """
            WITH RECURSIVE reach(sid) AS (
              SELECT ci.summary_id FROM context_items ci JOIN sessions s ON s.session_id = ci.session_id
              WHERE s.status = 'active' AND ci.summary_id IS NOT NULL
              UNION SELECT p.source_summary_id FROM summary_parents p JOIN reach r ON p.summary_id = r.sid)
            SELECT count(*) FROM messages WHERE message_id NOT IN (
              SELECT message_id FROM summary_messages WHERE summary_id IN (SELECT sid FROM reach)
              UNION SELECT ci.message_id FROM context_items ci JOIN sessions s ON s.session_id = ci.session_id
              WHERE s.status = 'active' AND ci.message_id IS NOT NULL)
            """
        )[0][0]
        assert unreachable == 0
        return {
            "compactions": q("SELECT count(*) FROM compactions")[0][0],
            "messages": q("SELECT count(*) FROM messages")[0][0],
        }
    finally:
        conn.close()


def test_killed_compactions_leave_store_before_or_after(tmp_path: Path) -> None:
    db = tmp_path / "crash.db"
    # The schema is created up front; the helper opens with upgrade=False.
    subprocess.run(
        [
            sys.executable,
            "-c",
            f"import asyncio; from openclaw_ctx.store.store import Store\n"
            f"async def m():\n    s = await Store.open({str(db)!r}); await s.close()\nasyncio.run(m())",
        ],
        check=True,
    )
    script = tmp_path / "helper.py"
    script.write_text(HELPER)
    env = {**os.environ, "OPENCLAW_CTX_ENCODING": "heuristic"}
    proc = subprocess.Popen(
        [sys.executable, str(script), str(db)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=env
    )
    assert proc.stdin is not None and proc.stdout is not None
    rng = random.Random(20251202)
    outcomes: list[str] = []
    base = 0
    try:

        def send(mode: str, arg: int) -> str:
            if mode == "wait":
                return proc.stdout.readline().strip()  # type: ignore[union-attr]
            proc.stdin.write(f"{mode} {arg} {base}\n")  # type: ignore[union-attr]
            proc.stdin.flush()  # type: ignore[union-attr]
            return proc.stdout.readline().strip()  # type: ignore[union-attr]

        # A full round first, to learn how many statements one compaction issues (one per key: the
        # first round of a key has no previous summary, later ones update it).
        counts = []
        for _ in range(2):
            before = check_invariants(db)
            counts.append(int(send("stmt", 0).split()[1]))
            assert send("wait", 0) == "finished"
            assert check_invariants(db)["compactions"] == before["compactions"] + 1
            base += 1
        statements = max(counts)
        plan = [("stmt", n) for n in range(1, statements + 1)] + [("stmt", n) for n in range(1, statements + 1, 2)]
        plan += [("time", rng.randint(50, 1500)) for _ in range(6)]
        for mode, arg in plan:
            before = check_invariants(db)
            outcome = send(mode, arg)
            outcomes.append(outcome)
            after = check_invariants(db)
            if mode == "stmt":
                # One round: its messages were committed first; its compaction happened entirely or not at all.
                assert after["compactions"] - before["compactions"] in (0, 1)
                if outcome == "killed" and arg <= 2:
                    assert after["compactions"] == before["compactions"]
            base += 1000 if mode == "time" else 1
    finally:
        proc.stdin.close()
        proc.wait(timeout=60)
        proc.stdout.close()
    assert outcomes.count("killed") == len(outcomes)
    assert statements >= 10
    assert check_invariants(db)["compactions"] > 0
