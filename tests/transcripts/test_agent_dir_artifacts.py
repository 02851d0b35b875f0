"""Every file an OpenClaw sessions directory holds, read by OpenClaw's naming rules, through the real CLI (#15.5)."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
from pathlib import Path

import zstandard

from openclaw_ctx.transcripts.artifacts import Artifact, classify

STAMP = "2026-03-01T10-20-30.456Z"
CHECKPOINT = "0f8fad5b-d9cb-469f-a165-70867728950e"


def _transcript(session_id: str, texts: list[str]) -> bytes:
    lines: list[dict[str, object]] = [
        {"type": "session", "version": 3, "id": session_id, "timestamp": "2026-01-01T00:00:00.000Z", "cwd": "/"}
    ]
    parent = None
    for n, text in enumerate(texts):
        entry_id = f"{session_id}-{n}"
        role = "user" if n % 2 == 0 else "assistant"
        content: object = text if role == "user" else [{"type": "text", "text": text}]
        message = {"role": role, "content": content, "timestamp": 1_767_225_600_000 + n}
        lines.append(
            {
                "type": "message",
                "id": entry_id,
                "parentId": parent,
                "timestamp": "2026-01-01T00:00:01.000Z",
                "message": message,
            }
        )
        parent = entry_id
    return "".join(json.dumps(line) + "\n" for line in lines).encode()


def _cli(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    result = subprocess.run(
        [sys.executable, "-m", "openclaw_ctx", *args],
        capture_output=True,
        text=True,
        cwd=cwd,
        env={**os.environ, "COLUMNS": "400"},
        timeout=300,
        check=False,
    )
    assert "Traceback" not in result.stderr, result.stderr
    return result


def test_file_names_are_read_as_openclaw_names_them() -> None:
    assert classify("abc.jsonl") == Artifact("transcript", "abc")
    assert classify(f"abc.jsonl.reset.{STAMP}") == Artifact("archive", "abc", "reset", STAMP)
    assert classify(f"abc.jsonl.deleted.{STAMP}.{'a' * 32}.zst") == Artifact("archive", "abc", "deleted", STAMP, True)
    assert classify(f"abc.jsonl.bak.{STAMP}") == Artifact("backup", "abc", "bak", STAMP)
    assert classify("abc.jsonl.migrated.2") == Artifact("backup", "abc", "migrated")
    assert classify(f"abc.checkpoint.{CHECKPOINT}.jsonl") == Artifact("checkpoint", "abc", "checkpoint")
    assert classify("abc.trajectory.jsonl").kind == classify("abc.trajectory-path.json").kind == "trajectory"
    # Look-alikes are not archives: a stamp OpenClaw would not write, a lock, the index itself.
    assert classify("abc.jsonl.reset.yesterday").kind == "other"
    assert classify("abc.jsonl.lock").kind == classify("sessions.json").kind == "other"


def test_an_agent_directory_imports_its_archives_and_says_what_it_left_out(tmp_path: Path) -> None:
    sessions = tmp_path / "state" / "agents" / "main" / "sessions"
    sessions.mkdir(parents=True)
    (sessions / "live.jsonl").write_bytes(_transcript("live", ["now", "ok"]))
    (sessions / "sessions.json").write_text(json.dumps({"agent:main:main": {"sessionId": "live", "updatedAt": 1}}))
    (sessions / f"before-reset.jsonl.reset.{STAMP}").write_bytes(_transcript("before-reset", ["old q", "old a"]))
    deleted = zstandard.ZstdCompressor().compress(_transcript("gone", ["deleted q", "deleted a", "more"]))
    (sessions / f"gone.jsonl.deleted.{STAMP}.zst").write_bytes(deleted)
    (sessions / f"live.jsonl.bak.{STAMP}").write_bytes(_transcript("live", ["now"]))
    (sessions / f"live.checkpoint.{CHECKPOINT}.jsonl").write_bytes(_transcript("live", ["now"]))
    (sessions / f"lonely.checkpoint.{CHECKPOINT}.jsonl").write_bytes(_transcript("lonely", ["only copy"]))
    (sessions / "live.trajectory.jsonl").write_text('{"kind":"run.started"}\n')
    (sessions / "live.jsonl.lock").write_text("")

    result = _cli(tmp_path, "--db", "ctx.db", "import", str(tmp_path / "state"), "--json")
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    assert report["skipped"] == []
    assert sorted(Path(f["path"]).name for f in report["perFile"]) == sorted(
        [
            "live.jsonl",
            f"before-reset.jsonl.reset.{STAMP}",
            f"gone.jsonl.deleted.{STAMP}.zst",
            f"lonely.checkpoint.{CHECKPOINT}.jsonl",
        ]
    )
    notes = "\n".join(report["notes"])
    assert len(report["notes"]) == 3, notes
    assert "live.trajectory.jsonl: an OpenClaw trajectory sidecar" in notes
    assert f"live.jsonl.bak.{STAMP}: an OpenClaw backup (bak) of live.jsonl" in notes
    assert f"live.checkpoint.{CHECKPOINT}.jsonl: an OpenClaw compaction checkpoint of live.jsonl" in notes
    with sqlite3.connect(tmp_path / "ctx.db") as db:
        counts = dict(db.execute("SELECT session_id, count(*) FROM messages GROUP BY session_id").fetchall())
        keys = dict(db.execute("SELECT session_id, session_key FROM sessions").fetchall())
    assert counts == {"live": 2, "before-reset": 2, "gone": 3, "lonely": 1}
    assert keys["live"] == "agent:main:main"
    # Re-importing adds nothing, and the human report names the files left out too.
    again = _cli(tmp_path, "--db", "ctx.db", "import", str(sessions))
    assert again.returncode == 0 and "left out" in again.stderr and "trajectory sidecar" in again.stderr


def test_a_cut_short_zstd_archive_is_a_named_line_error_not_a_traceback(tmp_path: Path) -> None:
    sessions = tmp_path / "sessions"
    sessions.mkdir()
    whole = zstandard.ZstdCompressor().compress(_transcript("cut", [f"message {n} " * 40 for n in range(200)]))
    archive = sessions / f"cut.jsonl.reset.{STAMP}.zst"
    archive.write_bytes(whole[: len(whole) // 2])
    result = _cli(tmp_path, "--db", "ctx.db", "import", str(sessions), "--json")
    assert result.returncode == 2
    (skipped,) = json.loads(result.stdout)["skipped"]
    assert str(archive) in skipped and "zstd archive cut short" in skipped


def test_a_folder_of_exported_agent_directories_imports_each(tmp_path: Path) -> None:
    exports = tmp_path / "exports"
    for name in ("alpha", "beta"):
        folder = exports / name
        folder.mkdir(parents=True)
        (folder / f"{name}.jsonl").write_bytes(_transcript(name, [f"{name} q", f"{name} a"]))
        (folder / "sessions.json").write_text(json.dumps({f"agent:{name}:main": {"sessionId": name}}))
    result = _cli(tmp_path, "--db", "ctx.db", "import", str(exports), "--json")
    assert result.returncode == 0, result.stderr
    with sqlite3.connect(tmp_path / "ctx.db") as db:
        assert sorted(db.execute("SELECT session_key FROM sessions").fetchall()) == [
            ("agent:alpha:main",),
            ("agent:beta:main",),
        ]


def test_sessions_json_entries_come_back_whole_on_export(tmp_path: Path) -> None:
    """Every field OpenClaw keeps per key survives import → export, for each key naming the session (#15.6)."""
    sessions = tmp_path / "sessions"
    sessions.mkdir()
    (sessions / "run.jsonl").write_bytes(_transcript("run", ["cron says", "done"]))
    (sessions / "bare.jsonl").write_bytes(_transcript("bare", ["no key"]))
    entry = {
        "sessionId": "run",
        "updatedAt": 1_767_225_600_123,
        "deliveryContext": {"channel": "telegram", "to": "42"},
        "lastChannel": "telegram",
        "model": "gpt-5",
        "compactionCount": 3,
        "inputTokens": 1200,
        "label": "nightly",
        "x-future-field": [1, {"deep": True}],
    }
    index = {"cron:nightly": entry, "cron:nightly:run:7": {**entry, "label": "run 7"}}
    (sessions / "sessions.json").write_text(json.dumps(index))
    assert _cli(tmp_path, "--db", "ctx.db", "import", str(sessions)).returncode == 0
    out = tmp_path / "out"
    exported = _cli(tmp_path, "--db", "ctx.db", "export", "--key", "cron:nightly", "--out", str(out))
    assert exported.returncode == 0, exported.stderr
    back = json.loads((out / "sessions.json").read_text())
    assert set(back) == set(index)
    for key, original in index.items():
        assert {k: v for k, v in back[key].items() if k != "sessionFile"} == original
        assert (out / Path(back[key]["sessionFile"]).name).is_file()
    bare = _cli(tmp_path, "--db", "ctx.db", "export", "--key", "file:bare", "--out", str(tmp_path / "bare-out"))
    assert bare.returncode == 0, bare.stderr
    assert json.loads((tmp_path / "bare-out" / "sessions.json").read_text()) == {}


def test_the_entries_survive_a_rotation_after_the_import_and_a_foreign_listing(tmp_path: Path) -> None:
    sessions = tmp_path / "sessions"
    sessions.mkdir()
    (sessions / "run.jsonl").write_bytes(_transcript("run", ["cron says", "done", "and more"]))
    entry = {"sessionId": "run", "updatedAt": 1_767_225_600_123, "lastChannel": "telegram", "label": "nightly"}
    (sessions / "sessions.json").write_text(json.dumps({"cron:nightly": entry}))
    assert _cli(tmp_path, "--db", "ctx.db", "import", str(sessions)).returncode == 0
    migrated = _cli(tmp_path, "--db", "ctx.db", "migrate", "--key", "cron:nightly", "--to", "lossless-claw")
    assert migrated.returncode == 0, migrated.stderr  # a new session, with no imported meta of its own
    out = tmp_path / "out"
    out.mkdir()
    (out / "sessions.json").write_text(json.dumps({"cron:nightly": ["not", "an", "object"], "other": {"x": 1}}))
    exported = _cli(tmp_path, "--db", "ctx.db", "export", "--key", "cron:nightly", "--out", str(out))
    assert exported.returncode == 0, exported.stderr
    back = json.loads((out / "sessions.json").read_text())
    assert back["other"] == {"x": 1}
    assert back["cron:nightly"]["lastChannel"] == "telegram" and back["cron:nightly"]["label"] == "nightly"
    assert back["cron:nightly"]["sessionId"] != "run"  # the head of the chain, written last
