"""`openclaw-ctx import` over OpenClaw 2026.9's SQLite agent store: every session it holds, keyed as the
host keys it, through the real CLI into a real store file."""

from __future__ import annotations

import json
import shutil
import sqlite3
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from host_agent_store import add_session, add_window, archive_cold, archive_deleted, create_store, fixture_lines
from typer.testing import Result

REAL = "1a463602-7461-4619-828f-b507d3daeb44"  # the real 2026.9.6 session of the fixture
MAIN, CRON, SLACK = "agent:main:main", "agent:main:cron:nightly", "agent:main:slack:c1"


def _id(n: int) -> str:
    return str(uuid.UUID(int=n))


def conversation(session_id: str, words: list[str], parent: str | None = None) -> list[dict[str, Any]]:
    """A header and one user/assistant pair per word, chained."""
    header: dict[str, Any] = {"type": "session", "version": 4, "id": session_id, "timestamp": "2026-12-01T09:00Z"}
    if parent:
        header["parentSession"] = f"sqlite:main:{parent}:/gone/openclaw-agent.sqlite"
    events: list[dict[str, Any]] = [header]
    previous = None
    for i, word in enumerate(words):
        for role in ("user", "assistant"):
            entry_id = f"{session_id[:8]}-{i}-{role}"
            content: Any = word if role == "user" else [{"type": "text", "text": f"ok {word}"}]
            message = {"role": role, "content": content, "timestamp": 1796000000000 + i}
            events.append(
                {"type": "message", "id": entry_id, "parentId": previous, "timestamp": "2026-12-01T09:01Z"}
                | {"message": message}
            )
            previous = entry_id
    return events


@dataclass
class State:
    root: Path
    db: Path
    store: Path
    successor: str
    deleted: str
    cold: str
    cold_file: Path
    legacy_copy: Path


@pytest.fixture
def state(tmp_path: Path) -> State:
    agent = tmp_path / "state" / "agents" / "main"
    (agent / "agent").mkdir(parents=True)
    store = create_store(agent / "agent" / "openclaw-agent.sqlite")
    successor, deleted, cold = _id(2), _id(3), _id(4)
    add_session(store, REAL, MAIN, fixture_lines())
    add_window(store, REAL, MAIN)
    marker = f"sqlite:main:{successor}:/home/someone/.openclaw/agents/main/agent/openclaw-agent.sqlite"
    entry = {"sessionId": successor, "sessionFile": marker, "lastChannel": "telegram", "compactionCount": 2}
    add_session(store, successor, MAIN, conversation(successor, ["pear", "plum"], parent=REAL), entry=entry)
    add_window(store, successor, MAIN, previous=REAL)
    archive_deleted(store, deleted, CRON, conversation(deleted, ["nightly report"]))
    cold_file = archive_cold(store, cold, SLACK, conversation(cold, ["quince", "fig", "lime"]))
    sessions = agent / "sessions"
    (sessions / "sessions.json").write_text(json.dumps({MAIN: entry | {"label": "from sessions.json"}}))
    legacy_copy = sessions / f"{REAL}.jsonl"  # what the host migrated from; the store holds it now
    legacy_copy.write_text("\n".join(fixture_lines()[:3]) + "\n")
    return State(tmp_path / "state", tmp_path / "ctx.db", store, successor, deleted, cold, cold_file, legacy_copy)


def host_messages(store: Path, session_id: str, lines: list[str] | None = None) -> int:
    if lines is None:
        con = sqlite3.connect(store)
        lines = [
            e for (e,) in con.execute("SELECT event_json FROM transcript_events WHERE session_id = ?", (session_id,))
        ]
        con.close()
    return sum(json.loads(line).get("type") == "message" for line in lines)


def sessions(db: Path) -> dict[str, tuple[str, str | None, int, dict[str, Any]]]:
    con = sqlite3.connect(db)
    rows = con.execute(
        "SELECT s.session_id, s.session_key, s.parent_session_id, s.meta_json,"
        " (SELECT count(*) FROM messages m WHERE m.session_id = s.session_id) FROM sessions s"
    ).fetchall()
    con.close()
    return {sid: (key, parent, count, json.loads(meta or "{}")) for sid, key, parent, meta, count in rows}


def test_every_session_of_an_agent_store_imports_keyed_and_chained(
    state: State, cli_invoke: Callable[..., Result]
) -> None:
    result = cli_invoke("--db", str(state.db), "import", str(state.root / "agents"), "--json")
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    assert report["notes"] == [f"{state.legacy_copy}: the legacy copy of a session the agent store holds; not imported"]
    found = sessions(state.db)
    assert set(found) == {REAL, state.successor, state.deleted, state.cold}
    assert found[REAL][:2] == (MAIN, None) and found[state.successor][:2] == (MAIN, REAL)
    assert found[state.deleted][0] == CRON and found[state.cold][0] == SLACK
    assert found[REAL][2] == host_messages(state.store, REAL) == 4
    assert [found[s][2] for s in (state.successor, state.deleted, state.cold)] == [4, 2, 6]
    listed = found[state.successor][3]["sessionsJson"][MAIN]
    assert listed["lastChannel"] == "telegram" and listed["label"] == "from sessions.json"
    deep = cli_invoke("--db", str(state.db), "doctor", "--deep", "--json")
    checks = {c["name"]: c for c in json.loads(deep.stdout)["checks"]}
    assert checks["deep check"]["status"] == "ok", checks["deep check"]
    again = cli_invoke("--db", str(state.db), "import", str(state.root / "agents"), "--json")
    assert again.exit_code == 0 and json.loads(again.stdout)["messages_new"] == 0


def test_the_store_file_itself_imports_and_is_never_written(state: State, cli_invoke: Callable[..., Result]) -> None:
    before = state.store.read_bytes()
    result = cli_invoke("--db", str(state.db), "import", str(state.store), "--json")
    assert result.exit_code == 0, result.output
    assert set(sessions(state.db)) == {REAL, state.successor, state.deleted, state.cold}
    assert state.store.read_bytes() == before


def test_a_missing_cold_file_skips_that_session_by_name_and_the_rest_imports(
    state: State, cli_invoke: Callable[..., Result]
) -> None:
    state.cold_file.unlink()
    result = cli_invoke("--db", str(state.db), "import", str(state.store), "--json")
    assert result.exit_code != 0
    skipped = json.loads(result.stdout)["skipped"]
    assert any(f"#{state.cold_file.name}" in s and "cold-storage file" in s for s in skipped), skipped
    assert set(sessions(state.db)) == {REAL, state.successor, state.deleted}


def test_a_sessions_json_marker_leads_to_the_store_beside_it(state: State, cli_invoke: Callable[..., Result]) -> None:
    # Only the sessions directory is given: its marker names a store path from another machine.
    result = cli_invoke("--db", str(state.db), "import", str(state.legacy_copy.parent), "--json")
    assert result.exit_code == 0, result.output
    found = sessions(state.db)
    assert {REAL, state.successor} <= set(found) and found[state.successor][0] == MAIN


def test_a_relative_path_imports_each_session_once(
    state: State, cli_invoke: Callable[..., Result], monkeypatch: pytest.MonkeyPatch
) -> None:
    # The store is reached twice, from the directory walk and from the sessions.json marker.
    monkeypatch.chdir(state.root.parent)
    result = cli_invoke("--db", str(state.db), "import", "state/agents", "--json")
    report = json.loads(result.stdout)
    assert report["files"] == 4 and report["messages_duplicate"] == 0, report


def test_a_copied_agent_directory_reads_its_own_store_not_the_one_its_marker_names(
    state: State, cli_invoke: Callable[..., Result], tmp_path: Path
) -> None:
    # The marker names the live store (the path where the gateway runs); the copy beside wins.
    listing = state.legacy_copy.parent / "sessions.json"
    entries = json.loads(listing.read_text(encoding="utf-8"))
    entries[MAIN]["sessionFile"] = f"sqlite:main:{state.successor}:{state.store}"
    listing.write_text(json.dumps(entries), encoding="utf-8")
    copy = tmp_path / "backup"
    shutil.copytree(state.root, copy)
    result = cli_invoke("--db", str(state.db), "import", str(copy / "agents/main/sessions"), "--json")
    assert result.exit_code == 0, result.output
    files = {f["path"].split("#")[0] for f in json.loads(result.stdout)["perFile"]}
    assert files == {str((copy / "agents/main/agent/openclaw-agent.sqlite").resolve())}, files
