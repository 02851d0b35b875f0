"""The aiosqlite connection under an AsyncConnection: hot-path statements in one driver hop each."""

from __future__ import annotations

import sqlite3
from collections.abc import Mapping, Sequence
from typing import Any

from sqlalchemy.exc import DBAPIError
from sqlalchemy.ext.asyncio import AsyncConnection

__all__ = ["Driver"]


class Driver:
    """The aiosqlite connection under an AsyncConnection, for hot-path statements in one hop each (public for engines).

    SQLAlchemy's asyncio adapter spends three to four driver round trips per statement (open a
    cursor, execute, fetch, close); aiosqlite's own ``execute_fetchall`` / ``executemany`` spend one.
    The statements run on the very connection, inside the transaction SQLAlchemy began; driver
    errors are raised as SQLAlchemy's exception types, as everywhere else in the store.
    """

    def __init__(self, raw: Any) -> None:
        self._raw = raw

    @classmethod
    async def of(cls, conn: AsyncConnection) -> Driver:
        """The driver connection of `conn`, inside a transaction (begun here as SQLAlchemy's autobegin would)."""
        if not conn.in_transaction():
            await conn.begin()
        return cls((await conn.get_raw_connection()).driver_connection)

    async def fetchall(self, sql: str, params: Sequence[Any] | Mapping[str, Any]) -> list[Any]:
        """Execute one statement (``?`` or ``:name`` placeholders) and return its rows as tuples."""
        try:
            return list(await self._raw.execute_fetchall(sql, params))
        except sqlite3.Error as exc:
            raise _wrapped(sql, params, exc) from exc

    async def executemany(self, sql: str, rows: Sequence[Sequence[Any]]) -> None:
        """Execute one statement for every row."""
        try:
            cursor = await self._raw.executemany(sql, rows)
            await cursor.close()
        except sqlite3.Error as exc:
            raise _wrapped(sql, rows, exc) from exc


def _wrapped(sql: str, params: Any, exc: sqlite3.Error) -> BaseException:
    return DBAPIError.instance(sql, params, exc, sqlite3.Error)
