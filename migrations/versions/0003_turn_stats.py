"""Per-turn statistics: one `turns` row per runtime turn (assembled tokens, budget, compaction flag).

Revision ID: 0003
Revises: 0002
Create Date: 2026-12-02
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0003"
down_revision: str | None = "0002"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "turns",
        sa.Column("turn_id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("session_key", sa.String(), nullable=False),
        sa.Column("session_id", sa.String(), nullable=False),
        sa.Column("turn", sa.Integer(), nullable=False),
        sa.Column("assembled_tokens", sa.Integer(), nullable=False),
        sa.Column("budget", sa.Integer(), nullable=False),
        sa.Column("compacted", sa.Integer(), server_default="0", nullable=False),
        sa.Column(
            "at",
            sa.String(),
            server_default=sa.text("(strftime('%Y-%m-%dT%H:%M:%fZ','now'))"),
            nullable=False,
        ),
        sa.ForeignKeyConstraint(
            ["session_id"],
            ["sessions.session_id"],
            name=op.f("fk_turns_session_id_sessions"),
            ondelete="RESTRICT",
        ),
        sa.PrimaryKeyConstraint("turn_id", name=op.f("pk_turns")),
    )
    with op.batch_alter_table("turns", schema=None) as batch_op:
        batch_op.create_index("ux_turns_key_turn", ["session_key", "turn"], unique=True)


def downgrade() -> None:
    with op.batch_alter_table("turns", schema=None) as batch_op:
        batch_op.drop_index("ux_turns_key_turn")
    op.drop_table("turns")
