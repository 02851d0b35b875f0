"""The entry ids of a committed turn's messages, read from the host's agent store (OpenClaw 2026.9).

The host's ``commitTurn`` names only the turn's first and last transcript entries; the messages
between them are found on the store's active path (``session_transcript_active_events``) by position.
"""

from __future__ import annotations

import asyncio
import sqlite3
from pathlib import Path

from openclaw_ctx.contract.turns import CommitTurnParams
from openclaw_ctx.errors import HostStoreError
from openclaw_ctx.transcripts.agent_store import agent_database_path, open_agent_store

__all__ = ["host_turn_entry_ids", "with_host_entry_ids"]

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
        con = open_agent_store(database)
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
