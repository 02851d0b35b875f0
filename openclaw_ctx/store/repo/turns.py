"""Committed turns (OpenClaw 2026.9's ``commitTurn``): a whole turn's messages and its advancement key, at once.

:func:`commit_turn` runs inside the caller's transaction: the advancement key is looked up first, so
a retried or duplicated commit writes nothing; otherwise the messages are appended (idempotent on
entry ids and provider event keys, like every append) and the key recorded beside them. Either all
of it is stored or, if the transaction fails, none of it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from sqlalchemy import insert, select
from sqlalchemy.ext.asyncio import AsyncConnection

from openclaw_ctx.contract.targets import TranscriptAnchor
from openclaw_ctx.contract.turns import CommitTurnParams
from openclaw_ctx.errors import NotFoundError
from openclaw_ctx.messages import AgentMessage, provider_event_key
from openclaw_ctx.store.models import TurnAdvancement
from openclaw_ctx.store.repo.messages import AppendResult, NewMessage, append_messages
from openclaw_ctx.store.repo.sessions import SessionRow, ensure_session, get_session
from openclaw_ctx.tokens import TokenCounter

__all__ = ["TurnCommit", "commit_host_turn", "commit_turn", "committed_turn_session", "turn_key", "turn_messages"]


@dataclass(frozen=True)
class TurnCommit:
    """What a commit did: ``duplicate`` wrote nothing; ``inserted`` counts the messages new to the store."""

    status: Literal["committed", "duplicate"]
    session_id: str
    inserted: int
    results: tuple[AppendResult, ...] = ()


async def committed_turn_session(conn: AsyncConnection, session_key: str, advancement_key: str) -> str | None:
    """The session a commit of `advancement_key` on `session_key` went to, or None when it was never committed."""
    row = await conn.execute(
        select(TurnAdvancement.session_id).where(
            TurnAdvancement.session_key == session_key, TurnAdvancement.advancement_key == advancement_key
        )
    )
    return row.scalar_one_or_none()


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
    stored = await committed_turn_session(conn, key, advancement_key)
    if stored is not None:
        return TurnCommit("duplicate", stored, 0)
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
