"""An OpenAI Agents SDK ``Session`` over the openclaw-ctx store: durable, compacting, searchable history.

Swap one line::

    from openclaw_ctx.integrations.openai_agents import OpenClawSession

    session = OpenClawSession("user-42", "agent.db")          # was: SQLiteSession("user-42", "agent.db")
    result = await Runner.run(agent, "Hello", session=session)

Each item is stored as a message of the session key (the session id, unless ``key=`` names
another), so ``openclaw-ctx grep``, ``recall``, ``sql``, ``stats`` and ``export`` see it, and the
engine compacts the key as it does OpenClaw's. Two views:

* ``assembled=False`` (the default): ``get_items`` returns the items exactly as they were added
  (what the SDK's own tests expect), newest ``limit`` of them, across the compactions that rotated
  the key's session. The model still sees every item, so this mode grows without bound, like
  ``SQLiteSession``.
* ``assembled=True``: ``get_items`` returns the engine's budgeted view of the next turn: recent items
  verbatim, older history as the engine's summaries (user messages), within ``context_window``.

``clear_session`` archives the key's session and starts an empty one; ``pop_item`` takes the newest
item back. Neither deletes: both stay in the store, in ``sql`` and in recall across the key. Messages
another client wrote on the same key (an OpenClaw gateway, ``import``) are not SDK items: the raw
view leaves them out, the assembled view shows them as user or assistant text.

The constructor opens the database (creating it and upgrading its schema when needed), so a corrupt
or newer-schema file is refused there; it blocks for that open, a few milliseconds on an existing
file, longer for a first upgrade.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

from openclaw_ctx.config import OpenClawConfig
from openclaw_ctx.errors import MissingDependencyError
from openclaw_ctx.integrations._backend import MEMORY, Backend
from openclaw_ctx.integrations.openai_items import ITEM_FIELD, item_of, message_of, view_item
from openclaw_ctx.store import repo
from openclaw_ctx.summarize.base import Summarizer

try:
    from agents.memory.session_settings import SessionSettings, coerce_session_settings, resolve_session_limit
except ImportError as exc:  # pragma: no cover - exercised only without the extra
    raise MissingDependencyError(
        "openclaw_ctx.integrations.openai_agents needs the OpenAI Agents SDK: pip install 'openclaw-ctx[openai-agents]'"
    ) from exc

if TYPE_CHECKING:
    from agents.items import TResponseInputItem

    from openclaw_ctx.host import Runtime

__all__ = ["OpenClawSession"]

DEFAULT_ENGINE = "lossless-claw"
DEFAULT_WINDOW = 128_000


class OpenClawSession:
    """The SDK's ``Session`` protocol (``get_items``, ``add_items``, ``pop_item``, ``clear_session``).

    Args:
        session_id: the SDK's session id; also the store's session key unless `key` is given.
        db_path: the SQLite file (created and upgraded as needed); ``":memory:"`` is a private
            temporary database that lasts until :meth:`close`.
        session_settings: the SDK's settings (``limit``), as ``SQLiteSession`` takes them.
        engine: ``"lossless-claw"`` (the DAG of summaries, the default) or ``"legacy"``.
        assembled: return the engine's budgeted view instead of the raw items (see the module).
        context_window: the model's window in tokens, which the engine keeps the view under.
        key: the session key to store under (e.g. ``"agent:support:user-42"``).
        config: an ``openclaw.json`` configuration (compaction settings, the engine's own settings).
        summarizer: the summarizer compactions use (default: the offline ``extractive-v2``).
    """

    def __init__(
        self,
        session_id: str,
        db_path: str | Path = MEMORY,
        *,
        session_settings: SessionSettings | dict[str, Any] | None = None,
        engine: str = DEFAULT_ENGINE,
        assembled: bool = False,
        context_window: int = DEFAULT_WINDOW,
        key: str | None = None,
        config: OpenClawConfig | None = None,
        summarizer: Summarizer | None = None,
    ) -> None:
        self.session_id = session_id
        self.session_settings: SessionSettings | None = (
            coerce_session_settings(session_settings) if session_settings is not None else SessionSettings()
        )
        self.key = key or session_id
        self.db_path = db_path
        self.assembled = assembled
        self._backend: Backend | None = Backend.acquire(
            db_path, engine=engine, context_window=context_window, config=config, summarizer=summarizer
        )

    # --- the Session protocol -------------------------------------------------------------------

    async def get_items(self, limit: int | None = None) -> list[TResponseInputItem]:
        """The session's items, oldest first; the newest `limit` (or ``session_settings.limit``) when set."""
        wanted = resolve_session_limit(limit, self.session_settings)
        key = self.key
        if self.assembled:
            items = await self._open().call(lambda runtime: _view(runtime, key))
            return items if wanted is None or wanted < 0 else items[-wanted:] if wanted else []
        return await self._open().call(lambda runtime: _raw(runtime, key, wanted))

    async def add_items(self, items: list[TResponseInputItem]) -> None:
        """Store `items` as one turn of the key (then the engine compacts, if the turn made that due)."""
        backend = self._open()
        if not items:
            return
        messages = [message_of(item) for item in items]
        key = self.key
        await backend.call(lambda runtime: runtime.record_turn(key, messages), mutation=True)

    async def pop_item(self) -> TResponseInputItem | None:
        """Take back the newest item and return it (None when the session is empty); it stays in the store."""
        key = self.key

        async def pop(runtime: Runtime) -> dict[str, Any] | None:
            while (message := await runtime.retract_newest(key)) is not None:
                item = item_of(message)
                if item is not None:
                    return item
            return None

        return cast("TResponseInputItem | None", await self._open().call(pop, mutation=True))

    async def clear_session(self) -> None:
        """Start the key afresh: its session is archived (kept, searchable), an empty one takes its place."""
        key = self.key
        await self._open().call(lambda runtime: runtime.new_session(key, reason="clear"), mutation=True)

    # --- lifetime ---------------------------------------------------------------------------------

    def close(self) -> None:
        """Release the store (the last session on the database closes it); later calls raise RuntimeError."""
        backend, self._backend = self._backend, None
        if backend is not None:
            backend.release()

    def _open(self) -> Backend:
        if self._backend is None:
            raise RuntimeError(f"OpenClawSession {self.session_id!r} is closed")
        return self._backend

    def __repr__(self) -> str:
        return f"OpenClawSession({self.session_id!r}, {str(self.db_path)!r}, key={self.key!r})"


async def _raw(runtime: Runtime, key: str, limit: int | None) -> list[Any]:
    async with runtime.store.read() as conn:
        rows = await repo.conversation_messages(conn, key, limit=limit)
    items = []
    for _message_id, message_json in rows:
        item = json.loads(message_json).get(ITEM_FIELD)
        if isinstance(item, dict):
            items.append(item)
    return items


async def _view(runtime: Runtime, key: str) -> list[Any]:
    result, _session = await runtime.assemble(key)
    items: list[Any] = []
    if result.system_prompt_addition:
        items.append({"role": "system", "content": result.system_prompt_addition})
    items.extend(view_item(message) for message in result.messages)
    return items
