"""Committed turns (OpenClaw 2026.9's ``commitTurn``): a whole turn's messages and its advancement key, at once.

:func:`commit_turn` runs inside the caller's transaction: the advancement key is looked up first, so
a retried or duplicated commit writes nothing; otherwise the messages are appended (idempotent on
entry ids and provider event keys, like every append) and the key recorded beside them. Either all
of it is stored or, if the transaction fails, none of it.

A commit that contradicts what is stored raises :class:`TurnConflictError` before it writes anything:
anchors naming another session key or session, an advancement key stored for a turn with other
anchor entries, or an entry id stored as a message of another role. Reading such a call as a
duplicate would drop the turn without a word; the host keeps it queued and says why.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from sqlalchemy import insert, select
from sqlalchemy.ext.asyncio import AsyncConnection

from openclaw_ctx.contract.targets import TranscriptAnchor
from openclaw_ctx.contract.turns import CommitTurnParams
from openclaw_ctx.errors import NotFoundError, TurnConflictError
from openclaw_ctx.messages import AgentMessage, provider_event_key
from openclaw_ctx.store.models import Message, TurnAdvancement
from openclaw_ctx.store.repo.messages import AppendResult, NewMessage, append_messages
from openclaw_ctx.store.repo.sessions import SessionRow, ensure_session, get_session
from openclaw_ctx.tokens import TokenCounter

__all__ = ["TurnCommit", "commit_host_turn", "commit_turn", "turn_key", "turn_messages"]


@dataclass(frozen=True)
class TurnCommit:
    """What a commit did: ``duplicate`` wrote nothing; ``inserted`` counts the messages new to the store."""

    status: Literal["committed", "duplicate"]
    session_id: str
    inserted: int
    results: tuple[AppendResult, ...] = ()


async def commit_turn(
    conn: AsyncConnection,
    session: SessionRow,
    advancement_key: str,
    items: Sequence[NewMessage],
    counter: TokenCounter,
    *,
    admission_json: str | None = None,
    terminal_json: str | None = None,
) -> TurnCommit:
    """Append a turn's messages to `session` and record its advancement key, unless it is stored already."""
    key = session.session_key
    stored = await _stored_turn(conn, key, advancement_key)
    if stored is not None:
        _check_same_turn(advancement_key, stored, admission_json, terminal_json)
        return TurnCommit("duplicate", stored[0], 0)
    await _check_entry_roles(conn, key, advancement_key, items)
    results = tuple(await append_messages(conn, session, items, counter))
    new_ids = [r.message_id for r in results if r.inserted]
    await conn.execute(
        insert(TurnAdvancement).values(
            session_key=key,
            advancement_key=advancement_key,
            session_id=session.session_id,
            message_count=len(items),
            first_message_id=min(new_ids, default=None),
            last_message_id=max(new_ids, default=None),
            admission_json=admission_json,
            terminal_json=terminal_json,
        )
    )
    return TurnCommit("committed", session.session_id, len(new_ids), results)


_StoredTurn = tuple[str, str | None, str | None]  # session id, admission JSON, terminal JSON


async def _stored_turn(conn: AsyncConnection, session_key: str, advancement_key: str) -> _StoredTurn | None:
    found = await conn.execute(
        select(TurnAdvancement.session_id, TurnAdvancement.admission_json, TurnAdvancement.terminal_json).where(
            TurnAdvancement.session_key == session_key, TurnAdvancement.advancement_key == advancement_key
        )
    )
    row = found.one_or_none()
    return None if row is None else (row[0], row[1], row[2])


def _anchor_entry(anchor_json: str | None) -> str | None:
    entry = json.loads(anchor_json).get("entryId") if anchor_json else None
    return entry if isinstance(entry, str) else None


def _check_same_turn(
    advancement_key: str,
    stored: _StoredTurn,
    admission_json: str | None,
    terminal_json: str | None,
) -> None:
    """A repeated advancement key must name the turn it was stored for (where both say which entries)."""
    for name, was, now in (("admission", stored[1], admission_json), ("terminal", stored[2], terminal_json)):
        old, new = _anchor_entry(was), _anchor_entry(now)
        if old is not None and new is not None and old != new:
            raise TurnConflictError(
                f"commitTurn {advancement_key!r}: this advancement key was committed with {name} entry {old!r}, "
                f"this call names {new!r}; nothing was written"
            )


async def _check_entry_roles(
    conn: AsyncConnection, session_key: str, advancement_key: str, items: Sequence[NewMessage]
) -> None:
    """An entry id already stored must be a message of the same role (else it names another message)."""
    roles = {i.entry_id: i.message.role for i in items if i.entry_id}
    if not roles:
        return
    found = await conn.execute(
        select(Message.entry_id, Message.role).where(
            Message.session_key == session_key, Message.entry_id.in_(list(roles))
        )
    )
    for entry_id, role in found:
        if entry_id is not None and role != roles[entry_id]:
            raise TurnConflictError(
                f"commitTurn {advancement_key!r}: entry {entry_id!r} is stored on {session_key!r} with role {role!r}, "
                f"this turn sends it with role {roles[entry_id]!r}; nothing was written"
            )


def _check_anchors(params: CommitTurnParams, session_key: str) -> None:
    """The admission and terminal anchors must point at the session the commit is for."""
    for name, anchor in (("admission", params.admission), ("terminal", params.terminal)):
        if anchor is None:
            continue
        if anchor.session_key and anchor.session_key != session_key:
            raise TurnConflictError(
                f"commitTurn {params.advancement_key!r}: the {name} anchor names session key "
                f"{anchor.session_key!r}, the commit is for {session_key!r}; nothing was written"
            )
        if anchor.session_id and anchor.session_id != params.session_id:
            raise TurnConflictError(
                f"commitTurn {params.advancement_key!r}: the {name} anchor names session "
                f"{anchor.session_id!r}, the commit is for {params.session_id!r}; nothing was written"
            )


def _host_entry_id(message: AgentMessage) -> str | None:
    # The host's side object on a message, when it names the transcript entry.
    side = (message.model_extra or {}).get("__openclaw")
    if isinstance(side, dict):
        for name in ("entryId", "id"):
            if isinstance(side.get(name), str) and side[name]:
                return str(side[name])
    return None


def turn_messages(params: CommitTurnParams) -> list[NewMessage]:
    """The turn's messages as rows to append, each with the transcript entry id the host gave it.

    The host names entries on the messages themselves (``__openclaw``) and, for the first and the
    last, in the admission and terminal anchors; provider event keys cover model replies without one.
    """
    messages = params.messages
    given = params.entry_ids if params.entry_ids is not None and len(params.entry_ids) == len(messages) else None
    ids = list(given) if given is not None else [_host_entry_id(m) for m in messages]
    if messages and ids[0] is None and params.admission is not None and messages[0].role == "user":
        ids[0] = params.admission.entry_id
    if len(messages) > 1 and ids[-1] is None and params.terminal is not None:
        ids[-1] = params.terminal.entry_id
    if len(messages) > 1 and ids[-1] is not None and ids[-1] in ids[:-1]:
        ids[-1] = None  # an anchor repeating another message's id would make that message look stored
    return [
        NewMessage(message=m, entry_id=e, event_key=provider_event_key(m), is_heartbeat=params.is_heartbeat)
        for m, e in zip(messages, ids, strict=True)
    ]


async def turn_key(conn: AsyncConnection, params: CommitTurnParams) -> str:
    """The session key a commit is for: as given, else the target's, else the stored session's, else its id."""
    if params.session_key:
        return params.session_key
    if params.session_target is not None and params.session_target.session_key:
        return params.session_target.session_key
    try:
        return (await get_session(conn, params.session_id)).session_key
    except NotFoundError:
        return params.session_id


async def commit_host_turn(
    conn: AsyncConnection, params: CommitTurnParams, counter: TokenCounter, *, engine_id: str | None
) -> TurnCommit:
    """:func:`commit_turn` of a host's ``commitTurn`` call, on its key's active session (created if none)."""
    key = await turn_key(conn, params)
    _check_anchors(params, key)
    session = await ensure_session(conn, key, session_id=params.session_id, engine_id=engine_id)
    return await commit_turn(
        conn,
        session,
        params.advancement_key,
        turn_messages(params),
        counter,
        admission_json=_anchor_json(params.admission),
        terminal_json=_anchor_json(params.terminal),
    )


def _anchor_json(anchor: TranscriptAnchor | None) -> str | None:
    return None if anchor is None else anchor.model_dump_json(by_alias=True, exclude_none=True)
