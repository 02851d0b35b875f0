"""`doctor --deep` checks the context a key's current life must reach, not every message it ever had (#13.7).

An OpenClaw-rotated successor whose transcript holds only its own messages (OpenClaw rebuilds the
model's context from that file alone) is a clean import; so is a key after `/reset`. A message our
own rotation dropped is still reported.
"""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest
from fault_kit import cli

pytestmark = pytest.mark.slow

USAGE = {"input": 1, "output": 1, "cacheRead": 0, "cacheWrite": 0, "totalTokens": 2}


def _message(n: int, parent: str | None) -> dict[str, object]:
    message: dict[str, object] = {
        "role": "user" if n % 2 else "assistant",
        "content": [{"type": "text", "text": f"message {n} about topic {n * 7}"}],
        "timestamp": 1_773_478_931_117 + n * 1000,
    }
    if not n % 2:
        message |= {"api": "openai-responses", "provider": "openai", "model": "m", "usage": USAGE, "stopReason": "stop"}
    stamp = "2026-03-14T09:02:11.000Z"
    return {"type": "message", "id": f"m{n}", "parentId": parent, "timestamp": stamp, "message": message}


def _write(path: Path, session_id: str, entries: list[dict[str, object]], parent_file: Path | None = None) -> Path:
    header: dict[str, object] = {"type": "session", "version": 3, "id": session_id, "timestamp": "2026-03-14T09:02:00Z"}
    if parent_file is not None:
        header["parentSession"] = str(parent_file)
    path.write_text("\n".join(json.dumps(e) for e in [header, *entries]) + "\n", encoding="utf-8")
    return path


def test_a_successor_holding_only_its_own_messages_imports_clean(tmp_path: Path) -> None:
    sessions = tmp_path / "agents" / "main" / "sessions"
    sessions.mkdir(parents=True)
    first_id, second_id = "aaaaaaaa-0000-4000-8000-000000000001", "bbbbbbbb-0000-4000-8000-000000000002"
    chain = [_message(n, f"m{n - 1}" if n > 1 else None) for n in range(1, 13)]
    first = _write(sessions / f"2026-03-14T09-02-00-000Z_{first_id}.jsonl", first_id, chain)
    # The successor starts over: its file holds only the messages written after the rotation.
    own = [_message(13, None), _message(14, "m13")]
    second = _write(sessions / f"2026-03-14T09-03-00-000Z_{second_id}.jsonl", second_id, own, first)
    index = {"agent:main:main": {"sessionId": second_id, "sessionFile": str(second), "updatedAt": 1_773_479_000_000}}
    (sessions / "sessions.json").write_text(json.dumps(index))
    db = tmp_path / "ctx.db"

    imported = cli(db, "import", str(tmp_path))
    assert imported.returncode == 0, imported.stderr
    with sqlite3.connect(db) as conn:
        assert conn.execute("SELECT count(*) FROM messages").fetchone()[0] == 14
        assert conn.execute("SELECT count(*) FROM sessions").fetchone()[0] == 2
    doctor = cli(db, "doctor", "--deep")
    assert doctor.returncode == 0, doctor.stdout
    assert "summary DAG and context items are consistent" in doctor.stdout

    # A message dropped from the current life by one of our own rotations is still a problem.
    with sqlite3.connect(db) as conn:
        active = conn.execute("SELECT session_id FROM sessions WHERE status = 'active'").fetchone()[0]
        conn.execute("DELETE FROM context_items WHERE session_id = ? AND ordinal = 0", (active,))
    broken = cli(db, "doctor", "--deep")
    assert broken.returncode == 1 and "uncovered" in broken.stdout, broken.stdout
