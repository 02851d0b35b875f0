"""Build an OpenClaw 2026.9 agent store (``openclaw-agent.sqlite``) for tests.

The tables are the subset of the real schema (read from a store openclaw 2026.9.6 wrote, schema
version 23) that the reader touches: ``transcript_events`` exactly as the host declares it but for the
navigation CHECK, ``transcript_event_identities`` and ``session_transcript_active_events`` as declared
(every event on the active path, message positions counting the message events from 0),
``session_nodes`` with its key columns, ``schema_meta``; ``session_windows`` (key and predecessor of
every session), ``session_transcript_archives`` (what a deletion leaves: the whole JSONL) and
``session_transcript_cold_archives`` (wrapper records, zstd) with the columns the reader reads, their
contents as 2026.9.6 writes them (read from its archive and cold-storage code). Events of `compress_from`
bytes or more are stored zstd-compressed, level 1, as the host does from 1 KiB.
"""

from __future__ import annotations

import hashlib
import json
import sqlite3
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import zstandard

FIXTURE = Path(__file__).parent / "fixtures" / "openclaw-2026.9.6-session.jsonl"
"""One real gateway turn with a tool call, as openclaw 2026.9.6 stored it (10 events; the cwd rewritten)."""

_SCHEMA = """
CREATE TABLE schema_meta (
  meta_key TEXT NOT NULL PRIMARY KEY, role TEXT NOT NULL, schema_version INTEGER NOT NULL,
  agent_id TEXT, app_version TEXT, created_at INTEGER NOT NULL, updated_at INTEGER NOT NULL
) STRICT;
CREATE TABLE session_nodes (
  session_key TEXT NOT NULL PRIMARY KEY, current_session_id TEXT NOT NULL, entry_json TEXT NOT NULL,
  updated_at INTEGER NOT NULL
) STRICT;
CREATE TABLE session_windows (
  session_id TEXT NOT NULL PRIMARY KEY, session_key TEXT NOT NULL, previous_session_id TEXT, reason TEXT,
  created_at INTEGER NOT NULL, updated_at INTEGER NOT NULL
) STRICT;
CREATE TABLE session_transcript_archives (
  session_id TEXT NOT NULL, generation TEXT NOT NULL, session_key TEXT NOT NULL,
  reason TEXT NOT NULL CHECK (reason IN ('deleted', 'reset')),
  encoding TEXT NOT NULL CHECK (encoding IN ('identity', 'zstd')), archive_blob BLOB NOT NULL,
  archive_sha256 TEXT NOT NULL, archive_name TEXT NOT NULL UNIQUE, created_at INTEGER NOT NULL,
  PRIMARY KEY (session_id, generation)
) STRICT;
CREATE TABLE session_transcript_cold_archives (
  session_id TEXT NOT NULL PRIMARY KEY, generation TEXT NOT NULL, archive_name TEXT NOT NULL UNIQUE,
  archive_sha256 TEXT NOT NULL, event_count INTEGER NOT NULL, raw_bytes INTEGER NOT NULL,
  archive_bytes INTEGER NOT NULL, last_seq INTEGER NOT NULL, archived_at INTEGER NOT NULL,
  storage TEXT NOT NULL CHECK (storage IN ('file', 'sqlite')), archive_blob BLOB
) STRICT;
CREATE TABLE transcript_events (
  session_id TEXT NOT NULL,
  seq INTEGER NOT NULL,
  event_json TEXT,
  created_at INTEGER NOT NULL,
  event_zstd BLOB,
  event_utf8_bytes INTEGER CHECK (event_utf8_bytes IS NULL OR event_utf8_bytes >= 0),
  navigation_json TEXT,
  PRIMARY KEY (session_id, seq),
  CHECK (
    (event_json IS NOT NULL AND event_zstd IS NULL)
    OR (event_json IS NULL AND event_zstd IS NOT NULL AND event_utf8_bytes IS NOT NULL AND navigation_json IS NOT NULL)
  )
) STRICT;
CREATE TABLE transcript_event_identities (
  session_id TEXT NOT NULL, event_id TEXT NOT NULL, seq INTEGER NOT NULL, event_type TEXT, parent_id TEXT,
  message_idempotency_key TEXT, created_at INTEGER NOT NULL,
  PRIMARY KEY (session_id, event_id)
) STRICT;
CREATE TABLE session_transcript_active_events (
  session_id TEXT NOT NULL,
  active_position INTEGER NOT NULL CHECK (active_position >= 0),
  event_seq INTEGER NOT NULL,
  message_position INTEGER CHECK (message_position IS NULL OR message_position >= 0),
  context_eligible INTEGER,
  PRIMARY KEY (session_id, active_position)
) STRICT;
"""
_NAVIGATION = json.dumps({"version": 1, "report": {"kind": "canonical"}, "navigation": {}, "reset": {}, "model": {}})


def fixture_lines() -> list[str]:
    """The real session's events, one JSON line each."""
    return FIXTURE.read_text(encoding="utf-8").splitlines()


def create_store(path: Path) -> Path:
    """An empty agent store in WAL mode, as the gateway keeps it."""
    con = sqlite3.connect(path)
    con.execute("PRAGMA journal_mode=WAL")
    con.executescript(_SCHEMA)
    con.execute("INSERT INTO schema_meta VALUES ('primary', 'agent', 23, 'main', '2026.9.6', 0, 0)")
    con.commit()
    con.close()
    return path


def add_session(
    path: Path,
    session_id: str,
    key: str,
    events: Sequence[str | dict[str, Any]],
    *,
    compress_from: int = 1024,
    entry: dict[str, Any] | None = None,
) -> None:
    """Append `events` (JSON lines or objects) to the session, and point `key` at it (with `entry` as the
    key's session entry)."""
    con = sqlite3.connect(path)
    start = con.execute("SELECT coalesce(max(seq) + 1, 0) FROM transcript_events WHERE session_id = ?", (session_id,))
    seq = int(start.fetchone()[0])
    for offset, event in enumerate(events):
        line = event if isinstance(event, str) else json.dumps(event, ensure_ascii=False)
        data = line.encode("utf-8")
        if len(data) >= compress_from:
            packed = zstandard.ZstdCompressor(level=1).compress(data)
            row: tuple[Any, ...] = (session_id, seq + offset, None, 0, packed, len(data), _NAVIGATION)
        else:
            row = (session_id, seq + offset, line, 0, None, None, None)
        con.execute("INSERT INTO transcript_events VALUES (?, ?, ?, ?, ?, ?, ?)", row)
        entry = json.loads(line)
        if isinstance(entry, dict) and isinstance(entry.get("id"), str) and entry.get("type") != "session":
            con.execute(
                "INSERT INTO transcript_event_identities VALUES (?, ?, ?, ?, ?, NULL, 0)",
                (session_id, entry["id"], seq + offset, entry.get("type"), entry.get("parentId")),
            )
            counts = con.execute(
                "SELECT count(*), count(message_position) FROM session_transcript_active_events WHERE session_id = ?",
                (session_id,),
            ).fetchone()
            position = counts[1] if entry.get("type") == "message" else None
            con.execute(
                "INSERT INTO session_transcript_active_events VALUES (?, ?, ?, ?, 1)",
                (session_id, counts[0], seq + offset, position),
            )
    con.execute(
        "INSERT INTO session_nodes VALUES (?, ?, ?, 0)"
        " ON CONFLICT DO UPDATE SET current_session_id = excluded.current_session_id, entry_json = excluded.entry_json",
        (key, session_id, json.dumps(entry or {})),
    )
    con.commit()
    con.close()


def _lines_of(events: Sequence[str | dict[str, Any]]) -> list[str]:
    return [e if isinstance(e, str) else json.dumps(e, ensure_ascii=False) for e in events]


def add_window(path: Path, session_id: str, key: str, previous: str | None = None) -> None:
    """Record the session's window: its key and the session it continues."""
    con = sqlite3.connect(path)
    con.execute("INSERT INTO session_windows VALUES (?, ?, ?, NULL, 0, 0)", (session_id, key, previous))
    con.commit()
    con.close()


def archive_deleted(path: Path, session_id: str, key: str, events: Sequence[str | dict[str, Any]]) -> str:
    """Store a deleted session's archive as the host does (the JSONL, one zstd stream); its name."""
    data = "".join(line + "\n" for line in _lines_of(events)).encode("utf-8")
    packed = zstandard.ZstdCompressor(level=3).compress(data)
    generation = hashlib.sha256(session_id.encode()).hexdigest()[:32]
    name = f"{session_id}.jsonl.deleted.2026-12-01T10-00-00.000Z.{generation}.zst"
    con = sqlite3.connect(path)
    con.execute(
        "INSERT INTO session_transcript_archives VALUES (?, ?, ?, 'deleted', 'zstd', ?, ?, ?, 0)",
        (session_id, generation, key, packed, hashlib.sha256(packed).hexdigest(), name),
    )
    con.commit()
    con.close()
    return name


def archive_cold(path: Path, session_id: str, key: str, events: Sequence[str | dict[str, Any]]) -> Path:
    """Move a session to cold storage as the host does: wrapper records, zstd, in ``sessions/cold/``."""
    lines = _lines_of(events)
    records = [{"kind": "header", "version": 1, "sessionId": session_id, "generation": "g1"}]
    records += [
        {"kind": "event", "row": {"seq": i, "event_json": line, "created_at": 0}} for i, line in enumerate(lines)
    ]
    records.append({"kind": "index", "row": {}})
    packed = zstandard.ZstdCompressor(level=3).compress("".join(json.dumps(r) + "\n" for r in records).encode())
    name = hashlib.sha256(session_id.encode()).hexdigest() + ".jsonl.zst"
    cold = path.parent.parent / "sessions" / "cold"
    cold.mkdir(parents=True, exist_ok=True)
    (cold / name).write_bytes(packed)
    con = sqlite3.connect(path)
    raw = sum(len(line.encode()) for line in lines)
    con.execute(
        "INSERT INTO session_transcript_cold_archives VALUES (?, 'g1', ?, ?, ?, ?, ?, ?, 0, 'file', NULL)",
        (session_id, name, hashlib.sha256(packed).hexdigest(), len(lines), raw, len(packed), len(lines) - 1),
    )
    con.execute("INSERT INTO session_windows VALUES (?, ?, NULL, NULL, 0, 0)", (session_id, key))
    con.commit()
    con.close()
    return cold / name
