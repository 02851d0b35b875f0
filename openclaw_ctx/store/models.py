"""SQLAlchemy 2 typed models: the single source of `target_metadata` for Alembic.

Every table and column is documented for people in ``docs/schema.md``. The schema is created and
changed only by Alembic migrations (``migrations/versions``); tests assert the two agree.
"""

from __future__ import annotations

from sqlalchemy import (
    CheckConstraint,
    ForeignKey,
    Index,
    Integer,
    LargeBinary,
    MetaData,
    String,
    Text,
    text,
)
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column

__all__ = [
    "Base",
    "Compaction",
    "ContextItem",
    "Message",
    "MessageVector",
    "Session",
    "Summary",
    "SummaryMessage",
    "SummaryParent",
    "SummaryVector",
    "EngineState",
    "TranscriptEntry",
    "Turn",
    "TurnAdvancement",
]

NAMING = {
    "ix": "ix_%(column_0_label)s",
    "uq": "uq_%(table_name)s_%(column_0_name)s",
    "ck": "ck_%(table_name)s_%(constraint_name)s",
    "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
    "pk": "pk_%(table_name)s",
}

# Timestamps are ISO-8601 UTC text with millisecond precision, which sorts and reads well in SQL.
NOW = text("(strftime('%Y-%m-%dT%H:%M:%fZ','now'))")


class Base(DeclarativeBase):
    metadata = MetaData(naming_convention=NAMING)


class Session(Base):
    """One transcript. A session key's history is the chain of its sessions."""

    __tablename__ = "sessions"
    __table_args__ = (
        CheckConstraint("status IN ('active','rotated','archived')", name="status"),
        Index(
            "ux_sessions_active_key",
            "session_key",
            unique=True,
            sqlite_where=text("status = 'active'"),
        ),
        Index("ix_sessions_key_created", "session_key", "created_at"),
    )

    session_id: Mapped[str] = mapped_column(String, primary_key=True)
    session_key: Mapped[str] = mapped_column(String, nullable=False)
    session_file: Mapped[str | None] = mapped_column(String)
    parent_session_id: Mapped[str | None] = mapped_column(
        ForeignKey("sessions.session_id", ondelete="RESTRICT"), index=True
    )
    rotation_reason: Mapped[str | None] = mapped_column(String)
    status: Mapped[str] = mapped_column(String, nullable=False, server_default="active")
    engine_id: Mapped[str | None] = mapped_column(String)
    cwd: Mapped[str | None] = mapped_column(String)
    meta_json: Mapped[str | None] = mapped_column(Text)
    created_at: Mapped[str] = mapped_column(String, nullable=False, server_default=NOW)
    updated_at: Mapped[str] = mapped_column(String, nullable=False, server_default=NOW)


class Message(Base):
    """Every AgentMessage ever seen, lossless (`message_json` is the source of truth)."""

    __tablename__ = "messages"
    __table_args__ = (
        Index("ux_messages_key_seq", "session_key", "seq", unique=True),
        Index(
            "ux_messages_key_entry",
            "session_key",
            "entry_id",
            unique=True,
            sqlite_where=text("entry_id IS NOT NULL"),
        ),
        Index(
            "ux_messages_key_event",
            "session_key",
            "event_key",
            unique=True,
            sqlite_where=text("event_key IS NOT NULL"),
        ),
        Index("ix_messages_session_seq", "session_id", "seq"),
        Index("ix_messages_tool_call", "tool_call_id", sqlite_where=text("tool_call_id IS NOT NULL")),
    )

    message_id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    session_id: Mapped[str] = mapped_column(ForeignKey("sessions.session_id", ondelete="RESTRICT"), nullable=False)
    session_key: Mapped[str] = mapped_column(String, nullable=False)
    seq: Mapped[int] = mapped_column(Integer, nullable=False)
    entry_id: Mapped[str | None] = mapped_column(String)
    parent_entry_id: Mapped[str | None] = mapped_column(String)
    event_key: Mapped[str | None] = mapped_column(String)
    role: Mapped[str] = mapped_column(String, nullable=False)
    message_json: Mapped[str] = mapped_column(Text, nullable=False)
    text: Mapped[str] = mapped_column(Text, nullable=False, server_default="")
    token_count: Mapped[int] = mapped_column(Integer, nullable=False)
    tool_call_id: Mapped[str | None] = mapped_column(String)
    tool_name: Mapped[str | None] = mapped_column(String)
    on_active_branch: Mapped[int] = mapped_column(Integer, nullable=False, server_default="1")
    is_heartbeat: Mapped[int] = mapped_column(Integer, nullable=False, server_default="0")
    timestamp_ms: Mapped[int | None] = mapped_column(Integer)
    created_at: Mapped[str] = mapped_column(String, nullable=False, server_default=NOW)


class Summary(Base):
    """A summary node: `legacy` (built-in compaction), `leaf` or `condensed` (lossless DAG)."""

    __tablename__ = "summaries"
    __table_args__ = (
        CheckConstraint("kind IN ('legacy','leaf','condensed')", name="kind"),
        CheckConstraint("depth >= 0", name="depth"),
        Index("ix_summaries_key_created", "session_key", "created_at"),
        Index("ix_summaries_key_depth", "session_key", "depth", "kind"),
    )

    # summaries keeps its implicit rowid: summaries_fts is an external-content index over it.
    summary_id: Mapped[str] = mapped_column(String, primary_key=True)
    session_key: Mapped[str] = mapped_column(String, nullable=False)
    session_id: Mapped[str] = mapped_column(ForeignKey("sessions.session_id", ondelete="RESTRICT"), nullable=False)
    kind: Mapped[str] = mapped_column(String, nullable=False)
    depth: Mapped[int] = mapped_column(Integer, nullable=False, server_default="0")
    content: Mapped[str] = mapped_column(Text, nullable=False)
    token_count: Mapped[int] = mapped_column(Integer, nullable=False)
    earliest_at: Mapped[str | None] = mapped_column(String)
    latest_at: Mapped[str | None] = mapped_column(String)
    descendant_count: Mapped[int] = mapped_column(Integer, nullable=False, server_default="0")
    descendant_token_count: Mapped[int] = mapped_column(Integer, nullable=False, server_default="0")
    source_message_token_count: Mapped[int] = mapped_column(Integer, nullable=False, server_default="0")
    summarizer: Mapped[str] = mapped_column(String, nullable=False)
    model: Mapped[str | None] = mapped_column(String)
    fallback_level: Mapped[str] = mapped_column(String, nullable=False, server_default="none")
    details_json: Mapped[str | None] = mapped_column(Text)
    created_at: Mapped[str] = mapped_column(String, nullable=False, server_default=NOW)


class SummaryMessage(Base):
    """Edge: a summary covers this original message."""

    __tablename__ = "summary_messages"
    __table_args__ = (Index("ix_summary_messages_message", "message_id"),)

    summary_id: Mapped[str] = mapped_column(ForeignKey("summaries.summary_id", ondelete="RESTRICT"), primary_key=True)
    message_id: Mapped[int] = mapped_column(ForeignKey("messages.message_id", ondelete="RESTRICT"), primary_key=True)
    ordinal: Mapped[int] = mapped_column(Integer, nullable=False)


class SummaryParent(Base):
    """Edge: `summary_id` was built from the source summary `source_summary_id`."""

    __tablename__ = "summary_parents"
    __table_args__ = (Index("ix_summary_parents_source", "source_summary_id"),)

    summary_id: Mapped[str] = mapped_column(ForeignKey("summaries.summary_id", ondelete="RESTRICT"), primary_key=True)
    source_summary_id: Mapped[str] = mapped_column(
        ForeignKey("summaries.summary_id", ondelete="RESTRICT"), primary_key=True
    )
    ordinal: Mapped[int] = mapped_column(Integer, nullable=False)


class ContextItem(Base):
    """The ordered projection the model sees for one session (sparse ordinals, never renumbered)."""

    __tablename__ = "context_items"
    __table_args__ = (
        CheckConstraint("item_type IN ('message','summary')", name="item_type"),
        CheckConstraint(
            "(item_type = 'message' AND message_id IS NOT NULL AND summary_id IS NULL) OR "
            "(item_type = 'summary' AND summary_id IS NOT NULL AND message_id IS NULL)",
            name="one_ref",
        ),
        Index("ix_context_items_message", "message_id"),
        Index("ix_context_items_summary", "summary_id"),
        {"sqlite_with_rowid": False},
    )

    session_id: Mapped[str] = mapped_column(ForeignKey("sessions.session_id", ondelete="RESTRICT"), primary_key=True)
    ordinal: Mapped[int] = mapped_column(Integer, primary_key=True)
    item_type: Mapped[str] = mapped_column(String, nullable=False)
    message_id: Mapped[int | None] = mapped_column(ForeignKey("messages.message_id", ondelete="RESTRICT"))
    summary_id: Mapped[str | None] = mapped_column(ForeignKey("summaries.summary_id", ondelete="RESTRICT"))
    token_count: Mapped[int] = mapped_column(Integer, nullable=False)


class Compaction(Base):
    """Audit log: one row per compaction attempt that changed something (or failed)."""

    __tablename__ = "compactions"
    __table_args__ = (Index("ix_compactions_key_started", "session_key", "started_at"),)

    compaction_id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    session_key: Mapped[str] = mapped_column(String, nullable=False)
    before_session_id: Mapped[str] = mapped_column(
        ForeignKey("sessions.session_id", ondelete="RESTRICT"), nullable=False
    )
    after_session_id: Mapped[str | None] = mapped_column(ForeignKey("sessions.session_id", ondelete="RESTRICT"))
    engine_id: Mapped[str] = mapped_column(String, nullable=False)
    trigger: Mapped[str] = mapped_column(String, nullable=False)
    ok: Mapped[int] = mapped_column(Integer, nullable=False)
    compacted: Mapped[int] = mapped_column(Integer, nullable=False)
    reason: Mapped[str | None] = mapped_column(String)
    tokens_before: Mapped[int] = mapped_column(Integer, nullable=False)
    tokens_after: Mapped[int | None] = mapped_column(Integer)
    summary_id: Mapped[str | None] = mapped_column(ForeignKey("summaries.summary_id", ondelete="RESTRICT"))
    first_kept_message_id: Mapped[int | None] = mapped_column(ForeignKey("messages.message_id", ondelete="RESTRICT"))
    first_kept_entry_id: Mapped[str | None] = mapped_column(String)
    summaries_created: Mapped[int] = mapped_column(Integer, nullable=False, server_default="0")
    started_at: Mapped[str] = mapped_column(String, nullable=False, server_default=NOW)
    duration_ms: Mapped[int] = mapped_column(Integer, nullable=False, server_default="0")
    details_json: Mapped[str | None] = mapped_column(Text)


class TranscriptEntry(Base):
    """Non-message transcript entries (compaction, model_change, label, …) and unparseable lines, verbatim."""

    __tablename__ = "transcript_entries"
    __table_args__ = (
        Index(
            "ux_transcript_entries_session_entry",
            "session_id",
            "entry_id",
            unique=True,
            sqlite_where=text("entry_id IS NOT NULL"),
        ),
    )

    row_id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    session_id: Mapped[str | None] = mapped_column(ForeignKey("sessions.session_id", ondelete="RESTRICT"))
    entry_id: Mapped[str | None] = mapped_column(String)
    parent_entry_id: Mapped[str | None] = mapped_column(String)
    entry_type: Mapped[str] = mapped_column(String, nullable=False)
    raw_json: Mapped[str] = mapped_column(Text, nullable=False)
    # A message line as read, when its envelope and stored message would not write it back byte for byte.
    source_line: Mapped[str | None] = mapped_column(Text)
    source_file: Mapped[str | None] = mapped_column(String)
    line_no: Mapped[int | None] = mapped_column(Integer)
    error: Mapped[str | None] = mapped_column(String)
    on_active_branch: Mapped[int] = mapped_column(Integer, nullable=False, server_default="1")
    created_at: Mapped[str] = mapped_column(String, nullable=False, server_default=NOW)


class EngineState(Base):
    """Small per-engine, per-session-key state (bootstrap marks, deferred compaction debt, grants)."""

    __tablename__ = "engine_state"

    engine_id: Mapped[str] = mapped_column(String, primary_key=True)
    session_key: Mapped[str] = mapped_column(String, primary_key=True)
    name: Mapped[str] = mapped_column(String, primary_key=True)
    value_json: Mapped[str] = mapped_column(Text, nullable=False)
    updated_at: Mapped[str] = mapped_column(String, nullable=False, server_default=NOW)


class Turn(Base):
    """One runtime turn of a session key: what the host assembled for the model, against which budget.

    Written by the runtime in the turn's persist transaction (revision 0003); `turn` counts a key's
    turns from 1 across its whole rotation chain.
    """

    __tablename__ = "turns"
    __table_args__ = (Index("ux_turns_key_turn", "session_key", "turn", unique=True),)

    turn_id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    session_key: Mapped[str] = mapped_column(String, nullable=False)
    session_id: Mapped[str] = mapped_column(ForeignKey("sessions.session_id", ondelete="RESTRICT"), nullable=False)
    turn: Mapped[int] = mapped_column(Integer, nullable=False)
    assembled_tokens: Mapped[int] = mapped_column(Integer, nullable=False)
    prompt_tokens: Mapped[int | None] = mapped_column(Integer, nullable=True)
    """The largest prompt the turn's model calls were sent (revision 0005; NULL on older rows)."""
    budget: Mapped[int] = mapped_column(Integer, nullable=False)
    compacted: Mapped[int] = mapped_column(Integer, nullable=False, server_default="0")
    at: Mapped[str] = mapped_column(String, nullable=False, server_default=NOW)


class TurnAdvancement(Base):
    """One committed turn of OpenClaw 2026.9's ``commitTurn``, keyed by the host's advancement key.

    Written in the same transaction as the turn's messages (revision 0004), so a retried or
    duplicated commit finds its key and writes nothing. The anchors are the host's own JSON.
    """

    __tablename__ = "turn_advancements"

    session_key: Mapped[str] = mapped_column(String, primary_key=True)
    advancement_key: Mapped[str] = mapped_column(String, primary_key=True)
    session_id: Mapped[str] = mapped_column(ForeignKey("sessions.session_id", ondelete="RESTRICT"), nullable=False)
    message_count: Mapped[int] = mapped_column(Integer, nullable=False)
    first_message_id: Mapped[int | None] = mapped_column(Integer)
    last_message_id: Mapped[int | None] = mapped_column(Integer)
    admission_json: Mapped[str | None] = mapped_column(Text)
    terminal_json: Mapped[str | None] = mapped_column(Text)
    at: Mapped[str] = mapped_column(String, nullable=False, server_default=NOW)


class MessageVector(Base):
    """A message's embedding for semantic recall (revision 0008): derived data, rebuilt by ``openclaw-ctx embed``.

    `vector` is the unit-length embedding quantised to int8 (one signed byte per dimension, scale 127).
    """

    __tablename__ = "message_vectors"
    __table_args__ = (Index("ix_message_vectors_key", "session_key", "message_id"),)

    message_id: Mapped[int] = mapped_column(
        ForeignKey("messages.message_id", ondelete="RESTRICT"), primary_key=True, autoincrement=False
    )
    session_key: Mapped[str] = mapped_column(String, nullable=False)
    model: Mapped[str] = mapped_column(String, nullable=False)
    vector: Mapped[bytes] = mapped_column(LargeBinary, nullable=False)


class SummaryVector(Base):
    """A summary's embedding, as :class:`MessageVector` (revision 0008)."""

    __tablename__ = "summary_vectors"
    __table_args__ = (Index("ix_summary_vectors_key", "session_key"),)

    summary_id: Mapped[str] = mapped_column(ForeignKey("summaries.summary_id", ondelete="RESTRICT"), primary_key=True)
    session_key: Mapped[str] = mapped_column(String, nullable=False)
    model: Mapped[str] = mapped_column(String, nullable=False)
    vector: Mapped[bytes] = mapped_column(LargeBinary, nullable=False)
