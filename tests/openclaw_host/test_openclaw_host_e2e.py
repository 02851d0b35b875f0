"""End to end against the real OpenClaw 2026.9.6 gateway with our plugin and `openclaw-ctx serve` (#14.5).

One gateway for the whole module: 3 turns on one key (the second with a tool call; `openclaw-ctx
serve` is killed between the second and the third), `openclaw sessions compact KEY`, a 4th turn.
Before the plugin is installed, one turn runs on another key with the host's own engine
(`openclaw agent --local`); a turn on that key through the plugin then imports it at bootstrap.
Then: the host did not degrade to legacy, every turn's messages are in our `messages` table exactly
once (and replaying a recorded commitTurn is a `duplicate` that writes nothing), the compaction rotated
our session and wrote a summary, the model request after it carried our assembled context, and the
planted API key is nowhere in our database or logs.

Skipped when the host is not installed (`bash .ci/openclaw-host`) or `openclaw-ctx serve` is not
available. Slow: a gateway start (~10-70 s) and five host round trips (8-40 s each).
"""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from openclaw_host.conftest import serve_missing
from openclaw_host.fake_model import TOOL_MARKER, FakeModel
from openclaw_host.gateway import PLUGIN_DIR, PYTHON_COMMAND, Gateway, HostInstall, TurnResult, record

pytestmark = [pytest.mark.slow, pytest.mark.openclaw_host]

KEY = "agent:main:e2e"
DEGRADED = "current-turn transcript fencing is not declared"
PROMPTS = [
    "turn one: remember the word PLUM-1",
    f"turn two: PLUM-2, look at the workspace {TOOL_MARKER}",
    "turn three, after serve was killed: PLUM-3",
]
PROMPT_4 = "turn four, after compaction: PLUM-4"
KEY_BEFORE = "agent:main:before-plugin"
# Over 1 KiB, so the host stores the event zstd-compressed.
PROMPT_BEFORE = "before the plugin: PEAR-0 " + "a long pasted paragraph, ünïcödé included. " * 30
PROMPT_AFTER = "after the plugin: PEAR-1"


@dataclass
class Run:
    gw: Gateway
    model: FakeModel
    db: Path
    serve_log: Path
    trace: Path
    turns: list[TurnResult] = field(default_factory=list)
    compact: TurnResult | None = None
    killed_pids: list[int] = field(default_factory=list)
    requests_before_compact: int = 0
    requests_after_compact: int = 0
    host_logs: str = ""
    requests_before_history: int = 0

    def sql(self, query: str, *args: Any) -> list[tuple[Any, ...]]:
        con = sqlite3.connect(f"file:{self.db}?mode=ro", uri=True)
        try:
            return con.execute(query, args).fetchall()
        finally:
            con.close()

    def trace_records(self) -> list[dict[str, Any]]:
        if not self.trace.exists():
            return []
        return [json.loads(line) for line in self.trace.read_text().splitlines() if line.strip()]


def serve_pids(db: Path) -> list[int]:
    """Pids of `openclaw-ctx ... serve` processes on this test's database."""
    pids = []
    for d in Path("/proc").iterdir():
        if not d.name.isdigit():
            continue
        try:
            argv = (d / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        args = [a.decode(errors="replace") for a in argv]
        if "serve" in args and str(db) in args:
            pids.append(int(d.name))
    return pids


def _check(turn: TurnResult, gw: Gateway) -> None:
    assert turn.returncode == 0, f"{turn.message}: {turn.stdout[-3000:]}\n{turn.stderr[-3000:]}\n{gw.log_tail()}"


@pytest.fixture(scope="module")
def run(host_install: HostInstall, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Run]:
    why = serve_missing()
    if why:
        pytest.skip(why)
    tmp = tmp_path_factory.mktemp("openclaw-e2e")
    with FakeModel(tmp / "model-requests.jsonl") as model:
        gw = Gateway(host=host_install, root=tmp / "gw", model_base_url=model.base_url)
        r = Run(gw=gw, model=model, db=tmp / "ctx.db", serve_log=tmp / "serve.log", trace=tmp / "trace.jsonl")
        gw.write_config()
        before = gw.cli("agent", "--local", "--session-key", KEY_BEFORE, "--message", PROMPT_BEFORE, "--json")
        assert before.returncode == 0, f"{before.stdout[-3000:]}\n{before.stderr[-3000:]}"
        gw.install_plugin(
            PLUGIN_DIR,
            {
                "engine": "lossless-claw",
                "pythonCommand": PYTHON_COMMAND,
                "dbPath": str(r.db),
                "summarizer": "host",
                "logFile": str(r.serve_log),
                "traceFile": str(r.trace),
                # A short fresh tail, so the manual compaction of a four-turn chat has a prefix to summarise.
                "engineConfig": {"freshTailCount": 2},
            },
        )
        t_all = time.monotonic()
        try:
            record("e2e: gateway start (s)", f"{gw.start():.1f}")
            for i, prompt in enumerate(PROMPTS):
                if i == 2:  # kill serve between two turns: the next turn must still succeed
                    r.killed_pids = serve_pids(r.db)
                    assert r.killed_pids, "no openclaw-ctx serve process to kill"
                    for pid in r.killed_pids:
                        os.kill(pid, signal.SIGKILL)
                    time.sleep(1)
                turn = gw.agent_turn(KEY, prompt)
                r.turns.append(turn)
                record(f"e2e: turn {i + 1} (s)", f"{turn.seconds:.1f}")
                _check(turn, gw)
            r.requests_before_compact = len(model.requests())
            r.compact = gw.compact(KEY)
            record("e2e: sessions compact (s)", f"{r.compact.seconds:.1f}")
            assert r.compact.returncode == 0, f"{r.compact.stdout[-3000:]}\n{r.compact.stderr[-3000:]}"
            r.requests_after_compact = len(model.requests())
            turn = gw.agent_turn(KEY, PROMPT_4)
            r.turns.append(turn)
            record("e2e: turn 4 (s)", f"{turn.seconds:.1f}")
            _check(turn, gw)
            r.requests_before_history = len(model.requests())
            turn = gw.agent_turn(KEY_BEFORE, PROMPT_AFTER)
            r.turns.append(turn)
            record("e2e: first plugin turn on a key with host history (s)", f"{turn.seconds:.1f}")
            _check(turn, gw)
            r.host_logs = gw.host_logs()
        finally:
            gw.stop()
            record("e2e: wall time (s)", f"{time.monotonic() - t_all:.1f}")
        calls = [t["rpcMs"] for t in r.trace_records() if t["method"] != "initialize" and t.get("rpcMs") is not None]
        if calls:
            calls.sort()
            p50, p99 = calls[len(calls) // 2], calls[min(len(calls) - 1, int(len(calls) * 0.99))]
            record("e2e: serve per-call latency ms (p50 / p99 / n)", f"{p50:.1f} / {p99:.1f} / {len(calls)}")
        starts = [t["ms"] for t in r.trace_records() if t["method"] == "initialize"]
        record("e2e: serve start-up to initialize answered (ms, per start)", starts)
        yield r


def test_the_host_used_our_engine_not_legacy(run: Run) -> None:
    assert DEGRADED not in run.host_logs
    methods = [t["method"] for t in run.trace_records()]
    assert methods.count("commitTurn") >= len(run.turns), methods
    assert "assemble" in methods
    assert all(t["ok"] for t in run.trace_records()), [t for t in run.trace_records() if not t["ok"]]


def test_every_turns_messages_are_stored_exactly_once(run: Run) -> None:
    for word in ("PLUM-1", "PLUM-2", "PLUM-3", "PLUM-4"):
        rows = run.sql(
            "SELECT count(*) FROM messages WHERE session_key = ? AND role = 'user' AND text LIKE ?", KEY, f"%{word}%"
        )
        assert rows[0][0] == 1, f"{word}: {rows[0][0]} user rows"
    dupes = run.sql(
        "SELECT message_json, count(*) FROM messages WHERE session_key = ? GROUP BY message_json HAVING count(*) > 1",
        KEY,
    )
    assert dupes == []
    tool_rows = run.sql("SELECT count(*) FROM messages WHERE session_key = ? AND tool_call_id IS NOT NULL", KEY)
    assert tool_rows[0][0] >= 2  # the assistant's tool call and the tool's result


def test_replaying_a_commit_is_a_duplicate_that_writes_nothing(run: Run) -> None:
    commit = next(t for t in run.trace_records() if t["method"] == "commitTurn" and t.get("params"))
    before = run.sql("SELECT count(*) FROM messages")[0][0]
    with subprocess.Popen(
        [*PYTHON_COMMAND, "--db", str(run.db), "serve", "--engine", "lossless-claw"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
        env={k: v for k, v in os.environ.items() if not k.startswith("OPENCLAW_")},
    ) as proc:  # closes both pipes and waits
        assert proc.stdin is not None and proc.stdout is not None
        for msg in (
            {
                "jsonrpc": "2.0",
                "id": 1,
                "method": "initialize",
                "params": {"protocolVersion": 1, "engine": "lossless-claw"},
            },
            {"jsonrpc": "2.0", "id": 2, "method": "commitTurn", "params": commit["params"]},
        ):
            proc.stdin.write(json.dumps(msg) + "\n")
            proc.stdin.flush()
            reply = json.loads(proc.stdout.readline())
            assert "error" not in reply, reply
        assert reply["result"]["status"] == "duplicate"
    assert run.sql("SELECT count(*) FROM messages")[0][0] == before


def test_killing_serve_between_turns_loses_nothing(run: Run) -> None:
    assert run.killed_pids
    pids = {t["pid"] for t in run.trace_records() if t["method"] == "initialize"}
    assert len(pids) >= 2, pids  # started again after the kill
    assert run.turns[2].returncode == 0
    assert run.sql("SELECT count(*) FROM messages WHERE session_key = ? AND text LIKE '%PLUM-3%'", KEY)[0][0] >= 1


def test_compaction_rotated_our_session_and_wrote_a_summary(run: Run) -> None:
    statuses = [s for (s,) in run.sql("SELECT status FROM sessions WHERE session_key = ? ORDER BY created_at", KEY)]
    assert statuses.count("active") == 1 and "rotated" in statuses, statuses
    assert (
        run.sql("SELECT count(*) FROM compactions WHERE session_key = ? AND ok = 1 AND compacted = 1", KEY)[0][0] >= 1
    )
    assert run.sql("SELECT count(*) FROM summaries WHERE session_key = ?", KEY)[0][0] >= 1
    # summarizer "host": the summary came from the user's model through host/llmComplete.
    assert run.requests_after_compact > run.requests_before_compact


def _request_text(req: dict[str, Any]) -> str:
    parts = []
    for m in req["body"].get("messages", []):
        c = m.get("content")
        parts.append(c if isinstance(c, str) else json.dumps(c))
    return "\n".join(parts)


def test_the_request_after_compaction_carried_our_assembled_context(run: Run) -> None:
    summaries = [c for (c,) in run.sql("SELECT content FROM summaries WHERE session_key = ?", KEY)]
    turn4 = run.model.requests()[run.requests_after_compact :]
    assert turn4, "turn 4 sent no request to the model"
    text = _request_text(turn4[0])
    assert PROMPT_4 in text
    assert any(s.strip()[:60] in text for s in summaries), (summaries, text[-3000:])


def test_the_planted_api_key_is_nowhere_in_our_db_or_logs(run: Run) -> None:
    key = run.gw.api_key.encode()
    files = [run.db, run.db.with_name(run.db.name + "-wal"), run.serve_log, run.trace]
    for f in files:
        if f.exists():
            assert key not in f.read_bytes(), f
    assert run.db.exists() and run.serve_log.exists()


def test_history_from_before_the_plugin_is_imported_once_at_bootstrap(run: Run) -> None:
    host_db = run.gw.state_dir / "agents" / "main" / "agent" / "openclaw-agent.sqlite"
    con = sqlite3.connect(f"file:{host_db}?mode=ro", uri=True)
    try:
        assert con.execute("SELECT count(*) FROM transcript_events WHERE event_zstd IS NOT NULL").fetchone()[0] >= 1
        host_ids = {i for (i,) in con.execute("SELECT event_id FROM transcript_event_identities")}
    finally:
        con.close()
    boots = [t for t in run.trace_records() if t["method"] == "bootstrap" and t.get("session") == KEY_BEFORE]
    rows = run.sql("SELECT entry_id, role, text FROM messages WHERE session_key = ? ORDER BY seq", KEY_BEFORE)
    before = [r for r in rows if r[1] == "user" and "PEAR-0" in (r[2] or "")]  # the reply echoes it too
    assert len(before) == 1, (rows, boots, run.serve_log.read_text()[-3000:])
    assert before[0][0] in host_ids  # stored under the host's own entry id
    assert [r[1] for r in rows][:2] == ["user", "assistant"]  # the pre-plugin turn, then ours
    assert sum(r[1] == "user" and "PEAR-1" in (r[2] or "") for r in rows) == 1
    assert len({(r[1], r[2]) for r in rows}) == len(rows)  # nothing stored twice
    [(mark,)] = run.sql("SELECT value_json FROM engine_state WHERE session_key = ? AND name = 'bootstrap'", KEY_BEFORE)
    assert json.loads(mark)["imported_messages"] >= 2
    assert boots and all(t["ok"] for t in boots)


def test_every_committed_message_carries_its_host_entry_id(run: Run) -> None:
    # The host names only a turn's first and last entries; the tool call and its result in between
    # are found in its agent store, so a later import of that store finds every message stored.
    host_db = run.gw.state_dir / "agents" / "main" / "agent" / "openclaw-agent.sqlite"
    con = sqlite3.connect(f"file:{host_db}?mode=ro", uri=True)
    try:
        host_ids = {i for (i,) in con.execute("SELECT event_id FROM transcript_event_identities")}
    finally:
        con.close()
    rows = run.sql("SELECT role, entry_id FROM messages WHERE session_key = ? ORDER BY seq", KEY)
    assert "toolResult" in {role for role, _ in rows}
    assert all(entry_id in host_ids for _, entry_id in rows), rows


def test_the_hosts_own_agent_store_imports_whole_while_the_gateway_runs(run: Run, tmp_path: Path) -> None:
    # What a user migrating their OpenClaw 2026.9 history runs: import the live state, read-only.
    agents = run.gw.state_dir / "agents"
    host_db = agents / "main" / "agent" / "openclaw-agent.sqlite"
    con = sqlite3.connect(f"file:{host_db}?mode=ro", uri=True)
    try:
        rows = con.execute(
            "SELECT session_id, count(*) FROM transcript_event_identities WHERE event_type = 'message' GROUP BY 1"
        ).fetchall()
    finally:
        con.close()
    db = tmp_path / "imported.db"
    imported = subprocess.run(
        [*PYTHON_COMMAND, "--db", str(db), "import", str(agents), "--json"], capture_output=True, text=True, timeout=300
    )
    assert imported.returncode == 0, imported.stdout[-3000:] + imported.stderr[-3000:]
    stored = dict(sqlite3.connect(db).execute("SELECT session_id, count(*) FROM messages GROUP BY 1").fetchall())
    assert rows and all(stored.get(sid) == n for sid, n in rows), (rows, stored)
    doctor = subprocess.run([*PYTHON_COMMAND, "--db", str(db), "doctor", "--deep"], capture_output=True, text=True)
    assert doctor.returncode == 0, doctor.stdout[-3000:]


def test_the_readmes_look_inside_block_runs_on_the_gateways_database(run: Run) -> None:
    # README, "Use it from OpenClaw": its second block, on this gateway's database instead of ~/.openclaw's.
    readme = (Path(__file__).resolve().parents[2] / "README.md").read_text(encoding="utf-8")
    section = readme.split("## Use it from OpenClaw", 1)[1].split("\n## ", 1)[0]
    lines = [line for line in section.split("```bash\n")[2].split("```", 1)[0].splitlines() if line.strip()]
    assert len(lines) == 4 and all("~/.openclaw/openclaw-ctx.db" in line for line in lines)
    env = {**os.environ, "COLUMNS": "200", "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"}
    outputs = []
    for line in lines:
        done = subprocess.run(
            ["bash", "-c", line.replace("~/.openclaw/openclaw-ctx.db", str(run.db))],
            capture_output=True, text=True, env=env, timeout=120, check=False,
        )  # fmt: skip
        assert done.returncode == 0, f"{line}\n{done.stdout[-2000:]}\n{done.stderr[-2000:]}"
        outputs.append(done.stdout)
    assert KEY in outputs[0] and "PLUM-4" in outputs[1]
    assert "hit(s) for 'which database did we move staging to?' (hybrid)" in outputs[3]
