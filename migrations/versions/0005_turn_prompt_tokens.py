"""The prompt tokens a turn sent the model: `turns.prompt_tokens` (NULL for turns recorded before it).

Revision ID: 0005
Revises: 0004
Create Date: 2026-12-04
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0005"
down_revision: str | None = "0004"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    # A nullable column with no default: the rows of older databases keep working and read NULL.
    with op.batch_alter_table("turns", schema=None) as batch_op:
        batch_op.add_column(sa.Column("prompt_tokens", sa.Integer(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("turns", schema=None) as batch_op:
        batch_op.drop_column("prompt_tokens")
