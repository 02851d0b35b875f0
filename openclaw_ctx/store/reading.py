"""Read helpers for code that accepts either the Store or a connection it already holds."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from sqlalchemy.ext.asyncio import AsyncConnection

from openclaw_ctx.store.store import Store

__all__ = ["ReadSource", "reading"]

ReadSource = Store | AsyncConnection
"""What a read-only function may be handed: the store (a snapshot is opened) or an open connection."""


@asynccontextmanager
async def reading(source: ReadSource) -> AsyncIterator[AsyncConnection]:
    """A connection for reads: the given one, or a fresh read snapshot of the store."""
    if isinstance(source, AsyncConnection):
        yield source
    else:
        async with source.read() as conn:
            yield conn
