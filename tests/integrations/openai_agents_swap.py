"""A pytest plugin that runs the OpenAI Agents SDK's own session tests against OpenClawSession.

Loaded with ``-p openai_agents_swap`` (this directory on PYTHONPATH) in a run of the SDK's test files
from its sdist: before they are collected, ``SQLiteSession`` (by every name they import it under)
becomes a subclass of OpenClawSession taking SQLiteSession's arguments, so the tests run unchanged.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import agents
import agents.memory
import agents.memory.sqlite_session

from openclaw_ctx.integrations.openai_agents import OpenClawSession


class SQLiteSession(OpenClawSession):
    """OpenClawSession under SQLiteSession's name and signature (its table names have no meaning here)."""

    def __init__(
        self,
        session_id: str,
        db_path: str | Path = ":memory:",
        sessions_table: str = "agent_sessions",
        messages_table: str = "agent_messages",
        session_settings: Any = None,
    ) -> None:
        del sessions_table, messages_table
        super().__init__(session_id, db_path, session_settings=session_settings)


for module in (agents, agents.memory, agents.memory.sqlite_session):
    module.SQLiteSession = SQLiteSession  # type: ignore[attr-defined,misc]
