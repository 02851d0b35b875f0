"""The lossless engine's `large_content` sidecar: externalised tool outputs and file contents.

Revision ID: 0002
Revises: 0001
Create Date: 2026-12-02
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0002"
down_revision: str | None = "0001"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "large_content",
        sa.Column("file_id", sa.String(), nullable=False),
        sa.Column("session_key", sa.String(), nullable=False),
        sa.Column("message_id", sa.Integer(), nullable=False),
        sa.Column("kind", sa.String(), nullable=False),
        sa.Column("name", sa.String(), nullable=True),
        sa.Column("mime_type", sa.String(), nullable=True),
        sa.Column("byte_size", sa.Integer(), nullable=False),
        sa.Column("token_count", sa.Integer(), nullable=False),
        sa.Column("stub", sa.Text(), nullable=False),
        sa.Column("stub_token_count", sa.Integer(), nullable=False),
        sa.Column(
            "created_at",
            sa.String(),
            server_default=sa.text("(strftime('%Y-%m-%dT%H:%M:%fZ','now'))"),
            nullable=False,
        ),
        sa.ForeignKeyConstraint(
            ["message_id"],
            ["messages.message_id"],
            name=op.f("fk_large_content_message_id_messages"),
            ondelete="RESTRICT",
        ),
        sa.PrimaryKeyConstraint("file_id", name=op.f("pk_large_content")),
    )
    with op.batch_alter_table("large_content", schema=None) as batch_op:
        batch_op.create_index("ix_large_content_key", ["session_key"], unique=False)
        batch_op.create_index("ux_large_content_message", ["message_id"], unique=True)


def downgrade() -> None:
    with op.batch_alter_table("large_content", schema=None) as batch_op:
        batch_op.drop_index("ux_large_content_message")
        batch_op.drop_index("ix_large_content_key")
    op.drop_table("large_content")
