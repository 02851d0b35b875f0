"""What the CLI refuses, and says why (#13.6): a replay that left lines out, an engine nobody installed,
a database URL it cannot use, a key that was never stored, a key with control characters.

Through the real CLI in a subprocess, onto a real SQLite file; nothing may print a traceback or write
anything when it refuses.
"""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

HEADER = {"type": "session", "version": 3, "id": "refusals", "timestamp": "2026-03-14T09:02:11.117Z", "cwd": "/w"}
USAGE = {"input": 1, "output": 1, "cacheRead": 0, "cacheWrite": 0, "totalTokens": 2}


def cli(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    result = subprocess.run(
        [sys.executable, "-m", "openclaw_ctx", *args],
        capture_output=True,
        text=True,
        cwd=cwd,
        env={**os.environ, "COLUMNS": "400"},
        timeout=120,
        check=False,
    )
    assert "Traceback" not in result.stderr, result.stderr
    return result


def conversation(turns: int) -> list[str]:
    """Header plus `turns` user/assistant pairs, each entry parented on the one before."""
    lines, parent = [json.dumps(HEADER)], None
    for i in range(turns):
        for role in ("user", "assistant"):
            entry_id = f"{role[0]}{i}"
            message: dict[str, object] = {"role": role, "content": [{"type": "text", "text": f"{role} {i}"}]}
            if role == "assistant":
                message.update(api="x", provider="p", model="m", usage=USAGE, stopReason="stop")
            lines.append(json.dumps({"type": "message", "id": entry_id, "parentId": parent, "message": message}))
            parent = entry_id
    return lines


def write(tmp_path: Path, lines: list[str], name: str = "session.jsonl") -> Path:
    path = tmp_path / name
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def stored_messages(db: Path) -> int:
    with sqlite3.connect(db) as conn:
        return int(conn.execute("SELECT count(*) FROM messages").fetchone()[0])


def session_keys(db: Path) -> list[str]:
    with sqlite3.connect(db) as conn:
        return [k for (k,) in conn.execute("SELECT DISTINCT session_key FROM sessions")]


def test_a_clean_replay_reports_no_problems(tmp_path: Path) -> None:
    result = cli(tmp_path, "--db", "ctx.db", "replay", str(write(tmp_path, conversation(4))), "--json")
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["problems"] == []


def test_replay_names_an_unreadable_line_and_exits_1(tmp_path: Path) -> None:
    lines = conversation(6)
    lines[5] = lines[5][:30]  # a line cut short, as a crash mid-write leaves it
    path = write(tmp_path, lines)
    result = cli(tmp_path, "--db", "ctx.db", "replay", str(path), "--json")
    assert result.returncode == 1
    report = json.loads(result.stdout)
    assert any(p.startswith(f"{path}:6: not valid JSON") for p in report["problems"]), report["problems"]
    assert f"{path}:6:" in result.stderr and "left out" in result.stderr
    # The cut line held u2's child link: the branch replayed is the part after it, and that part is stored.
    assert stored_messages(tmp_path / "ctx.db") == report["messages_stored"] > 0


def test_replay_keeps_the_whole_branch_across_a_stale_parent(tmp_path: Path) -> None:
    lines = conversation(5)
    broken = json.loads(lines[5])
    broken["parentId"] = "gone"  # names an entry no line holds: OpenClaw 2026.9 hangs it under the leaf
    lines[5] = json.dumps(broken)
    result = cli(tmp_path, "--db", "ctx.db", "replay", str(write(tmp_path, lines)), "--json")
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    assert report["problems"] == []
    assert report["messages_stored"] == stored_messages(tmp_path / "ctx.db") == len(lines) - 1


def test_replay_of_random_bytes_is_not_zero_turns_and_success(tmp_path: Path) -> None:
    path = tmp_path / "noise.jsonl"
    path.write_bytes(os.urandom(4096).replace(b"\n", b"") + b"\n" + b"\xff\xfe{not json\n")
    result = cli(tmp_path, "--db", "ctx.db", "replay", str(path))
    assert result.returncode == 1
    assert f"{path}:1:" in result.stderr


def test_an_engine_nobody_installed_is_a_usage_error(tmp_path: Path) -> None:
    path = write(tmp_path, conversation(2))
    result = cli(tmp_path, "--db", "ctx.db", "replay", "--engine", "bogus", str(path))
    assert result.returncode == 2
    assert "no engine 'bogus' is installed" in result.stderr and "lossless-claw" in result.stderr
    assert not (tmp_path / "ctx.db").exists()


@pytest.mark.parametrize("url", ["postgresql+asyncpg://me:s3cret@db.example/ctx", "mysql://root:s3cret@h/db"])
def test_a_database_url_it_cannot_use_is_refused_without_a_trace(tmp_path: Path, url: str) -> None:
    result = cli(tmp_path, "--db", url, "sessions")
    assert result.returncode == 1
    assert "not a store this version can use" in result.stderr
    assert "s3cret" not in result.stdout + result.stderr
    # No directory tree named after the URL (`state/` is the test's OPENCLAW_STATE_DIR).
    assert [p.name for p in tmp_path.iterdir() if p.name != "state"] == []


def test_a_sqlite_url_names_the_file(tmp_path: Path) -> None:
    path = write(tmp_path, conversation(2))
    assert cli(tmp_path, "--db", "sqlite:///via-url.db", "replay", str(path)).returncode == 0
    assert stored_messages(tmp_path / "via-url.db") == 4


def test_a_device_is_not_a_database(tmp_path: Path) -> None:
    result = cli(tmp_path, "--db", os.devnull, "sessions")
    assert result.returncode == 1
    assert "not a regular file" in result.stderr


def test_compact_of_a_key_never_stored_creates_nothing(tmp_path: Path) -> None:
    path = write(tmp_path, conversation(3))
    assert cli(tmp_path, "--db", "ctx.db", "replay", str(path), "--key", "agent:main:main").returncode == 0
    result = cli(tmp_path, "--db", "ctx.db", "compact", "--key", "agent:main:mian")
    assert result.returncode == 1
    assert "no session key 'agent:main:mian'" in result.stderr and "did you mean 'agent:main:main'" in result.stderr
    assert session_keys(tmp_path / "ctx.db") == ["agent:main:main"]


@pytest.mark.parametrize(
    ("key", "codepoint"), [("\x1b[31mred", "U+001B"), ("a\nb", "U+000A"), ("x\u202eevil", "U+202E")]
)
def test_a_key_with_control_characters_is_refused(tmp_path: Path, key: str, codepoint: str) -> None:
    path = write(tmp_path, conversation(2))
    result = cli(tmp_path, "--db", "ctx.db", "replay", str(path), "--key", key)
    assert result.returncode == 1
    assert codepoint in result.stderr
    assert stored_messages(tmp_path / "ctx.db") == 0


@pytest.mark.parametrize(
    ("config", "named"),
    [
        ('{plugins: {entries: {"lossless-claw": {enabled: "yes"}}}}', "plugins.entries.lossless-claw.enabled"),
        ("{agents: {defaults: {compaction: {reserveTokens: '1000'}}}}", "agents.defaults.compaction.reserveTokens"),
    ],
)
def test_a_config_value_of_the_wrong_type_is_named(tmp_path: Path, config: str, named: str) -> None:
    (tmp_path / "openclaw.json").write_text(config, encoding="utf-8")
    path = write(tmp_path, conversation(2))
    result = cli(tmp_path, "--config", "openclaw.json", "--db", "ctx.db", "replay", str(path))
    assert result.returncode == 1
    assert f"openclaw.json: {named}:" in result.stderr and "(got '" in result.stderr
    assert not (tmp_path / "ctx.db").exists()


def test_replay_with_an_engine_that_cannot_start_runs_nothing_else(tmp_path: Path) -> None:
    config = '{plugins: {entries: {"lossless-claw": {config: {freshTailCount: "ten"}}}}}'
    (tmp_path / "openclaw.json").write_text(config, encoding="utf-8")
    path = write(tmp_path, conversation(2))
    result = cli(tmp_path, "--config", "openclaw.json", "--db", "ctx.db", "replay", "-e", "lossless-claw", str(path))
    assert result.returncode == 1
    assert "engine 'lossless-claw' cannot run" in result.stderr and "freshTailCount" in result.stderr
    assert stored_messages(tmp_path / "ctx.db") == 0  # not silently replayed on legacy
