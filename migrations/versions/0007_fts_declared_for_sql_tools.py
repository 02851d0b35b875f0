"""The full-text tables declared the way SQL tools look for them: ``content="messages"``.

sqlite-utils and datasette find a table's FTS index by matching ``content="<table>"`` (or
``content=[<table>]``) in its ``CREATE VIRTUAL TABLE``; 0001 wrote ``content='messages'``, which
neither recognises. FTS5 keeps no way to alter a declaration, so each index is dropped, declared
again and rebuilt from its content table, in batches that report progress. The triggers that keep the
indexes in step name them only by name and stay as they are. Search answers the same before and after.

Revision ID: 0007
Revises: 0006
Create Date: 2026-12-07
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import sqlalchemy as sa
from alembic import context, op

revision: str = "0007"
down_revision: str | None = "0006"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_TOKENIZE = "tokenize='porter unicode61 remove_diacritics 2'"
# (index, indexed column, content table, its rowid column, the content table's text column)
_INDEXES = (
    ("messages_fts", "text", "messages", "message_id", "text"),
    ("summaries_fts", "content", "summaries", "rowid", "content"),
)
_BATCH = 5000


def _declare(quote: str) -> None:
    progress: Any = context.config.attributes.get("progress")
    bind = op.get_bind()
    for fts, column, table, rowid, source in _INDEXES:
        op.execute(f"DROP TABLE {fts}")
        op.execute(
            f"CREATE VIRTUAL TABLE {fts} USING fts5({column}, content={quote}{table}{quote}, "
            f"content_rowid={quote}{rowid}{quote}, {_TOKENIZE})"
        )
        _rebuild(bind, progress, fts, column, table, rowid, source)


def _rebuild(bind: sa.Connection, progress: Any, fts: str, column: str, table: str, rowid: str, source: str) -> None:
    """What FTS5's 'rebuild' does, a batch of rows at a time so a large store shows its progress."""
    total = int(bind.exec_driver_sql(f"SELECT count(*) FROM {table}").scalar_one())
    label = f"rebuilding the full-text index of {table}"
    done, after = 0, None
    while done < total:
        where = "" if after is None else f"WHERE {rowid} > {int(after)}"
        upper = bind.exec_driver_sql(
            f"SELECT {rowid} FROM {table} {where} ORDER BY {rowid} LIMIT 1 OFFSET {_BATCH - 1}"
        ).scalar()
        bounds = where if upper is None else f"{where or 'WHERE 1'} AND {rowid} <= {int(upper)}"
        bind.exec_driver_sql(f"INSERT INTO {fts}(rowid, {column}) SELECT {rowid}, {source} FROM {table} {bounds}")
        done = total if upper is None else done + _BATCH
        after = upper
        if progress is not None:
            progress(label, min(done, total), total)


def upgrade() -> None:
    _declare('"')


def downgrade() -> None:
    _declare("'")
