"""OpenClaw 2026.9's SQLite agent store, read-only: a session reads exactly as its JSONL file would."""

from __future__ import annotations

import hashlib
import json
import sqlite3
from pathlib import Path
from typing import Any

import pytest
from host_agent_store import add_session, create_store, fixture_lines

from openclaw_ctx.contract import SessionTarget
from openclaw_ctx.errors import HostStoreError
from openclaw_ctx.messages import to_wire
from openclaw_ctx.store.store import Store
from openclaw_ctx.transcripts import HostSession, host_session_of, read_host_transcript, read_transcript
from openclaw_ctx.transcripts.agent_store import parse_session_file_marker

SID = "1a463602-7461-4619-828f-b507d3daeb44"
KEY = "agent:main:main"
LAST_ENTRY = "30061b10-4efb-4cf9-bf27-e2c7196f0e72"
LONG = "a long pasted log line, ünïcödé and 🦀 included; " * 60


def second_turn() -> list[dict[str, Any]]:
    """A second turn whose user message is over 1 KiB, so the host stores it compressed."""
    user = {"role": "user", "content": LONG, "timestamp": 1796417890000}
    reply = {"role": "assistant", "content": [{"type": "text", "text": "read it"}], "stopReason": "stop"}
    return [
        {"type": "message", "id": "u2", "parentId": LAST_ENTRY, "timestamp": "2026-12-04T21:00Z", "message": user},
        {"type": "message", "id": "a2", "parentId": "u2", "timestamp": "2026-12-04T21:01Z", "message": reply},
    ]


def lines() -> list[str]:
    return fixture_lines() + [json.dumps(e, ensure_ascii=False) for e in second_turn()]


@pytest.fixture
def agent_store(tmp_path: Path) -> Path:
    path = create_store(tmp_path / "openclaw-agent.sqlite")
    add_session(path, SID, KEY, lines())
    return path


def _sql(path: Path, query: str, *args: Any) -> Any:
    con = sqlite3.connect(path)
    try:
        result = con.execute(query, args).fetchall()
        con.commit()
        return result
    finally:
        con.close()


def test_a_host_session_reads_as_its_jsonl_file_does(agent_store: Path, tmp_path: Path) -> None:
    [(packed,)] = _sql(agent_store, "SELECT count(*) FROM transcript_events WHERE event_zstd IS NOT NULL")
    assert packed == 1  # the long user message is stored compressed
    jsonl = tmp_path / "session.jsonl"
    jsonl.write_text("\n".join(lines()) + "\n", encoding="utf-8")

    from_db, from_file = read_host_transcript(HostSession(agent_store, SID)), read_transcript(jsonl)

    assert from_db.errors == [] and from_file.errors == []
    assert from_db.header is not None and from_db.header.version == 4 and from_db.header.id == SID
    assert [e.id for e in from_db.entries] == [e.id for e in from_file.entries]
    context = [to_wire(m) for m in from_db.context_messages()]
    assert context == [to_wire(m) for m in from_file.context_messages()]
    assert [m["role"] for m in context] == ["user", "assistant", "toolResult", "assistant", "user", "assistant"]
    assert context[4]["content"] == LONG


def test_a_session_the_store_does_not_hold_reads_empty(agent_store: Path) -> None:
    t = read_host_transcript(HostSession(agent_store, "no-such-session"))
    assert t.header is None and t.entries == [] and t.errors == []


def test_a_damaged_compressed_event_is_named_by_its_seq(agent_store: Path) -> None:
    _sql(agent_store, "UPDATE transcript_events SET event_zstd = x'28b52ffd00ff' WHERE event_zstd IS NOT NULL")
    with pytest.raises(HostStoreError, match=r"event 10 does not decompress"):
        read_host_transcript(HostSession(agent_store, SID))


def test_a_compressed_event_of_the_wrong_size_is_refused(agent_store: Path) -> None:
    _sql(agent_store, "UPDATE transcript_events SET event_utf8_bytes = event_utf8_bytes + 7 WHERE event_zstd NOTNULL")
    with pytest.raises(HostStoreError, match=r"event 10 decompresses to \d+ bytes, not \d+"):
        read_host_transcript(HostSession(agent_store, SID))


def test_what_is_not_an_agent_store_is_refused_by_name(tmp_path: Path, store: Store, db_path: Path) -> None:
    text = tmp_path / "notes.sqlite"
    text.write_text("not a database at all, just notes\n" * 100)
    with pytest.raises(HostStoreError, match="not readable as OpenClaw's agent store"):
        read_host_transcript(HostSession(text, SID))
    with pytest.raises(HostStoreError, match=r"no transcript_events table"):
        read_host_transcript(HostSession(db_path, SID))  # our own database
    with pytest.raises(HostStoreError, match="does not exist"):
        read_host_transcript(HostSession(tmp_path / "missing.sqlite", SID))


def test_reading_never_writes_the_hosts_file(agent_store: Path) -> None:
    before = hashlib.sha256(agent_store.read_bytes()).hexdigest()
    read_host_transcript(HostSession(agent_store, SID))
    assert hashlib.sha256(agent_store.read_bytes()).hexdigest() == before


def test_a_write_the_gateway_has_not_committed_is_not_read(agent_store: Path) -> None:
    gateway = sqlite3.connect(agent_store)
    try:
        gateway.execute("BEGIN IMMEDIATE")
        gateway.execute(
            "INSERT INTO transcript_events VALUES (?, 99, ?, 0, NULL, NULL, NULL)",
            (SID, json.dumps({"type": "message", "id": "u3", "parentId": "a2", "message": {"role": "user"}})),
        )
        t = read_host_transcript(HostSession(agent_store, SID))
        assert "u3" not in {e.id for e in t.entries} and t.errors == []
    finally:
        gateway.rollback()
        gateway.close()


def test_a_session_file_marker_names_agent_session_and_store() -> None:
    where = parse_session_file_marker("sqlite:main:abc-1:/srv/odd:dir/openclaw-agent.sqlite")
    assert where == HostSession(Path("/srv/odd:dir/openclaw-agent.sqlite"), "abc-1", "main")
    assert parse_session_file_marker("agent:main:main") is None
    assert parse_session_file_marker("sqlite:main:") is None
    assert parse_session_file_marker(None) is None


def test_a_hook_names_the_store_by_marker_or_by_its_session_target() -> None:
    target = SessionTarget(agent_id="main", session_id="s-1", session_key=KEY, store_path="/a/openclaw-agent.sqlite")
    assert host_session_of(target, KEY, "s-1") == HostSession(Path("/a/openclaw-agent.sqlite"), "s-1", "main")
    marker = "sqlite:main:s-2:/b/openclaw-agent.sqlite"
    assert host_session_of(target, marker, "s-1") == HostSession(Path("/b/openclaw-agent.sqlite"), "s-2", "main")
    assert host_session_of(SessionTarget(session_key=KEY), KEY, "s-1") is None
    assert host_session_of(None, None, "s-1") is None


@pytest.mark.parametrize(
    ("store_path", "database"),
    [
        ("/state/agents/ops/sessions/sessions.json", "/state/agents/ops/agent/openclaw-agent.sqlite"),
        ("/custom/sessions.json", "/custom/openclaw-agent.sqlite"),
        ("/custom/store.json", "/custom/store.sqlite"),
        ("/state/agents/ops/agent/openclaw-agent.sqlite", "/state/agents/ops/agent/openclaw-agent.sqlite"),
    ],
)
def test_the_gateways_session_store_path_leads_to_the_agent_database(store_path: str, database: str) -> None:
    # The gateway's sessionTarget names the session index; the transcripts are in the agent database.
    target = SessionTarget(agent_id="ops", session_id="s-1", session_key="agent:ops:x", store_path=store_path)
    assert host_session_of(target, "agent:ops:x", "s-1") == HostSession(Path(database), "s-1", "ops")
