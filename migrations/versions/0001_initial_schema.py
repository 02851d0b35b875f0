"""Initial schema: sessions, messages, summaries and their DAG edges, context_items, compactions,
engine_state, transcript_entries; FTS5 indexes kept in sync by triggers; the people-facing views.

Revision ID: 0001
Revises:
Create Date: 2026-12-02
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0001"
down_revision: str | None = None
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "engine_state",
        sa.Column("engine_id", sa.String(), nullable=False),
        sa.Column("session_key", sa.String(), nullable=False),
        sa.Column("name", sa.String(), nullable=False),
        sa.Column("value_json", sa.Text(), nullable=False),
        sa.Column(
            "updated_at",
            sa.String(),
            server_default=sa.text("(strftime('%Y-%m-%dT%H:%M:%fZ','now'))"),
            nullable=False,
        ),
        sa.PrimaryKeyConstraint("engine_id", "session_key", "name", name=op.f("pk_engine_state")),
    )
    op.create_table(
        "sessions",
        sa.Column("session_id", sa.String(), nullable=False),
        sa.Column("session_key", sa.String(), nullable=False),
        sa.Column("session_file", sa.String(), nullable=True),
        sa.Column("parent_session_id", sa.String(), nullable=True),
        sa.Column("rotation_reason", sa.String(), nullable=True),
        sa.Column("status", sa.String(), server_default="active", nullable=False),
        sa.Column("engine_id", sa.String(), nullable=True),
        sa.Column("cwd", sa.String(), nullable=True),
        sa.Column("meta_json", sa.Text(), nullable=True),
        sa.Column(
            "created_at",
            sa.String(),
            server_default=sa.text("(strftime('%Y-%m-%dT%H:%M:%fZ','now'))"),
            nullable=False,
        ),
        sa.Column(
            "updated_at",
            sa.String(),
            server_default=sa.text("(strftime('%Y-%m-%dT%H:%M:%fZ','now'))"),
            nullable=False,
        ),
        sa.CheckConstraint("status IN ('active','rotated','archived')", name=op.f("ck_sessions_status")),
        sa.ForeignKeyConstraint(
            ["parent_session_id"],
            ["sessions.session_id"],
            name=op.f("fk_sessions_parent_session_id_sessions"),
            ondelete="RESTRICT",
        ),
        sa.PrimaryKeyConstraint("session_id", name=op.f("pk_sessions")),
    )
    with op.batch_alter_table("sessions", schema=None) as batch_op:
        batch_op.create_index("ix_sessions_key_created", ["session_key", "created_at"], unique=False)
        batch_op.create_index(batch_op.f("ix_sessions_parent_session_id"), ["parent_session_id"], unique=False)
        batch_op.create_index(
            "ux_sessions_active_key", ["session_key"], unique=True, sqlite_where=sa.text("status = 'active'")
        )

    op.create_table(
        "messages",
        sa.Column("message_id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("session_id", sa.String(), nullable=False),
        sa.Column("session_key", sa.String(), nullable=False),
        sa.Column("seq", sa.Integer(), nullable=False),
        sa.Column("entry_id", sa.String(), nullable=True),
        sa.Column("parent_entry_id", sa.String(), nullable=True),
        sa.Column("event_key", sa.String(), nullable=True),
        sa.Column("role", sa.String(), nullable=False),
        sa.Column("message_json", sa.Text(), nullable=False),
        sa.Column("text", sa.Text(), server_default="", nullable=False),
        sa.Column("token_count", sa.Integer(), nullable=False),
        sa.Column("tool_call_id", sa.String(), nullable=True),
        sa.Column("tool_name", sa.String(), nullable=True),
        sa.Column("on_active_branch", sa.Integer(), server_default="1", nullable=False),
        sa.Column("is_heartbeat", sa.Integer(), server_default="0", nullable=False),
        sa.Column("timestamp_ms", sa.Integer(), nullable=True),
        sa.Column(
            "created_at",
            sa.String(),
            server_default=sa.text("(strftime('%Y-%m-%dT%H:%M:%fZ','now'))"),
            nullable=False,
        ),
        sa.ForeignKeyConstraint(
            ["session_id"],
            ["sessions.session_id"],
            name=op.f("fk_messages_session_id_sessions"),
            ondelete="RESTRICT",
        ),
        sa.PrimaryKeyConstraint("message_id", name=op.f("pk_messages")),
    )
    with op.batch_alter_table("messages", schema=None) as batch_op:
        batch_op.create_index("ix_messages_session_seq", ["session_id", "seq"], unique=False)
        batch_op.create_index(
            "ix_messages_tool_call",
            ["tool_call_id"],
            unique=False,
            sqlite_where=sa.text("tool_call_id IS NOT NULL"),
        )
        batch_op.create_index(
            "ux_messages_key_entry",
            ["session_key", "entry_id"],
            unique=True,
            sqlite_where=sa.text("entry_id IS NOT NULL"),
        )
        batch_op.create_index(
            "ux_messages_key_event",
            ["session_key", "event_key"],
            unique=True,
            sqlite_where=sa.text("event_key IS NOT NULL"),
        )
        batch_op.create_index("ux_messages_key_seq", ["session_key", "seq"], unique=True)

    op.create_table(
        "summaries",
        sa.Column("summary_id", sa.String(), nullable=False),
        sa.Column("session_key", sa.String(), nullable=False),
        sa.Column("session_id", sa.String(), nullable=False),
        sa.Column("kind", sa.String(), nullable=False),
        sa.Column("depth", sa.Integer(), server_default="0", nullable=False),
        sa.Column("content", sa.Text(), nullable=False),
        sa.Column("token_count", sa.Integer(), nullable=False),
        sa.Column("earliest_at", sa.String(), nullable=True),
        sa.Column("latest_at", sa.String(), nullable=True),
        sa.Column("descendant_count", sa.Integer(), server_default="0", nullable=False),
        sa.Column("descendant_token_count", sa.Integer(), server_default="0", nullable=False),
        sa.Column("source_message_token_count", sa.Integer(), server_default="0", nullable=False),
        sa.Column("summarizer", sa.String(), nullable=False),
        sa.Column("model", sa.String(), nullable=True),
        sa.Column("fallback_level", sa.String(), server_default="none", nullable=False),
        sa.Column("details_json", sa.Text(), nullable=True),
        sa.Column(
            "created_at",
            sa.String(),
            server_default=sa.text("(strftime('%Y-%m-%dT%H:%M:%fZ','now'))"),
            nullable=False,
        ),
        sa.CheckConstraint("kind IN ('legacy','leaf','condensed')", name=op.f("ck_summaries_kind")),
        sa.CheckConstraint("depth >= 0", name=op.f("ck_summaries_depth")),
        sa.ForeignKeyConstraint(
            ["session_id"],
            ["sessions.session_id"],
            name=op.f("fk_summaries_session_id_sessions"),
            ondelete="RESTRICT",
        ),
        sa.PrimaryKeyConstraint("summary_id", name=op.f("pk_summaries")),
    )
    with op.batch_alter_table("summaries", schema=None) as batch_op:
        batch_op.create_index("ix_summaries_key_created", ["session_key", "created_at"], unique=False)
        batch_op.create_index("ix_summaries_key_depth", ["session_key", "depth", "kind"], unique=False)

    op.create_table(
        "transcript_entries",
        sa.Column("row_id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("session_id", sa.String(), nullable=True),
        sa.Column("entry_id", sa.String(), nullable=True),
        sa.Column("parent_entry_id", sa.String(), nullable=True),
        sa.Column("entry_type", sa.String(), nullable=False),
        sa.Column("raw_json", sa.Text(), nullable=False),
        sa.Column("source_file", sa.String(), nullable=True),
        sa.Column("line_no", sa.Integer(), nullable=True),
        sa.Column("error", sa.String(), nullable=True),
        sa.Column("on_active_branch", sa.Integer(), server_default="1", nullable=False),
        sa.Column(
            "created_at",
            sa.String(),
            server_default=sa.text("(strftime('%Y-%m-%dT%H:%M:%fZ','now'))"),
            nullable=False,
        ),
        sa.ForeignKeyConstraint(
            ["session_id"],
            ["sessions.session_id"],
            name=op.f("fk_transcript_entries_session_id_sessions"),
            ondelete="RESTRICT",
        ),
        sa.PrimaryKeyConstraint("row_id", name=op.f("pk_transcript_entries")),
    )
    with op.batch_alter_table("transcript_entries", schema=None) as batch_op:
        batch_op.create_index(
            "ux_transcript_entries_session_entry",
            ["session_id", "entry_id"],
            unique=True,
            sqlite_where=sa.text("entry_id IS NOT NULL"),
        )

    op.create_table(
        "compactions",
        sa.Column("compaction_id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("session_key", sa.String(), nullable=False),
        sa.Column("before_session_id", sa.String(), nullable=False),
        sa.Column("after_session_id", sa.String(), nullable=True),
        sa.Column("engine_id", sa.String(), nullable=False),
        sa.Column("trigger", sa.String(), nullable=False),
        sa.Column("ok", sa.Integer(), nullable=False),
        sa.Column("compacted", sa.Integer(), nullable=False),
        sa.Column("reason", sa.String(), nullable=True),
        sa.Column("tokens_before", sa.Integer(), nullable=False),
        sa.Column("tokens_after", sa.Integer(), nullable=True),
        sa.Column("summary_id", sa.String(), nullable=True),
        sa.Column("first_kept_message_id", sa.Integer(), nullable=True),
        sa.Column("first_kept_entry_id", sa.String(), nullable=True),
        sa.Column("summaries_created", sa.Integer(), server_default="0", nullable=False),
        sa.Column(
            "started_at",
            sa.String(),
            server_default=sa.text("(strftime('%Y-%m-%dT%H:%M:%fZ','now'))"),
            nullable=False,
        ),
        sa.Column("duration_ms", sa.Integer(), server_default="0", nullable=False),
        sa.Column("details_json", sa.Text(), nullable=True),
        sa.ForeignKeyConstraint(
            ["after_session_id"],
            ["sessions.session_id"],
            name=op.f("fk_compactions_after_session_id_sessions"),
            ondelete="RESTRICT",
        ),
        sa.ForeignKeyConstraint(
            ["before_session_id"],
            ["sessions.session_id"],
            name=op.f("fk_compactions_before_session_id_sessions"),
            ondelete="RESTRICT",
        ),
        sa.ForeignKeyConstraint(
            ["first_kept_message_id"],
            ["messages.message_id"],
            name=op.f("fk_compactions_first_kept_message_id_messages"),
            ondelete="RESTRICT",
        ),
        sa.ForeignKeyConstraint(
            ["summary_id"],
            ["summaries.summary_id"],
            name=op.f("fk_compactions_summary_id_summaries"),
            ondelete="RESTRICT",
        ),
        sa.PrimaryKeyConstraint("compaction_id", name=op.f("pk_compactions")),
    )
    with op.batch_alter_table("compactions", schema=None) as batch_op:
        batch_op.create_index("ix_compactions_key_started", ["session_key", "started_at"], unique=False)

    op.create_table(
        "context_items",
        sa.Column("session_id", sa.String(), nullable=False),
        sa.Column("ordinal", sa.Integer(), nullable=False),
        sa.Column("item_type", sa.String(), nullable=False),
        sa.Column("message_id", sa.Integer(), nullable=True),
        sa.Column("summary_id", sa.String(), nullable=True),
        sa.Column("token_count", sa.Integer(), nullable=False),
        sa.CheckConstraint(
            "(item_type = 'message' AND message_id IS NOT NULL AND summary_id IS NULL) OR (item_type = 'summary' AND summary_id IS NOT NULL AND message_id IS NULL)",
            name=op.f("ck_context_items_one_ref"),
        ),
        sa.CheckConstraint("item_type IN ('message','summary')", name=op.f("ck_context_items_item_type")),
        sa.ForeignKeyConstraint(
            ["message_id"],
            ["messages.message_id"],
            name=op.f("fk_context_items_message_id_messages"),
            ondelete="RESTRICT",
        ),
        sa.ForeignKeyConstraint(
            ["session_id"],
            ["sessions.session_id"],
            name=op.f("fk_context_items_session_id_sessions"),
            ondelete="RESTRICT",
        ),
        sa.ForeignKeyConstraint(
            ["summary_id"],
            ["summaries.summary_id"],
            name=op.f("fk_context_items_summary_id_summaries"),
            ondelete="RESTRICT",
        ),
        sa.PrimaryKeyConstraint("session_id", "ordinal", name=op.f("pk_context_items")),
        sqlite_with_rowid=False,
    )
    with op.batch_alter_table("context_items", schema=None) as batch_op:
        batch_op.create_index("ix_context_items_message", ["message_id"], unique=False)
        batch_op.create_index("ix_context_items_summary", ["summary_id"], unique=False)

    op.create_table(
        "summary_messages",
        sa.Column("summary_id", sa.String(), nullable=False),
        sa.Column("message_id", sa.Integer(), nullable=False),
        sa.Column("ordinal", sa.Integer(), nullable=False),
        sa.ForeignKeyConstraint(
            ["message_id"],
            ["messages.message_id"],
            name=op.f("fk_summary_messages_message_id_messages"),
            ondelete="RESTRICT",
        ),
        sa.ForeignKeyConstraint(
            ["summary_id"],
            ["summaries.summary_id"],
            name=op.f("fk_summary_messages_summary_id_summaries"),
            ondelete="RESTRICT",
        ),
        sa.PrimaryKeyConstraint("summary_id", "message_id", name=op.f("pk_summary_messages")),
    )
    with op.batch_alter_table("summary_messages", schema=None) as batch_op:
        batch_op.create_index("ix_summary_messages_message", ["message_id"], unique=False)

    op.create_table(
        "summary_parents",
        sa.Column("summary_id", sa.String(), nullable=False),
        sa.Column("source_summary_id", sa.String(), nullable=False),
        sa.Column("ordinal", sa.Integer(), nullable=False),
        sa.ForeignKeyConstraint(
            ["source_summary_id"],
            ["summaries.summary_id"],
            name=op.f("fk_summary_parents_source_summary_id_summaries"),
            ondelete="RESTRICT",
        ),
        sa.ForeignKeyConstraint(
            ["summary_id"],
            ["summaries.summary_id"],
            name=op.f("fk_summary_parents_summary_id_summaries"),
            ondelete="RESTRICT",
        ),
        sa.PrimaryKeyConstraint("summary_id", "source_summary_id", name=op.f("pk_summary_parents")),
    )
    with op.batch_alter_table("summary_parents", schema=None) as batch_op:
        batch_op.create_index("ix_summary_parents_source", ["source_summary_id"], unique=False)

    for statement in _CREATE:
        op.execute(statement)


def downgrade() -> None:
    for statement in _DROP:
        op.execute(statement)
    with op.batch_alter_table("summary_parents", schema=None) as batch_op:
        batch_op.drop_index("ix_summary_parents_source")

    op.drop_table("summary_parents")
    with op.batch_alter_table("summary_messages", schema=None) as batch_op:
        batch_op.drop_index("ix_summary_messages_message")

    op.drop_table("summary_messages")
    with op.batch_alter_table("context_items", schema=None) as batch_op:
        batch_op.drop_index("ix_context_items_summary")
        batch_op.drop_index("ix_context_items_message")

    op.drop_table("context_items")
    with op.batch_alter_table("compactions", schema=None) as batch_op:
        batch_op.drop_index("ix_compactions_key_started")

    op.drop_table("compactions")
    with op.batch_alter_table("transcript_entries", schema=None) as batch_op:
        batch_op.drop_index("ux_transcript_entries_session_entry", sqlite_where=sa.text("entry_id IS NOT NULL"))

    op.drop_table("transcript_entries")
    with op.batch_alter_table("summaries", schema=None) as batch_op:
        batch_op.drop_index("ix_summaries_key_depth")
        batch_op.drop_index("ix_summaries_key_created")

    op.drop_table("summaries")
    with op.batch_alter_table("messages", schema=None) as batch_op:
        batch_op.drop_index("ux_messages_key_seq")
        batch_op.drop_index("ux_messages_key_event", sqlite_where=sa.text("event_key IS NOT NULL"))
        batch_op.drop_index("ux_messages_key_entry", sqlite_where=sa.text("entry_id IS NOT NULL"))
        batch_op.drop_index("ix_messages_tool_call", sqlite_where=sa.text("tool_call_id IS NOT NULL"))
        batch_op.drop_index("ix_messages_session_seq")

    op.drop_table("messages")
    with op.batch_alter_table("sessions", schema=None) as batch_op:
        batch_op.drop_index("ux_sessions_active_key", sqlite_where=sa.text("status = 'active'"))
        batch_op.drop_index(batch_op.f("ix_sessions_parent_session_id"))
        batch_op.drop_index("ix_sessions_key_created")

    op.drop_table("sessions")
    op.drop_table("engine_state")


# FTS5 indexes are external-content tables over messages.text and summaries.content, kept in sync by
# triggers, so an index row is written in the same transaction as the row it indexes.
_CREATE = [
    """CREATE VIRTUAL TABLE messages_fts USING fts5(
        text, content='messages', content_rowid='message_id', tokenize='porter unicode61 remove_diacritics 2')""",
    """CREATE TRIGGER messages_fts_ai AFTER INSERT ON messages BEGIN
        INSERT INTO messages_fts(rowid, text) VALUES (new.message_id, new.text);
    END""",
    """CREATE TRIGGER messages_fts_ad AFTER DELETE ON messages BEGIN
        INSERT INTO messages_fts(messages_fts, rowid, text) VALUES ('delete', old.message_id, old.text);
    END""",
    """CREATE TRIGGER messages_fts_au AFTER UPDATE OF text ON messages BEGIN
        INSERT INTO messages_fts(messages_fts, rowid, text) VALUES ('delete', old.message_id, old.text);
        INSERT INTO messages_fts(rowid, text) VALUES (new.message_id, new.text);
    END""",
    """CREATE VIRTUAL TABLE summaries_fts USING fts5(
        content, content='summaries', content_rowid='rowid', tokenize='porter unicode61 remove_diacritics 2')""",
    """CREATE TRIGGER summaries_fts_ai AFTER INSERT ON summaries BEGIN
        INSERT INTO summaries_fts(rowid, content) VALUES (new.rowid, new.content);
    END""",
    """CREATE TRIGGER summaries_fts_ad AFTER DELETE ON summaries BEGIN
        INSERT INTO summaries_fts(summaries_fts, rowid, content) VALUES ('delete', old.rowid, old.content);
    END""",
    """CREATE TRIGGER summaries_fts_au AFTER UPDATE OF content ON summaries BEGIN
        INSERT INTO summaries_fts(summaries_fts, rowid, content) VALUES ('delete', old.rowid, old.content);
        INSERT INTO summaries_fts(rowid, content) VALUES (new.rowid, new.content);
    END""",
    # Views: the stable surface for people inspecting the store with plain SQL.
    """CREATE VIEW transcript AS
        SELECT m.message_id, m.session_key, m.session_id, s.status AS session_status, m.seq, m.entry_id,
               m.role, m.tool_name, m.text, m.token_count, m.on_active_branch, m.is_heartbeat,
               m.timestamp_ms, m.created_at
        FROM messages AS m JOIN sessions AS s ON s.session_id = m.session_id""",
    """CREATE VIEW active_context AS
        SELECT s.session_key, ci.session_id, ci.ordinal, ci.item_type, ci.message_id, ci.summary_id,
               CASE WHEN ci.item_type = 'message' THEN m.role ELSE 'summary:' || su.kind END AS role,
               su.depth AS summary_depth,
               CASE WHEN ci.item_type = 'message' THEN m.text ELSE su.content END AS text,
               ci.token_count
        FROM context_items AS ci
        JOIN sessions AS s ON s.session_id = ci.session_id AND s.status = 'active'
        LEFT JOIN messages AS m ON m.message_id = ci.message_id
        LEFT JOIN summaries AS su ON su.summary_id = ci.summary_id""",
    """CREATE VIEW summary_tree AS
        SELECT su.summary_id, su.session_key, su.kind, su.depth, su.token_count, su.descendant_count,
               su.earliest_at, su.latest_at, 'summary' AS source_type, sp.source_summary_id AS source_id,
               sp.ordinal AS source_ordinal
        FROM summaries AS su JOIN summary_parents AS sp ON sp.summary_id = su.summary_id
        UNION ALL
        SELECT su.summary_id, su.session_key, su.kind, su.depth, su.token_count, su.descendant_count,
               su.earliest_at, su.latest_at, 'message' AS source_type, CAST(sm.message_id AS TEXT) AS source_id,
               sm.ordinal AS source_ordinal
        FROM summaries AS su JOIN summary_messages AS sm ON sm.summary_id = su.summary_id""",
]

_DROP = [
    "DROP VIEW IF EXISTS summary_tree",
    "DROP VIEW IF EXISTS active_context",
    "DROP VIEW IF EXISTS transcript",
    "DROP TRIGGER IF EXISTS summaries_fts_au",
    "DROP TRIGGER IF EXISTS summaries_fts_ad",
    "DROP TRIGGER IF EXISTS summaries_fts_ai",
    "DROP TABLE IF EXISTS summaries_fts",
    "DROP TRIGGER IF EXISTS messages_fts_au",
    "DROP TRIGGER IF EXISTS messages_fts_ad",
    "DROP TRIGGER IF EXISTS messages_fts_ai",
    "DROP TABLE IF EXISTS messages_fts",
]
