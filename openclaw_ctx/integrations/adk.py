"""A Google ADK ``SessionService`` over the openclaw-ctx store: events you can search, compact and query in SQL.

Swap one line::

    from openclaw_ctx.integrations.adk import OpenClawSessionService

    runner = Runner(agent=agent, app_name="support", session_service=OpenClawSessionService("agent.db"))

Each ADK session is a session key of the store, ``adk:<app>:<user>:<session>`` (each part
percent-encoded), and each event one message of it (see :mod:`~openclaw_ctx.integrations.adk_events`),
so ``openclaw-ctx grep --key``, ``recall``, ``sql``, ``stats`` and ``export`` see them and the engine
compacts the key. State follows ADK's scopes: ``app:`` keys are shared by every user of the app,
``user:`` keys by every session of the user, ``temp:`` keys live only in the in-memory session of one
invocation; each scope is a JSON value in the store's ``engine_state`` (owner ``google-adk``),
written in the same transaction as the event that changed it. An event appended to a session that
changed in the store since it was read raises ``StaleSessionError`` and stores nothing.

``delete_session`` archives: the key's session is archived and its events stay in the store (and in
recall); the ADK session is gone for ``get_session`` and ``list_sessions``, and its id can be created
again.
"""

from __future__ import annotations

import copy
import time
import uuid
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import quote

from openclaw_ctx.config import OpenClawConfig
from openclaw_ctx.errors import MissingDependencyError
from openclaw_ctx.integrations._backend import MEMORY, Backend
from openclaw_ctx.store import repo
from openclaw_ctx.summarize.base import Summarizer

try:
    from google.adk.errors import StaleSessionError
    from google.adk.errors.already_exists_error import AlreadyExistsError
    from google.adk.errors.session_not_found_error import SessionNotFoundError
    from google.adk.events.event import Event
    from google.adk.sessions.base_session_service import BaseSessionService, GetSessionConfig, ListSessionsResponse
    from google.adk.sessions.session import Session
    from google.adk.sessions.state import State
    from pydantic_core import to_jsonable_python
except ImportError as exc:  # pragma: no cover - exercised only without the extra
    raise MissingDependencyError(
        "openclaw_ctx.integrations.adk needs Google ADK: pip install 'openclaw-ctx[adk]'"
    ) from exc

from openclaw_ctx.integrations.adk_events import event_of, message_of

if TYPE_CHECKING:
    from sqlalchemy.ext.asyncio import AsyncConnection

    from openclaw_ctx.host import Runtime

__all__ = ["OpenClawSessionService", "session_key"]

OWNER = "google-adk"
"""The ``engine_state.engine_id`` the service's state rows are kept under."""
SESSION, STATE = "session", "state"


def session_key(app_name: str, user_id: str, session_id: str) -> str:
    """The store's session key of an ADK session."""
    return "adk:" + ":".join(quote(part, safe="") for part in (app_name, user_id, session_id))


def _app_key(app_name: str) -> str:
    return "adk-app:" + quote(app_name, safe="")


def _user_key(app_name: str, user_id: str) -> str:
    return "adk-user:" + quote(app_name, safe="") + ":" + quote(user_id, safe="")


class OpenClawSessionService(BaseSessionService):
    """ADK's ``BaseSessionService`` on one openclaw-ctx database.

    Args:
        db_path: the SQLite file (created and upgraded as needed); ``":memory:"`` is a private
            temporary database that lasts until :meth:`close`.
        engine: ``"lossless-claw"`` (the default) or ``"legacy"``: the engine that compacts each key.
        context_window: the window the engine keeps each key's context under.
        config: an ``openclaw.json`` configuration; summarizer: what compactions summarise with.
    """

    def __init__(
        self,
        db_path: str | Path = MEMORY,
        *,
        engine: str = "lossless-claw",
        context_window: int = 128_000,
        config: OpenClawConfig | None = None,
        summarizer: Summarizer | None = None,
    ) -> None:
        self.db_path = db_path
        self._backend: Backend | None = Backend.acquire(
            db_path, engine=engine, context_window=context_window, config=config, summarizer=summarizer
        )

    # --- sessions --------------------------------------------------------------------------------

    async def create_session(
        self,
        *,
        app_name: str,
        user_id: str,
        state: dict[str, Any] | None = None,
        session_id: str | None = None,
    ) -> Session:
        """A new session (its id generated unless given, surrounding whitespace stripped); ``AlreadyExistsError``
        for an id in use."""
        sid = (session_id or "").strip() or str(uuid.uuid4())
        key = session_key(app_name, user_id, sid)
        scopes = _split(state or {})
        now = time.time()

        async def create(runtime: Runtime) -> dict[str, Any]:
            async with runtime.store.transaction() as conn:
                meta = await repo.get_engine_state(conn, OWNER, key, SESSION)
                if meta is not None and not meta.get("deleted"):
                    raise AlreadyExistsError(f"Session with id {sid} already exists.")
                await _merge(conn, _app_key(app_name), scopes["app"])
                await _merge(conn, _user_key(app_name, user_id), scopes["user"])
                await repo.ensure_session(conn, key, engine_id=runtime.engine.info.id)
                meta = {"app": app_name, "user": user_id, "id": sid, "state": scopes["session"], "createTime": now,
                        "updateTime": now}  # fmt: skip
                await repo.set_engine_state(conn, OWNER, key, SESSION, meta)
                return await _merged(conn, meta)

        merged = await self._open().call(create, mutation=True)
        return Session(app_name=app_name, user_id=user_id, id=sid, state=merged, events=[], last_update_time=now)

    async def get_session(
        self,
        *,
        app_name: str,
        user_id: str,
        session_id: str,
        config: GetSessionConfig | None = None,
    ) -> Session | None:
        """The session with its merged state and events (the newest ``num_recent_events``, those at or
        after ``after_timestamp``), or None. Ids are stripped, as :meth:`create_session` stores them."""
        key = session_key(app_name, user_id, session_id.strip())
        recent = config.num_recent_events if config else None
        after = config.after_timestamp if config else None

        async def get(runtime: Runtime) -> tuple[dict[str, Any], dict[str, Any], list[Event]] | None:
            async with runtime.store.read() as conn:
                meta = await repo.get_engine_state(conn, OWNER, key, SESSION)
                if meta is None or meta.get("deleted"):
                    return None
                # Without a time filter the newest `recent` rows are all that is read and parsed.
                limit = recent if not after else None
                rows = [] if recent == 0 else await repo.conversation_messages(conn, key, limit=limit)
                return meta, await _merged(conn, meta), [e for _, raw in rows if (e := event_of(raw)) is not None]

        found = await self._open().call(get)
        if found is None:
            return None
        meta, merged, events = found
        if after:
            events = [e for e in events if e.timestamp >= after]
        if recent is not None:
            events = events[-recent:] if recent else []
        return Session(
            app_name=app_name, user_id=user_id, id=meta["id"], state=merged, events=events,
            last_update_time=meta["updateTime"],
        )  # fmt: skip

    async def list_sessions(self, *, app_name: str, user_id: str | None = None) -> ListSessionsResponse:
        """The app's (or one user's) sessions with merged state and no events, least recently updated first."""
        prefix = (
            "adk:" + quote(app_name, safe="") + ":" + (quote(user_id, safe="") + ":" if user_id is not None else "")
        )

        async def listed(runtime: Runtime) -> list[tuple[dict[str, Any], dict[str, Any]]]:
            async with runtime.store.read() as conn:
                metas = [m for _, m in await repo.engine_states(conn, OWNER, SESSION, prefix) if not m.get("deleted")]
                return [(m, await _merged(conn, m)) for m in metas]

        rows = await self._open().call(listed)
        rows.sort(key=lambda r: (r[0]["updateTime"], r[0]["user"], r[0]["id"]))
        return ListSessionsResponse(
            sessions=[
                Session(
                    app_name=app_name,
                    user_id=m["user"],
                    id=m["id"],
                    state=s,
                    events=[],
                    last_update_time=m["updateTime"],
                )  # fmt: skip
                for m, s in rows
            ]
        )

    async def delete_session(self, *, app_name: str, user_id: str, session_id: str) -> None:
        """Archive the session (its events stay in the store and in recall); unknown ids are ignored."""
        key = session_key(app_name, user_id, session_id.strip())

        async def delete(runtime: Runtime) -> None:
            async with runtime.store.read() as conn:
                meta = await repo.get_engine_state(conn, OWNER, key, SESSION)
            if meta is None or meta.get("deleted"):
                return
            await runtime.new_session(key, reason="deleted")
            async with runtime.store.transaction() as conn:
                await repo.set_engine_state(conn, OWNER, key, SESSION, {**meta, "deleted": True})

        await self._open().call(delete, mutation=True)

    async def get_user_state(self, *, app_name: str, user_id: str) -> dict[str, Any]:
        """The user's ``user:`` state, keys without the prefix ({} when none is stored)."""

        async def get(runtime: Runtime) -> dict[str, Any]:
            async with runtime.store.read() as conn:
                return dict(await repo.get_engine_state(conn, OWNER, _user_key(app_name, user_id), STATE) or {})

        return await self._open().call(get)

    # --- events ------------------------------------------------------------------------------------

    async def append_event(self, session: Session, event: Event) -> Event:
        """Store `event` (and the state it changes) as one turn of the session's key.

        Partial (streaming) events are not stored; ``temp:`` state reaches the in-memory session only.

        Raises:
            SessionNotFoundError: the session does not exist (or was deleted).
            StaleSessionError: the stored session changed after `session` was read; nothing is stored.
        """
        if event.partial:
            return event
        self._apply_temp_state(session, event)
        event = self._trim_temp_delta_state(event)
        key = session_key(session.app_name, session.user_id, session.id)
        scopes = _split(event.actions.state_delta if event.actions else {})
        seen = session.last_update_time
        message = message_of(event)

        async def writes(conn: AsyncConnection) -> None:
            meta = await repo.get_engine_state(conn, OWNER, key, SESSION)
            if meta is None or meta.get("deleted"):
                raise SessionNotFoundError(f"Session {session.id} not found.")
            if meta["updateTime"] > seen:
                raise StaleSessionError(
                    "The last_update_time provided in the session object is earlier than the update_time in "
                    "storage. Please check if it is a stale session."
                )
            await _merge(conn, _app_key(session.app_name), scopes["app"])
            await _merge(conn, _user_key(session.app_name, session.user_id), scopes["user"])
            meta["state"] = {**meta["state"], **scopes["session"]}
            meta["updateTime"] = event.timestamp
            await repo.set_engine_state(conn, OWNER, key, SESSION, meta)

        async def append(runtime: Runtime) -> None:
            async with runtime.store.read() as conn:
                if await repo.get_engine_state(conn, OWNER, key, SESSION) is None:
                    raise SessionNotFoundError(f"Session {session.id} not found.")
            await runtime.record_turn(key, [message], entry_ids=lambda _m: event.id, writes=writes)

        await self._open().call(append, mutation=True)
        session.last_update_time = event.timestamp
        return self._commit_event_to_session(session, event)

    # --- lifetime -----------------------------------------------------------------------------------

    async def close(self) -> None:
        """Release the store (the last user of the database closes it); later calls raise RuntimeError."""
        backend, self._backend = self._backend, None
        if backend is not None:
            backend.release()

    def _open(self) -> Backend:
        if self._backend is None:
            raise RuntimeError("OpenClawSessionService is closed")
        return self._backend


def _split(state: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """A state delta by scope, prefixes removed from app/user keys, temp keys dropped, values made JSON."""
    scopes: dict[str, dict[str, Any]] = {"app": {}, "user": {}, "session": {}}
    for key, value in to_jsonable_python(state, fallback=repr).items():
        if key.startswith(State.APP_PREFIX):
            scopes["app"][key.removeprefix(State.APP_PREFIX)] = value
        elif key.startswith(State.USER_PREFIX):
            scopes["user"][key.removeprefix(State.USER_PREFIX)] = value
        elif not key.startswith(State.TEMP_PREFIX):
            scopes["session"][key] = value
    return scopes


async def _merge(conn: AsyncConnection, key: str, delta: dict[str, Any]) -> None:
    if delta:
        current = await repo.get_engine_state(conn, OWNER, key, STATE) or {}
        await repo.set_engine_state(conn, OWNER, key, STATE, {**current, **delta})


async def _merged(conn: AsyncConnection, meta: dict[str, Any]) -> dict[str, Any]:
    """A session's state as ADK shows it: its own keys, then ``app:`` and ``user:`` keys with their prefixes."""
    merged: dict[str, Any] = copy.deepcopy(meta["state"])
    for key, value in (await repo.get_engine_state(conn, OWNER, _app_key(meta["app"]), STATE) or {}).items():
        merged[State.APP_PREFIX + key] = value
    user = await repo.get_engine_state(conn, OWNER, _user_key(meta["app"], meta["user"]), STATE) or {}
    for key, value in user.items():
        merged[State.USER_PREFIX + key] = value
    return merged
