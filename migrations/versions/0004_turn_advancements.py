"""OpenClaw 2026.9's committed turns: one `turn_advancements` row per advancement key of a session key.

Revision ID: 0004
Revises: 0003
Create Date: 2026-12-04
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0004"
down_revision: str | None = "0003"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "turn_advancements",
        sa.Column("session_key", sa.String(), nullable=False),
        sa.Column("advancement_key", sa.String(), nullable=False),
        sa.Column("session_id", sa.String(), nullable=False),
        sa.Column("message_count", sa.Integer(), nullable=False),
        sa.Column("first_message_id", sa.Integer(), nullable=True),
        sa.Column("last_message_id", sa.Integer(), nullable=True),
        sa.Column("admission_json", sa.Text(), nullable=True),
        sa.Column("terminal_json", sa.Text(), nullable=True),
        sa.Column(
            "at",
            sa.String(),
            server_default=sa.text("(strftime('%Y-%m-%dT%H:%M:%fZ','now'))"),
            nullable=False,
        ),
        sa.ForeignKeyConstraint(
            ["session_id"],
            ["sessions.session_id"],
            name=op.f("fk_turn_advancements_session_id_sessions"),
            ondelete="RESTRICT",
        ),
        sa.PrimaryKeyConstraint("session_key", "advancement_key", name=op.f("pk_turn_advancements")),
    )


def downgrade() -> None:
    op.drop_table("turn_advancements")
