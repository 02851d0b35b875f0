"""Alembic environment: async (aiosqlite), batch mode for SQLite, connection sharing for in-process use.

`Store.open()` and `openclaw-ctx db …` pass an open connection in ``config.attributes["connection"]``;
the `alembic` command line builds its own async engine from the URL (``-x db=PATH`` overrides it).
"""

from __future__ import annotations

import asyncio

from alembic import context
from sqlalchemy import pool
from sqlalchemy.engine import Connection
from sqlalchemy.ext.asyncio import async_engine_from_config

from openclaw_ctx.registry import ensure_engines_loaded
from openclaw_ctx.store.models import Base

# Engines declare their own tables (lossless-claw: large_content) on Base when their entry points load;
# core names no engine here, so it migrates the same with a plugin absent.
ensure_engines_loaded()

config = context.config
target_metadata = Base.metadata


def _url() -> str:
    db = context.get_x_argument(as_dictionary=True).get("db")
    return f"sqlite+aiosqlite:///{db}" if db else str(config.get_main_option("sqlalchemy.url"))


# FTS5 virtual tables and their shadow tables are created by raw SQL in the migrations, not by models.
_FTS_PREFIXES = ("messages_fts", "summaries_fts")


def _include_name(name: str | None, type_: str, _parents: object) -> bool:
    return not (type_ == "table" and name is not None and name.startswith(_FTS_PREFIXES))


def _configure(**kwargs: object) -> None:
    context.configure(
        target_metadata=target_metadata,
        include_name=_include_name,
        render_as_batch=True,
        compare_type=True,
        **kwargs,  # type: ignore[arg-type]
    )


def run_migrations_offline() -> None:
    _configure(url=_url(), literal_binds=True, dialect_opts={"paramstyle": "named"})
    with context.begin_transaction():
        context.run_migrations()


def do_run_migrations(connection: Connection) -> None:
    _configure(connection=connection)
    with context.begin_transaction():
        context.run_migrations()


async def run_migrations_online() -> None:
    section = dict(config.get_section(config.config_ini_section) or {})
    section["sqlalchemy.url"] = _url()
    connectable = async_engine_from_config(section, prefix="sqlalchemy.", poolclass=pool.NullPool)
    async with connectable.connect() as connection:
        await connection.run_sync(do_run_migrations)
    await connectable.dispose()


if context.is_offline_mode():
    run_migrations_offline()
elif (shared := config.attributes.get("connection")) is not None:
    do_run_migrations(shared)
else:
    asyncio.run(run_migrations_online())
