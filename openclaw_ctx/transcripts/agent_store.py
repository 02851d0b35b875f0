"""OpenClaw's SQLite agent store, read-only: the transcripts the host itself keeps (OpenClaw 2026.7+).

The host writes each session's transcript to ``agents/<agentId>/agent/openclaw-agent.sqlite``, table
``transcript_events(session_id, seq, event_json | event_zstd, event_utf8_bytes, …)``: one event per
JSONL transcript line (a version 4 session header, then the entries), in ``seq`` order. An event of
1 KiB or more may be stored zstd-compressed in ``event_zstd`` with its UTF-8 size beside it; decoding
it needs the `zstandard` package. ``session_nodes`` maps a session key to its current session id.

A hook names the store by a ``sessionFile`` marker ``sqlite:<agentId>:<sessionId>:<databasePath>`` or
by ``sessionTarget.storePath``. The gateway's target names the agent's session index
(``agents/<id>/sessions/sessions.json``), not the database; :func:`agent_database_path` maps it the
way the host does (a path ending in ``.sqlite`` is the database itself). The file is opened
read-only (``mode=ro``) while the gateway may be writing it: one read transaction sees one
consistent snapshot (the host runs WAL).

`openclaw-ctx import` reads every session of a store (:func:`list_host_sessions`); a hook reads one::

    where = host_session_of(params.session_target, params.session_file, params.session_id)
    transcript = read_host_transcript(where)      # a Transcript, as read_transcript gives for a file
    async with store.transaction() as conn:       # import_host_session is in .importer
        report = await import_host_session(conn, store.counter, transcript, where, "agent:main:main")
"""

from __future__ import annotations

import io
import itertools
import json
import sqlite3
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from openclaw_ctx.contract.targets import SessionTarget
from openclaw_ctx.errors import HostStoreError, MissingDependencyError
from openclaw_ctx.store.files import read_only_url
from openclaw_ctx.transcripts.entries import SessionHeader, TranscriptLineError
from openclaw_ctx.transcripts.jsonl import iter_entries, read_transcript, zstd_lines
from openclaw_ctx.transcripts.tree import Transcript

__all__ = [
    "AGENT_STORE_NAME",
    "HostListing",
    "HostSession",
    "agent_database_path",
    "is_agent_store",
    "list_host_sessions",
    "open_agent_store",
    "host_session_of",
    "parse_session_file_marker",
    "read_host_header",
    "read_host_transcript",
]

AGENT_STORE_NAME = "openclaw-agent.sqlite"
"""The file name of an agent's store: ``agents/<agentId>/agent/openclaw-agent.sqlite``."""

_MARKER = "sqlite:"
_EVENTS = """
    SELECT seq, event_json, event_zstd, event_utf8_bytes FROM transcript_events
    WHERE session_id = ? ORDER BY seq LIMIT ?
"""


HostPart = Literal["live", "deleted", "cold"]


@dataclass(frozen=True)
class HostSession:
    """One session's transcript in a host's agent store.

    `part` says where the store keeps it: ``live`` in ``transcript_events``; ``deleted`` as the JSONL
    archive a deletion leaves in ``session_transcript_archives`` (`archive_name`; the only copy once the
    live rows are gone); ``cold`` moved to cold storage (``session_transcript_cold_archives``: a blob,
    or ``sessions/cold/<archive_name>`` beside the agent directory).
    """

    store_path: Path
    session_id: str
    agent_id: str | None = None
    part: HostPart = "live"
    archive_name: str | None = None

    @property
    def name(self) -> str:
        """How reports name it: ``<store path>#<session id>`` (``#<archive name>`` for an archive)."""
        return f"{self.store_path}#{self.archive_name if self.part != 'live' else self.session_id}"


def parse_session_file_marker(value: str | None) -> HostSession | None:
    """The session a ``sqlite:<agentId>:<sessionId>:<storePath>`` marker names; None for anything else."""
    if not value or not value.strip().startswith(_MARKER):
        return None
    agent_id, _, rest = value.strip()[len(_MARKER) :].partition(":")
    session_id, _, store_path = rest.partition(":")  # the path comes last: it may hold colons itself
    if not (agent_id and session_id and store_path):
        return None
    return HostSession(Path(store_path), session_id, agent_id)


@dataclass(frozen=True)
class HostListing:
    """One session an agent store holds, with what the store says about it."""

    session: HostSession
    size: int
    """The UTF-8 bytes of its events (what reading it streams)."""
    session_key: str | None = None
    previous_session_id: str | None = None
    """The session this one continues (``session_windows.previous_session_id``: a reset, a rollover)."""
    entry: dict[str, Any] | None = None
    """The key's session entry (``session_nodes.entry_json``) when this is the key's current session."""


def is_agent_store(path: Path) -> bool:
    """Whether `path` is an OpenClaw agent store (an SQLite file with a ``transcript_events`` table)."""
    try:
        with path.open("rb") as handle:
            if handle.read(16) != b"SQLite format 3\x00":
                return False
        open_agent_store(path).close()
    except (OSError, HostStoreError):
        return False
    return True


def _table_rows(con: sqlite3.Connection, query: str) -> list[Any]:
    try:
        return con.execute(query).fetchall()
    except sqlite3.OperationalError:  # a store from before that table (or column) existed
        return []


_LISTING = """
    SELECT session_id, sum(coalesce(length(CAST(event_json AS BLOB)), event_utf8_bytes, 0))
    FROM transcript_events GROUP BY session_id ORDER BY min(created_at), min(rowid)
"""


_DELETED_LISTING = """
    SELECT session_id, archive_name, session_key, length(archive_blob) FROM session_transcript_archives
    ORDER BY created_at, archive_name
"""


def list_host_sessions(path: Path) -> list[HostListing]:
    """Every session the agent store at `path` holds, keyed as the store keys it: the live ones (oldest
    first), then the archives of deleted sessions, then the sessions moved to cold storage.

    A session's key is its ``session_windows`` row's, else the ``session_nodes`` key it is current for.

    Raises:
        HostStoreError: the file is missing, not SQLite or not an agent store.
    """
    con = open_agent_store(path)
    try:
        con.execute("BEGIN")
        sizes = con.execute(_LISTING).fetchall()
        windows = {
            str(sid): (key, previous)
            for sid, key, previous in _table_rows(
                con, "SELECT session_id, session_key, previous_session_id FROM session_windows"
            )
        }
        nodes = _table_rows(con, "SELECT session_key, current_session_id, entry_json FROM session_nodes")
        deleted = _table_rows(con, _DELETED_LISTING)
        cold = _table_rows(con, "SELECT session_id, archive_name, raw_bytes FROM session_transcript_cold_archives")
    except sqlite3.DatabaseError as exc:
        raise HostStoreError(f"{path}: cannot be read ({exc})") from exc
    finally:
        con.close()
    current: dict[str, tuple[str, dict[str, Any] | None]] = {}
    for key, sid, entry_json in nodes:
        try:
            entry = json.loads(entry_json)
        except (TypeError, ValueError):
            entry = None
        current.setdefault(str(sid), (str(key), entry if isinstance(entry, dict) else None))
    agent = path.parent.parent.name if path.parent.name == "agent" else None
    listings = []
    for sid, size in sizes:
        key, previous = windows.get(str(sid), (None, None))
        node_key, entry = current.get(str(sid), (None, None))
        listings.append(
            HostListing(
                HostSession(path, str(sid), agent),
                int(size or 0),
                session_key=key or node_key,
                previous_session_id=previous,
                entry=entry if (node_key is not None and node_key == (key or node_key)) else None,
            )
        )
    for sid, name, key, size in deleted:
        where = HostSession(path, str(sid), agent, "deleted", str(name))
        listings.append(HostListing(where, int(size or 0), session_key=key))
    for sid, name, size in cold:
        key, previous = windows.get(str(sid), (None, None))
        node_key, entry = current.get(str(sid), (None, None))
        where = HostSession(path, str(sid), agent, "cold", str(name))
        listings.append(HostListing(where, int(size or 0), key or node_key, previous, entry))
    return listings


def host_session_of(target: SessionTarget | None, session_file: str | None, session_id: str) -> HostSession | None:
    """Where a hook's session lives in the host's agent store, when the call says (marker first, then target)."""
    marker = parse_session_file_marker(session_file)
    if marker is not None:
        return marker
    if target is None or not target.store_path:
        return None
    return HostSession(agent_database_path(Path(target.store_path)), target.session_id or session_id, target.agent_id)


def agent_database_path(store_path: Path) -> Path:
    """The agent database a host session store path stands for (OpenClaw's own mapping, 2026.9).

    ``…/agents/<id>/sessions/sessions.json`` → ``…/agents/<id>/agent/openclaw-agent.sqlite``; any other
    ``sessions.json`` → ``openclaw-agent.sqlite`` beside it; ``<dir>/<name>.<ext>`` → ``<dir>/<name>.sqlite``.
    """
    if store_path.suffix == ".sqlite":
        return store_path
    if store_path.name != "sessions.json":
        return store_path.with_suffix(".sqlite")
    sessions = store_path.parent
    if sessions.name == "sessions" and sessions.parent.parent.name == "agents":
        return sessions.parent / "agent" / "openclaw-agent.sqlite"
    return sessions / "openclaw-agent.sqlite"


def _decompressor() -> Any:
    try:
        import zstandard
    except ImportError as exc:  # a dependency; missing only in a broken environment
        raise MissingDependencyError(
            "the host stores this transcript zstd-compressed and the zstandard package is not installed "
            "(pip install zstandard)"
        ) from exc
    return zstandard.ZstdDecompressor()


def _event_lines(con: sqlite3.Connection, where: HostSession, limit: int = -1) -> Iterator[bytes]:
    decompressor: Any = None
    for seq, text, packed, size in con.execute(_EVENTS, (where.session_id, limit)):
        if text is not None:
            yield text.encode("utf-8", "surrogatepass")
            continue
        if not isinstance(packed, bytes) or not isinstance(size, int) or size < 1:
            raise HostStoreError(f"{where.name}: event {seq} has neither event_json nor a usable event_zstd")
        decompressor = decompressor or _decompressor()
        try:
            data: bytes = decompressor.decompress(packed, max_output_size=size)
        except Exception as exc:  # zstandard.ZstdError: the frame is damaged
            raise HostStoreError(f"{where.name}: event {seq} does not decompress ({exc})") from exc
        if len(data) != size:
            raise HostStoreError(f"{where.name}: event {seq} decompresses to {len(data)} bytes, not {size}")
        yield data


def _archive_lines(con: sqlite3.Connection, where: HostSession) -> Iterator[bytes]:
    """A deleted session's archive: the whole JSONL, as stored (``identity``) or one zstd stream."""
    row = con.execute(
        "SELECT encoding, archive_blob FROM session_transcript_archives WHERE archive_name = ?", (where.archive_name,)
    ).fetchone()
    if row is None:
        return
    encoding, blob = row
    if encoding == "zstd":
        _decompressor()  # says which package is missing, if it is
        yield from zstd_lines(io.BytesIO(blob))
    else:
        yield from io.BytesIO(blob)


def _cold_bytes(con: sqlite3.Connection, where: HostSession) -> bytes | None:
    row = con.execute(
        "SELECT storage, archive_blob, archive_name FROM session_transcript_cold_archives WHERE session_id = ?",
        (where.session_id,),
    ).fetchone()
    if row is None:
        return None
    storage, blob, name = row
    if storage == "sqlite":
        if not isinstance(blob, bytes):
            raise HostStoreError(f"{where.name}: its cold-storage row has no archive_blob")
        return blob
    # OpenClaw keeps the file in the agent's session directory: agents/<id>/sessions/cold/<name>.
    agent_dir = where.store_path.parent.parent if where.store_path.parent.name == "agent" else where.store_path.parent
    file = agent_dir / "sessions" / "cold" / str(name)
    try:
        return file.read_bytes()
    except OSError as exc:
        raise HostStoreError(f"{where.name}: its cold-storage file {file} cannot be read ({exc})") from exc


def _cold_lines(con: sqlite3.Connection, where: HostSession) -> Iterator[bytes]:
    """A cold session's events, in order, from its archive of wrapper records (``kind: "event"``)."""
    packed = _cold_bytes(con, where)
    if packed is None:
        return
    _decompressor()
    events: list[tuple[int, str]] = []
    for line in zstd_lines(io.BytesIO(packed)):
        try:
            record = json.loads(line)
        except ValueError as exc:
            raise HostStoreError(f"{where.name}: a cold-storage record is not JSON ({exc})") from exc
        row = record.get("row") if isinstance(record, dict) and record.get("kind") == "event" else None
        if isinstance(row, dict) and isinstance(row.get("seq"), int) and isinstance(row.get("event_json"), str):
            events.append((row["seq"], row["event_json"]))
    for _, text in sorted(events):
        yield text.encode("utf-8", "surrogatepass")


def _lines(con: sqlite3.Connection, where: HostSession, limit: int = -1) -> Iterator[bytes]:
    if where.part == "live":
        return _event_lines(con, where, limit)
    lines = _archive_lines(con, where) if where.part == "deleted" else _cold_lines(con, where)
    return itertools.islice(lines, limit if limit >= 0 else None)


def open_agent_store(path: Path) -> sqlite3.Connection:
    """A read-only connection to the agent store at `path` (raises HostStoreError if it is not one)."""
    if not path.is_file():
        raise HostStoreError(f"{path}: the host's agent store does not exist")
    try:
        con = sqlite3.connect(read_only_url(path), uri=True)
        tables = {name for (name,) in con.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    except sqlite3.DatabaseError as exc:
        raise HostStoreError(f"{path}: not readable as OpenClaw's agent store ({exc})") from exc
    if "transcript_events" not in tables:
        con.close()
        raise HostStoreError(f"{path}: not OpenClaw's agent store (no transcript_events table)")
    return con


def read_host_header(where: HostSession) -> SessionHeader | TranscriptLineError | None:
    """The session's first event as :func:`iter_entries` reads it (its header, when it has one)."""
    con = open_agent_store(where.store_path)
    try:
        first = next(iter_entries(where.name, lines=list(_lines(con, where, limit=1))), None)
    except sqlite3.DatabaseError as exc:
        raise HostStoreError(f"{where.name}: cannot be read ({exc})") from exc
    finally:
        con.close()
    return first if isinstance(first, SessionHeader | TranscriptLineError) else None


def read_host_transcript(where: HostSession, on_bytes: Callable[[int], None] | None = None) -> Transcript:
    """The session's transcript as :func:`read_transcript` reads a file: header, entries, bad lines.

    A session the store does not hold reads as an empty transcript (no header, no entries).

    Raises:
        HostStoreError: the file is missing, not SQLite, not an agent store, or an event cannot be decoded.
        MissingDependencyError: an event is compressed and `zstandard` is not installed.
    """
    con = open_agent_store(where.store_path)
    try:
        con.execute("BEGIN")  # one snapshot for the whole read while the gateway appends
        return read_transcript(where.name, lines=_lines(con, where), on_bytes=on_bytes)
    except sqlite3.DatabaseError as exc:
        raise HostStoreError(f"{where.name}: cannot be read ({exc})") from exc
    finally:
        con.close()
