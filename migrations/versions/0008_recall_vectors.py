"""Embeddings for semantic recall: `message_vectors` and `summary_vectors`.

Derived data: each row is one item's unit-length embedding, int8-quantised, named by the model that
made it. New tables only, so the upgrade is instant on any size of store; `openclaw-ctx embed` fills
them for existing history.

Revision ID: 0008
Revises: 0007
Create Date: 2026-12-07
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0008"
down_revision: str | None = "0007"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "message_vectors",
        sa.Column("message_id", sa.Integer(), autoincrement=False, nullable=False),
        sa.Column("session_key", sa.String(), nullable=False),
        sa.Column("model", sa.String(), nullable=False),
        sa.Column("vector", sa.LargeBinary(), nullable=False),
        sa.ForeignKeyConstraint(
            ["message_id"],
            ["messages.message_id"],
            name=op.f("fk_message_vectors_message_id_messages"),
            ondelete="RESTRICT",
        ),
        sa.PrimaryKeyConstraint("message_id", name=op.f("pk_message_vectors")),
    )
    op.create_index("ix_message_vectors_key", "message_vectors", ["session_key", "message_id"], unique=False)
    op.create_table(
        "summary_vectors",
        sa.Column("summary_id", sa.String(), nullable=False),
        sa.Column("session_key", sa.String(), nullable=False),
        sa.Column("model", sa.String(), nullable=False),
        sa.Column("vector", sa.LargeBinary(), nullable=False),
        sa.ForeignKeyConstraint(
            ["summary_id"],
            ["summaries.summary_id"],
            name=op.f("fk_summary_vectors_summary_id_summaries"),
            ondelete="RESTRICT",
        ),
        sa.PrimaryKeyConstraint("summary_id", name=op.f("pk_summary_vectors")),
    )
    op.create_index("ix_summary_vectors_key", "summary_vectors", ["session_key"], unique=False)


def downgrade() -> None:
    op.drop_index("ix_summary_vectors_key", table_name="summary_vectors")
    op.drop_table("summary_vectors")
    op.drop_index("ix_message_vectors_key", table_name="message_vectors")
    op.drop_table("message_vectors")
