"""Shared machinery of the compaction crash tests: a fork server that SIGKILLs compactions, and store checks.

One helper process imports everything once and forks a fresh grandchild per request, before any
database or event loop exists, so each kill costs a fork rather than a Python start-up. A request
is one line ``<mode> <arg> <base> <db path>``:

- ``stmt N``: run one round (``one_round(store, base, arm)``) against the database and SIGKILL the
  grandchild just before the N-th SQL statement after ``arm()`` was called (``stmt 0`` never kills,
  and reports how many statements the round issued);
- ``time MS``: run rounds ``base, base + 1, …`` until the helper SIGKILLs the grandchild after MS
  milliseconds.

A scenario is Python source defining ``async def one_round(store, n, arm)``: it writes round `n`'s
messages, calls ``arm()``, then compacts. It is prepended to the server loop (the helper process runs
one script file, so scenarios are source text, not importable objects).
"""

from __future__ import annotations

import asyncio
import os
import sqlite3
import subprocess
import sys
import textwrap
from dataclasses import dataclass
from pathlib import Path
from typing import IO

from openclaw_ctx.inspect.dag import deep_check
from openclaw_ctx.store.store import Store

_SERVER = textwrap.dedent(
    """
    import asyncio, os, signal, sys
    from sqlalchemy import event
    from openclaw_ctx.store.store import Store

    async def _scenario(db, mode, arg, base):
        store = await Store.open(db, upgrade=False)
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
            await one_round(store, base, arm)
            print(f"statements {state['count']}", flush=True)
        else:
            n = base
            while True:
                await one_round(store, n, lambda: None)
                n += 1
        await store.close()

    for line in sys.stdin:
        mode, arg, base, db = line.rstrip("\\n").split(" ", 3)
        pid = os.fork()
        if pid == 0:
            code = 0
            try:
                asyncio.run(_scenario(db, mode, int(arg), int(base)))
            except BaseException as exc:
                print(f"error {type(exc).__name__}: {exc}", flush=True)
                code = 1
            finally:
                os._exit(code)
        if mode == "time":
            import time
            time.sleep(float(arg) / 1000)
            os.kill(pid, signal.SIGKILL)
        _, status = os.waitpid(pid, 0)
        killed = os.WIFSIGNALED(status) and os.WTERMSIG(status) == signal.SIGKILL
        print("killed" if killed else "finished", flush=True)
    """
)


def create_schema(db: Path) -> None:
    """Create the database at head in a separate process (the fork server opens with upgrade=False)."""
    code = (
        "import asyncio, sys\nfrom openclaw_ctx.store.store import Store\n"
        "async def m():\n    s = await Store.open(sys.argv[1]); await s.close()\nasyncio.run(m())"
    )
    subprocess.run([sys.executable, "-c", code, str(db)], check=True)


def copy_database(src: Path, dst: Path) -> None:
    """A consistent copy of `src` (its WAL folded in) at `dst`, replacing what was there."""
    for suffix in ("", "-wal", "-shm"):
        Path(f"{dst}{suffix}").unlink(missing_ok=True)
    source = sqlite3.connect(src)
    target = sqlite3.connect(dst)
    try:
        source.backup(target)
    finally:
        target.close()
        source.close()


@dataclass(frozen=True)
class Outcome:
    """How a request ended: ``killed`` or ``finished``, the statements of a completed round, any error."""

    status: str
    statements: int | None = None
    error: str | None = None


class CrashServer:
    """The fork server running `scenario` (see the module docstring); use as a context manager."""

    def __init__(self, workdir: Path, scenario: str, env: dict[str, str] | None = None) -> None:
        script = workdir / "crash_server.py"
        script.write_text(textwrap.dedent(scenario) + _SERVER, encoding="utf-8")
        self.proc = subprocess.Popen(
            [sys.executable, str(script)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            env={**os.environ, "OPENCLAW_CTX_ENCODING": "heuristic", **(env or {})},
        )

    def __enter__(self) -> CrashServer:
        return self

    def __exit__(self, *_exc: object) -> None:
        self.close()

    def run(self, db: Path, mode: str, arg: int, base: int) -> Outcome:
        """Send one request and wait until its grandchild has ended."""
        stdin: IO[str] | None = self.proc.stdin
        stdout: IO[str] | None = self.proc.stdout
        assert stdin is not None and stdout is not None
        stdin.write(f"{mode} {arg} {base} {db}\n")
        stdin.flush()
        statements: int | None = None
        error: str | None = None
        while True:
            line = stdout.readline().strip()
            if not line:
                raise RuntimeError("the crash server exited")
            if line.startswith("statements "):
                statements = int(line.split()[1])
            elif line.startswith("error "):
                error = line.removeprefix("error ")
            else:
                return Outcome(line, statements, error)

    def close(self) -> None:
        """Stop the server (it exits when its stdin closes)."""
        if self.proc.stdin is not None and not self.proc.stdin.closed:
            self.proc.stdin.close()
        self.proc.wait(timeout=60)
        if self.proc.stdout is not None:
            self.proc.stdout.close()


# --- checks -----------------------------------------------------------------------------------------

# Messages of the whole store reachable neither from an active context nor through summary edges
# from one (the REACHABLE walk of tests/host/test_replay_e2e.py, over every key at once).
UNREACHABLE_SQL = """
WITH RECURSIVE reach(sid) AS (
  SELECT ci.summary_id FROM context_items ci JOIN sessions s ON s.session_id = ci.session_id
  WHERE s.status = 'active' AND ci.summary_id IS NOT NULL
  UNION SELECT p.source_summary_id FROM summary_parents p JOIN reach r ON p.summary_id = r.sid)
SELECT count(*) FROM messages WHERE message_id NOT IN (
  SELECT message_id FROM summary_messages WHERE summary_id IN (SELECT sid FROM reach)
  UNION SELECT ci.message_id FROM context_items ci JOIN sessions s ON s.session_id = ci.session_id
  WHERE s.status = 'active' AND ci.message_id IS NOT NULL)
"""


def check_store(conn: sqlite3.Connection) -> None:
    """Invariants every engine's compaction keeps, whenever it is killed.

    The file is intact; each key has one active session and one more session than compactions;
    every rotated session has exactly one successor; every context item resolves; and every
    message is still reachable from an active context; each successor that no later turn has added
    to holds the tokens its compaction's audit row says.
    """
    assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    q = lambda sql, *args: conn.execute(sql, args).fetchall()  # noqa: E731
    for (key,) in q("SELECT DISTINCT session_key FROM sessions"):
        active = q("SELECT count(*) FROM sessions WHERE session_key = ? AND status = 'active'", key)[0][0]
        assert active == 1, f"{key}: {active} active sessions"
        sessions = q("SELECT count(*) FROM sessions WHERE session_key = ?", key)[0][0]
        compactions = q("SELECT count(*) FROM compactions WHERE session_key = ?", key)[0][0]
        assert sessions == compactions + 1, f"{key}: {sessions} sessions, {compactions} compactions"
    orphaned = q(
        "SELECT count(*) FROM sessions s WHERE s.status = 'rotated' AND "
        "(SELECT count(*) FROM sessions c WHERE c.parent_session_id = s.session_id) != 1"
    )[0][0]
    assert orphaned == 0, "a rotated session without exactly one successor"
    unresolved = q(
        "SELECT count(*) FROM context_items ci LEFT JOIN messages m ON m.message_id = ci.message_id "
        "LEFT JOIN summaries s ON s.summary_id = ci.summary_id WHERE m.message_id IS NULL AND s.summary_id IS NULL"
    )[0][0]
    assert unresolved == 0, "a context item points at nothing"
    assert q(UNREACHABLE_SQL)[0][0] == 0, "a message is unreachable from the active context"
    mismatched = q(
        "SELECT count(*) FROM compactions c WHERE c.tokens_after != "
        "(SELECT sum(token_count) FROM context_items WHERE session_id = c.after_session_id)"
        " AND NOT EXISTS (SELECT 1 FROM messages m WHERE m.session_id = c.after_session_id)"
    )[0][0]
    assert mismatched == 0, "a successor's context tokens differ from its compaction's audit row"


def table_counts(conn: sqlite3.Connection, tables: tuple[str, ...]) -> dict[str, int]:
    """Row counts of `tables`."""
    return {t: conn.execute(f"SELECT count(*) FROM {t}").fetchone()[0] for t in tables}


async def _library_doctor(db: Path) -> list[str]:
    store = await Store.connect(db)
    try:
        async with store.read() as conn:
            damage = [str(r[0]) for r in await conn.exec_driver_sql("PRAGMA quick_check(5)")]
        state = await store.schema_state()
        problems = [] if damage == ["ok"] else [f"quick_check: {damage}"]
        if not state.up_to_date:
            problems.append(f"schema {state.current}, head {state.head}")
        return problems + [str(p) for p in await deep_check(store)]
    finally:
        await store.engine.dispose()


def library_doctor(db: Path) -> list[str]:
    """What `openclaw-ctx doctor --deep` checks of the database, in process: [] when healthy."""
    return asyncio.run(_library_doctor(db))


def cli_doctor(db: Path) -> subprocess.CompletedProcess[str]:
    """Run `openclaw-ctx --db DB doctor --deep --json`."""
    return subprocess.run(
        [sys.executable, "-m", "openclaw_ctx", "--db", str(db), "doctor", "--deep", "--json"],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
