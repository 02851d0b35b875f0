"""A message line as read, when exporting it from its envelope and stored message would not give it back
byte for byte: `transcript_entries.source_line` (NULL otherwise, and for rows imported before it).

Revision ID: 0006
Revises: 0005
Create Date: 2026-12-07
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0006"
down_revision: str | None = "0005"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    # Nullable, no default: an ALTER TABLE ADD COLUMN, instant on any size of table.
    with op.batch_alter_table("transcript_entries", schema=None) as batch_op:
        batch_op.add_column(sa.Column("source_line", sa.Text(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("transcript_entries", schema=None) as batch_op:
        batch_op.drop_column("source_line")
