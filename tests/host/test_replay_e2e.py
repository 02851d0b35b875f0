"""End to end: the README's main job, through the real CLI, on the shipped example transcript."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest
from store_queries import REACHABLE

from examples.make_example import PLANTED_FACTS
from openclaw_ctx.transcripts import CompactionEntry, context_message, read_transcript

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "coding-session.jsonl"
CLI = [sys.executable, "-m", "openclaw_ctx"]


def run_cli(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*CLI, *args], capture_output=True, text=True, timeout=600, env={**os.environ, **(env or {})}, check=False
    )


@pytest.mark.parametrize("engine", ["legacy", "lossless-claw"])
def test_replay_example_with_small_budget(tmp_path: Path, engine: str) -> None:
    db = tmp_path / "replay.db"
    budget = 16_000
    proc = run_cli("--db", str(db), "replay", str(EXAMPLE), "--engine", engine, "--budget", str(budget), "--json")
    assert proc.returncode == 0, proc.stderr
    report = json.loads(proc.stdout)
    key = report["session_key"]

    transcript = read_transcript(EXAMPLE)
    expected_ids = {
        e.id for e in transcript.active_branch() if not isinstance(e, CompactionEntry) and context_message(e)
    }
    conn = sqlite3.connect(db)
    stored_ids = {r[0] for r in conn.execute("SELECT entry_id FROM messages WHERE session_key = ?", (key,))}
    assert expected_ids <= stored_ids, "every transcript message is in `messages`"
    assert report["messages_stored"] == report["transcript_messages"] == len(expected_ids)

    compactions = conn.execute(
        "SELECT count(*) FROM compactions WHERE session_key = ? AND compacted = 1", (key,)
    ).fetchone()[0]
    sessions = conn.execute("SELECT count(*) FROM sessions WHERE session_key = ?", (key,)).fetchone()[0]
    assert compactions >= 3
    assert sessions == compactions + 1, "one more session row per compaction"
    assert report["compactions"] == compactions and report["sessions_in_chain"] == sessions

    final = conn.execute(
        "SELECT coalesce(sum(token_count), 0) FROM active_context WHERE session_key = ?", (key,)
    ).fetchone()[0]
    assert final <= budget
    assert report["context_tokens"]["final"] == final

    all_ids = {r[0] for r in conn.execute("SELECT message_id FROM messages WHERE session_key = ?", (key,))}
    reachable = {r[0] for r in conn.execute(REACHABLE, {"key": key})}
    assert all_ids == reachable, f"{len(all_ids - reachable)} messages unreachable from the active context"

    # Old sessions stay readable: the chain links back to the first session.
    rows = conn.execute(
        "SELECT session_id, parent_session_id, status FROM sessions WHERE session_key = ?", (key,)
    ).fetchall()
    by_id = {r[0]: r for r in rows}
    active = [r for r in rows if r[2] == "active"]
    assert len(active) == 1
    hops, current = 0, active[0]
    while current[1] is not None:
        current = by_id[current[1]]
        hops += 1
    assert hops == sessions - 1


def test_lossless_replay_recalls_every_planted_fact(tmp_path: Path) -> None:
    """The lossless issue's "done when": depth >= 2, grep finds each fact, expand returns its original."""
    db = tmp_path / "lossless.db"
    proc = run_cli("--db", str(db), "replay", str(EXAMPLE), "--engine", "lossless-claw", "--budget", "16000", "--json")
    assert proc.returncode == 0, proc.stderr
    key = json.loads(proc.stdout)["session_key"]
    conn = sqlite3.connect(db)
    max_depth = conn.execute("SELECT max(depth) FROM summaries WHERE session_key = ?", (key,)).fetchone()[0]
    assert max_depth >= 2, "a small budget builds condensed summaries of condensed summaries"

    for name, fact in PLANTED_FACTS.items():
        found = run_cli("--db", str(db), "grep", fact, "--key", key, "--scope", "messages", "--json")
        assert found.returncode == 0, found.stderr
        hits = [h for h in json.loads(found.stdout)["hits"] if fact in h["snippet"]]
        assert hits, f"grep finds the planted {name} ({fact!r})"
        hit = hits[-1]
        original = conn.execute(
            "SELECT text FROM messages WHERE message_id = ?", (int(hit["id"].removeprefix("msg_")),)
        ).fetchone()[0]
        assert fact in original
        # The planted turns are long compacted: the message sits under a leaf, and expanding it gives it back.
        assert not hit["inContext"] and hit["coveringSummaryId"], name
        expanded = run_cli("--db", str(db), "expand", hit["coveringSummaryId"], "--messages", "--json")
        assert expanded.returncode == 0, expanded.stderr
        texts = {e["id"]: e["text"] for e in json.loads(expanded.stdout)["entries"] if e["kind"] == "message"}
        assert texts.get(hit["id"]) == original, f"expand returns the original message holding {name}"

    doctor = run_cli("--db", str(db), "doctor", "--deep", "--json")
    assert doctor.returncode == 0, doctor.stdout + doctor.stderr
    checks = {c["name"]: c for c in json.loads(doctor.stdout)["checks"]}
    assert checks["deep check"]["status"] == "ok", checks["deep check"]


def test_switching_a_key_legacy_lossless_legacy_keeps_every_message(tmp_path: Path) -> None:
    """The same key runs on legacy, then lossless-claw (adopting legacy's context), then legacy again."""
    lines = EXAMPLE.read_text(encoding="utf-8").splitlines(keepends=True)
    # Cut at user turns, so no slice ends between a tool call and its result.
    user_lines = [i for i, line in enumerate(lines) if '"role":"user"' in line.replace(" ", "")]
    cuts = [user_lines[len(user_lines) // 3], user_lines[2 * len(user_lines) // 3], len(lines)]
    db = tmp_path / "switch.db"
    engines = ["legacy", "lossless-claw", "legacy"]
    for n, (engine, cut) in enumerate(zip(engines, cuts, strict=True)):
        part = tmp_path / f"part{n}.jsonl"
        part.write_text("".join(lines[:cut]), encoding="utf-8")
        proc = run_cli("--db", str(db), "replay", str(part), "--engine", engine, "--budget", "16000", "--key", "sw")
        assert proc.returncode == 0, proc.stderr

    transcript = read_transcript(EXAMPLE)
    expected = {e.id for e in transcript.active_branch() if not isinstance(e, CompactionEntry) and context_message(e)}
    conn = sqlite3.connect(db)
    stored = [r[0] for r in conn.execute("SELECT entry_id FROM messages WHERE session_key = 'sw'")]
    assert sorted(stored) == sorted(expected), "every transcript message stored exactly once, nothing added"
    by_engine = dict(conn.execute("SELECT engine_id, count(*) FROM compactions WHERE compacted = 1 GROUP BY 1"))
    assert by_engine.get("legacy", 0) > 0 and by_engine.get("lossless-claw", 0) > 0, by_engine
    all_ids = {r[0] for r in conn.execute("SELECT message_id FROM messages WHERE session_key = 'sw'")}
    assert {r[0] for r in conn.execute(REACHABLE, {"key": "sw"})} == all_ids
    doctor = run_cli("--db", str(db), "doctor", "--deep", "--json")
    checks = {c["name"]: c for c in json.loads(doctor.stdout)["checks"]}
    assert checks["deep check"]["status"] == "ok", checks["deep check"]


def test_replay_twice_adds_nothing(tmp_path: Path) -> None:
    db = tmp_path / "twice.db"
    first = run_cli("--db", str(db), "replay", str(EXAMPLE), "--budget", "64000", "--json")
    assert first.returncode == 0, first.stderr
    second = run_cli("--db", str(db), "replay", str(EXAMPLE), "--budget", "64000", "--json")
    assert second.returncode == 0, second.stderr
    conn = sqlite3.connect(db)
    assert conn.execute("SELECT count(*) FROM messages").fetchone()[0] == json.loads(first.stdout)["messages_stored"]


def test_replay_reports_missing_file_clearly(tmp_path: Path) -> None:
    proc = run_cli("--db", str(tmp_path / "x.db"), "replay", str(tmp_path / "nope.jsonl"))
    assert proc.returncode != 0
    assert "nope.jsonl" in proc.stderr
