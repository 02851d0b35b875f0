"""The store: the one SQLite file (SQLAlchemy 2 async over aiosqlite) and the only writer of core tables."""

from openclaw_ctx.store.reading import ReadSource, reading
from openclaw_ctx.store.store import SchemaState, Store

__all__ = ["ReadSource", "SchemaState", "Store", "reading"]
