"""Where a call points: the host's session target, transcript anchors, and the transcript semantics an engine declares.

OpenClaw 2026.9 names sessions by a target (``sessionFile`` now carries the session key; transcripts
live in the host's SQLite) and positions in its transcript by anchors. Keys the host adds beyond the
ones declared here travel along unchanged.
"""

from __future__ import annotations

from typing import Literal

from openclaw_ctx.contract.wire import WireResult

__all__ = ["DURABLE_TURNS", "AdmissionAnchor", "SessionTarget", "TranscriptAnchor", "TranscriptSemantics"]


class SessionTarget(WireResult):
    """Which session a call is about, as the host names it; keys beyond these travel along unchanged."""

    agent_id: str | None = None
    session_id: str | None = None
    session_key: str | None = None
    store_path: str | None = None
    thread_id: str | None = None


class TranscriptSemantics(WireResult):
    """What an engine promises about the host's transcript; both are needed for durable turns."""

    current_turn_fence: Literal["before-current-turn-entry-v1"] | None = None
    """assemble's ``messages`` end before the current turn's user entry."""
    turn_advancement_idempotency: Literal["atomic-idempotent-v1"] | None = None
    """commitTurn writes a turn all at once, and a repeated ``advancementKey`` writes nothing."""


DURABLE_TURNS = TranscriptSemantics(
    current_turn_fence="before-current-turn-entry-v1", turn_advancement_idempotency="atomic-idempotent-v1"
)
"""The semantics an engine declares to take part in OpenClaw 2026.9's durable turns."""


class TranscriptAnchor(WireResult):
    """A position in the host's transcript: the entry a turn starts or ends at."""

    agent_id: str | None = None
    session_id: str | None = None
    session_key: str | None = None
    store_path: str | None = None
    generation: str | int | None = None
    """The transcript generation (OpenClaw 2026.9 sends an opaque hex string)."""
    entry_id: str | None = None
    raw_seq: int | None = None
    effective_parent_id: str | None = None
    active_message_position: int | None = None
    idempotency_key: str | None = None


class AdmissionAnchor(TranscriptAnchor):
    """Where a turn entered the transcript: its user entry."""

    logical_turn_id: str | None = None
    role: Literal["user"] | None = None
