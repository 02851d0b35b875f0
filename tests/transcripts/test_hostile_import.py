"""Hostile transcripts (#13.5): one bad line is `file:line: reason` and the rest imports; odd paths are named.

Through the real CLI in a subprocess, onto a real SQLite file; nothing here may print a traceback.
"""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

HEADER = {
    "type": "session",
    "version": 3,
    "id": "0b5e7c1a-6d2f-4f0e-9a3b-2c8d1e4f5a60",
    "timestamp": "2026-03-14T09:02:11.117Z",
}


def cli(db: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "openclaw_ctx", "--db", str(db), *args],
        capture_output=True,
        text=True,
        env={**os.environ, "COLUMNS": "400"},
        timeout=120,
        check=False,
    )


def entry(n: int, message: dict[str, object]) -> str:
    return json.dumps(
        {
            "type": "message",
            "id": f"e{n}",
            "parentId": f"e{n - 1}" if n else None,
            "timestamp": "2026-03-14T09:02:1{n}.000Z",
            "message": message,
        }
    )


def transcript(tmp_path: Path, bad_line: str, *, encoding: str = "utf-8") -> Path:
    """A header, a good user line, `bad_line` (line 3), then a good line after it."""
    path = tmp_path / "session.jsonl"
    lines = [
        json.dumps(HEADER),
        entry(0, {"role": "user", "content": "before the bad line"}),
        bad_line,
        entry(3, {"role": "user", "content": "after the bad line"}),
    ]
    path.write_text("\n".join(lines) + "\n", encoding=encoding)
    return path


def stored_texts(db: Path) -> list[str]:
    with sqlite3.connect(db) as conn:
        return [r[0] for r in conn.execute("SELECT text FROM messages ORDER BY message_id")]


HOSTILE = {
    "deep nesting": ("[" * 100_000 + "]" * 100_000, "nested too deeply"),
    "nesting under the recursion limit": (
        entry(2, {"role": "user", "content": [{"type": "text", "text": "x", "x": json.loads("[" * 900 + "]" * 900)}]}),
        "nested 101 levels deep",
    ),
    "a timestamp no JavaScript host can send": (
        entry(2, {"role": "user", "content": "x", "timestamp": int("9" * 400)}),
        "message.timestamp",
    ),
    "usage beyond SQLite's integers": (
        entry(2, {"role": "assistant", "content": [{"type": "text", "text": "x"}], "usage": {"input": 10**30}}),
        "message.usage.input",
    ),
    "tokensBefore beyond SQLite's integers": (
        json.dumps(
            {
                "type": "compaction",
                "id": "e2",
                "parentId": "e1",
                "timestamp": "2026-03-14T09:02:12.000Z",
                "summary": "s",
                "firstKeptEntryId": "e0",
                "tokensBefore": 10**30,
            }
        ),
        "compaction.tokensBefore",
    ),
    "an integer of more digits than Python converts": (
        '{"type": "message", "id": "e2", "n": ' + "9" * 5000 + "}",
        "not usable JSON",
    ),
}


@pytest.mark.parametrize("case", list(HOSTILE), ids=list(HOSTILE))
def test_a_hostile_line_is_named_and_the_rest_imports(tmp_path: Path, case: str) -> None:
    bad, reason = HOSTILE[case]
    path = transcript(tmp_path, bad)
    db = tmp_path / "h.db"
    result = cli(db, "import", str(path))
    assert result.returncode == 2, result.stderr  # documented: 2 when lines were skipped
    assert "Traceback" not in result.stderr + result.stdout
    said = " ".join((result.stdout + result.stderr).split())
    assert f"{path}:3:" in said, said
    assert reason in said, said
    texts = stored_texts(db)
    assert "before the bad line" in texts[0]
    assert any("after the bad line" in t for t in texts), texts


def test_a_byte_order_mark_is_not_part_of_the_header(tmp_path: Path) -> None:
    path = transcript(tmp_path, entry(2, {"role": "user", "content": "the middle"}), encoding="utf-8-sig")
    assert path.read_bytes().startswith(b"\xef\xbb\xbf")
    db = tmp_path / "bom.db"
    result = cli(db, "import", str(path))
    assert result.returncode == 0, result.stderr
    assert "skipped" not in result.stderr, result.stderr
    assert len(stored_texts(db)) == 3


@pytest.mark.parametrize("kind", ["device", "named pipe", "link loop", "dangling link"])
def test_paths_that_are_not_transcripts_are_named_for_what_they_are(tmp_path: Path, kind: str) -> None:
    if kind == "device":
        target, said = Path("/dev/null"), "a device"
    elif kind == "named pipe":
        target, said = tmp_path / "pipe", "a named pipe"
        os.mkfifo(target)
    elif kind == "link loop":
        target, said = tmp_path / "a", "a symbolic link loop"
        os.symlink(tmp_path / "b", target)
        os.symlink(target, tmp_path / "b")
    else:
        target, said = tmp_path / "dangling", "a symbolic link to nothing"
        os.symlink(tmp_path / "nowhere", target)
    result = cli(tmp_path / "p.db", "import", str(target))
    assert result.returncode != 0
    assert "Traceback" not in result.stderr
    assert said in " ".join(result.stderr.split()), result.stderr
