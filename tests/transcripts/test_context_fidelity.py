"""What a session's context holds survives export → import, and only the newest compaction speaks (#13.10, #15.1).

Through the real CLI onto real SQLite files.
"""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest
from fault_kit import cli, write_transcript

pytestmark = pytest.mark.slow


def context_items(db: Path) -> list[tuple[str, int, str | None]]:
    """Every session's context items as (session id, ordinal, entry id or summary id)."""
    with sqlite3.connect(db) as conn:
        return conn.execute(
            "SELECT ci.session_id, ci.ordinal, coalesce(m.entry_id, ci.summary_id) FROM context_items ci "
            "LEFT JOIN messages m ON m.message_id = ci.message_id ORDER BY 1, 2"
        ).fetchall()


def test_a_legacy_chain_exported_and_imported_keeps_every_sessions_context(tmp_path: Path) -> None:
    source = tmp_path / "source.db"
    transcript = write_transcript(tmp_path / "t.jsonl", messages=60, words=120, seed=11)
    assert cli(source, "replay", str(transcript), "--key", "k", "--budget", "4000").returncode == 0
    with sqlite3.connect(source) as conn:
        assert conn.execute("SELECT count(*) FROM sessions WHERE status = 'rotated'").fetchone()[0] >= 3
    out = tmp_path / "export"
    assert cli(source, "export", "--key", "k", "--out", str(out)).returncode == 0
    copy = tmp_path / "copy.db"
    imported = cli(copy, "import", str(out))
    assert imported.returncode == 0, imported.stderr
    assert context_items(copy) == context_items(source)
    assert cli(copy, "doctor", "--deep").returncode == 0


def test_older_compactions_in_the_kept_range_are_not_re_emitted(tmp_path: Path) -> None:
    header = {"type": "session", "version": 3, "id": "fidelity-1", "timestamp": "2026-03-14T09:02:00Z"}
    lines: list[dict[str, object]] = [header]
    parent = None
    for n in range(1, 9):
        entry_id = f"m{n}"
        message = {"role": "user", "content": f"message {n}", "timestamp": 1_773_478_931_117 + n}
        lines.append(
            {
                "type": "message",
                "id": entry_id,
                "parentId": parent,
                "timestamp": "2026-03-14T09:02:01Z",
                "message": message,
            }
        )
        parent = entry_id
        if n in (4, 6):
            # Successive compactions whose firstKeptEntryId point back at the same early entry, as real OpenClaw writes.
            compaction_id = f"c{n}"
            lines.append(
                {
                    "type": "compaction",
                    "id": compaction_id,
                    "parentId": parent,
                    "timestamp": "2026-03-14T09:02:02Z",
                    "summary": f"summary at {n}",
                    "firstKeptEntryId": "m2",
                    "tokensBefore": 100,
                }
            )
            parent = compaction_id
    path = tmp_path / "s.jsonl"
    path.write_text("\n".join(json.dumps(line) for line in lines) + "\n")
    db = tmp_path / "ctx.db"
    assert cli(db, "import", str(path)).returncode == 0
    with sqlite3.connect(db) as conn:
        kinds = [kind for (kind,) in conn.execute("SELECT item_type FROM context_items ORDER BY ordinal")]
        text = conn.execute(
            "SELECT s.content FROM context_items ci JOIN summaries s USING (summary_id) ORDER BY ci.ordinal"
        ).fetchall()
    assert kinds == ["summary", *["message"] * 7], kinds  # the newest summary, then m2..m8
    assert [t for (t,) in text] == ["summary at 6"]
