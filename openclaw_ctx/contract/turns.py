"""OpenClaw 2026.9's durable-turn contract: session targets, transcript anchors and ``commitTurn``.

The host commits a whole turn (user, assistant, tool calls and results) at once, and may retry or
duplicate it: ``commitTurn`` is atomic and idempotent on ``advancementKey``. An engine declares that it
honours this through :class:`TranscriptSemantics` in its info; a host of 2026.9 runs an engine that
does not as legacy on every turn.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field

from openclaw_ctx.contract.params import MessageList
from openclaw_ctx.contract.targets import AdmissionAnchor, SessionTarget, TranscriptAnchor
from openclaw_ctx.contract.wire import WireParams, WireResult

__all__ = ["CommitTurnParams", "CommitTurnResult"]


class CommitTurnParams(WireParams):
    """A whole turn, committed at once; retried or duplicated turns carry the same advancement key."""

    advancement_key: str = Field(min_length=1, max_length=512)
    admission: AdmissionAnchor | None = None
    terminal: TranscriptAnchor | None = None
    messages: MessageList
    session_id: str
    session_key: str | None = None
    session_target: SessionTarget | None = None
    runtime_settings: Any = None
    runtime_context: dict[str, Any] | None = None
    is_heartbeat: bool = False
    entry_ids: list[str | None] | None = None
    """Each message's transcript entry id, from this project's own host (OpenClaw's names them in the
    anchors and the messages' ``__openclaw`` side objects instead)."""
    token_budget: int | None = None
    """The prompt budget of the turn, from this project's own host (OpenClaw 2026.9 sends none)."""


class CommitTurnResult(WireResult):
    """``committed``: the turn was written now; ``duplicate``: its advancement key was already stored."""

    status: Literal["committed", "duplicate"]
