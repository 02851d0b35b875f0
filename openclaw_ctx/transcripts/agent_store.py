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

Example::

    where = host_session_of(params.session_target, params.session_file, params.session_id)
    transcript = read_host_transcript(where)      # a Transcript, as read_transcript gives for a file
    async with store.transaction() as conn:
        report = await import_host_session(conn, store.counter, transcript, where, "agent:main:main")
"""

from __future__ import annotations

import asyncio
import sqlite3
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sqlalchemy.ext.asyncio import AsyncConnection

from openclaw_ctx.contract.targets import SessionTarget
from openclaw_ctx.contract.turns import CommitTurnParams
from openclaw_ctx.errors import HostStoreError, MissingDependencyError
from openclaw_ctx.tokens import TokenCounter
from openclaw_ctx.transcripts.discover import SourceFile
from openclaw_ctx.transcripts.importer import import_transcript
from openclaw_ctx.transcripts.jsonl import read_transcript
from openclaw_ctx.transcripts.report import FileReport
from openclaw_ctx.transcripts.tree import Transcript

__all__ = [
    "HostSession",
    "agent_database_path",
    "host_turn_entry_ids",
    "with_host_entry_ids",
    "host_session_of",
    "import_host_session",
    "parse_session_file_marker",
    "read_host_transcript",
]

_MARKER = "sqlite:"
_EVENTS = (
    "SELECT seq, event_json, event_zstd, event_utf8_bytes FROM transcript_events WHERE session_id = ? ORDER BY seq"
)


@dataclass(frozen=True)
class HostSession:
    """One session's transcript in a host's agent store."""

    store_path: Path
    session_id: str
    agent_id: str | None = None

    @property
    def name(self) -> str:
        """How reports name it: ``<store path>#<session id>``."""
        return f"{self.store_path}#{self.session_id}"


def parse_session_file_marker(value: str | None) -> HostSession | None:
    """The session a ``sqlite:<agentId>:<sessionId>:<storePath>`` marker names; None for anything else."""
    if not value or not value.strip().startswith(_MARKER):
        return None
    agent_id, _, rest = value.strip()[len(_MARKER) :].partition(":")
    session_id, _, store_path = rest.partition(":")  # the path comes last: it may hold colons itself
    if not (agent_id and session_id and store_path):
        return None
    return HostSession(Path(store_path), session_id, agent_id)


def host_session_of(target: SessionTarget | None, session_file: str | None, session_id: str) -> HostSession | None:
    """Where a hook's session lives in the host's agent store, when the call says (marker first, then target)."""
    marker = parse_session_file_marker(session_file)
    if marker is not None:
        return marker
    if target is None or not target.store_path:
        return None
    return HostSession(agent_database_path(Path(target.store_path)), target.session_id or session_id, target.agent_id)


# The active path's message entries of one session between two message positions, in order.
_TURN_ENTRIES = """
    SELECT i.event_id FROM session_transcript_active_events a
    JOIN transcript_event_identities i ON i.session_id = a.session_id AND i.seq = a.event_seq
    WHERE a.session_id = ? AND a.message_position BETWEEN ? AND ? ORDER BY a.message_position
"""


def host_turn_entry_ids(params: CommitTurnParams) -> list[str] | None:
    """Every message's transcript entry id of a committed turn, read from the host's agent store.

    The host names only the first and the last entry (the admission and terminal anchors); the tool
    calls and results between them are found on the store's active path by message position. None
    unless the store answers with exactly one entry per message, starting and ending at the anchors.
    """
    first, last = params.admission, params.terminal
    if first is None or last is None or first.active_message_position is None:
        return None
    if last.active_message_position is None or not (first.entry_id and last.entry_id and first.store_path):
        return None
    session_id = first.session_id or params.session_id
    database = agent_database_path(Path(first.store_path))
    try:
        con = _open(database)
    except HostStoreError:
        return None
    try:
        rows = con.execute(_TURN_ENTRIES, (session_id, first.active_message_position, last.active_message_position))
        ids = [str(event_id) for (event_id,) in rows]
    except sqlite3.Error:  # an older store without the active-path tables
        return None
    finally:
        con.close()
    if len(ids) != len(params.messages) or ids[0] != first.entry_id or ids[-1] != last.entry_id:
        return None
    return ids


async def with_host_entry_ids(params: CommitTurnParams) -> CommitTurnParams:
    """`params` with every message's entry id from the host's store, when the call names none and the
    store has them (read on a worker thread); else `params` unchanged."""
    if params.entry_ids is not None:
        return params
    ids = await asyncio.to_thread(host_turn_entry_ids, params)
    return params if ids is None else params.model_copy(update={"entry_ids": list(ids)})


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


def _event_lines(con: sqlite3.Connection, where: HostSession) -> Iterator[bytes]:
    decompressor: Any = None
    for seq, text, packed, size in con.execute(_EVENTS, (where.session_id,)):
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


def _open(path: Path) -> sqlite3.Connection:
    if not path.is_file():
        raise HostStoreError(f"{path}: the host's agent store does not exist")
    try:
        con = sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True)
        tables = {name for (name,) in con.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    except sqlite3.DatabaseError as exc:
        raise HostStoreError(f"{path}: not readable as OpenClaw's agent store ({exc})") from exc
    if "transcript_events" not in tables:
        con.close()
        raise HostStoreError(f"{path}: not OpenClaw's agent store (no transcript_events table)")
    return con


def read_host_transcript(where: HostSession) -> Transcript:
    """The session's transcript as :func:`read_transcript` reads a file: header, entries, bad lines.

    A session the store does not hold reads as an empty transcript (no header, no entries).

    Raises:
        HostStoreError: the file is missing, not SQLite, not an agent store, or an event cannot be decoded.
        MissingDependencyError: an event is compressed and `zstandard` is not installed.
    """
    con = _open(where.store_path)
    try:
        con.execute("BEGIN")  # one snapshot for the whole read while the gateway appends
        return read_transcript(where.name, lines=_event_lines(con, where))
    except sqlite3.DatabaseError as exc:
        raise HostStoreError(f"{where.name}: cannot be read ({exc})") from exc
    finally:
        con.close()


async def import_host_session(
    conn: AsyncConnection, counter: TokenCounter, transcript: Transcript, where: HostSession, session_key: str
) -> FileReport:
    """Write a session read from the host's agent store under `session_key`, in the caller's transaction.

    The mapping is the JSONL import's (:mod:`openclaw_ctx.transcripts.importer`): every message with its
    entry id, the host's compactions as legacy summaries, the context as OpenClaw rebuilds it. Importing
    the same session again adds only what is new. A transcript without a header writes nothing
    (``report.error`` says why), as does a session id stored under another key.
    """
    report = FileReport(path=where.name)
    if transcript.header is None:
        report.error = transcript.errors[0].reason if transcript.errors else "the host holds no such session"
        return report
    source = SourceFile(path=where.store_path, session_key=session_key, header=transcript.header)
    await import_transcript(conn, counter, transcript, source, report)
    return report
