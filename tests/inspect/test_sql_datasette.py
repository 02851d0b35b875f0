"""docs/sql.md through datasette: its JSON API over loopback, serving the live database read-only.

`datasette` (installed by the dev extra) opens the demo database of docs/sql.md (mode=ro) while a
Store commits to the same file; every documented query, sent to the JSON API with httpx, must
return the rows the document shows. Datasette binds named parameters written `:name`; the
document's `.parameter set @name …` lines become query-string arguments.
"""

from __future__ import annotations

import asyncio
import contextlib
import re
import shutil
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from test_sql_docs import EXAMPLES, demo_db, live_db, writing  # noqa: F401  (fixtures)

from openclaw_ctx.messages import UserMessage
from openclaw_ctx.store import repo
from openclaw_ctx.tokens import tokenizer_status

DATASETTE = Path(sys.executable).with_name("datasette")
_PARAMETER = re.compile(r"^\.parameter set @(\w+) (.*)$", re.M)
_LISTENING = re.compile(r"Uvicorn running on http://127\.0\.0\.1:(\d+)")

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(
        not DATASETTE.exists() and shutil.which("datasette") is None, reason="datasette (dev extra) is not installed"
    ),
]


def _value(raw: str) -> str:
    """A `.parameter set` value as the sqlite3 shell evaluates it: a quoted SQL string, or a bare number."""
    raw = raw.strip()
    if raw.startswith('"') and raw.endswith('"'):
        raw = raw[1:-1].replace('\\"', '"')
    if raw.startswith("'") and raw.endswith("'"):
        return raw[1:-1].replace("''", "'")
    return raw


def as_datasette(sql: str) -> tuple[str, dict[str, str]]:
    """The document's query with `@name` parameters as datasette's `:name`, and their values."""
    params = {name: _value(value) for name, value in _PARAMETER.findall(sql)}
    body = _PARAMETER.sub("", sql).strip().rstrip(";")
    for name in params:
        body = re.sub(rf"@{name}\b", f":{name}", body)
    return body, params


def documented_rows(output: str) -> list[list[str]]:
    """The data rows of a `sqlite3 -box` table, cell text stripped."""
    return [[cell.strip() for cell in line.split("│")[1:-1]] for line in output.splitlines() if line.startswith("│")][
        1:
    ]


def _cell(value: Any) -> str:
    # As the box table prints it: NULL as nothing, edges trimmed (the table pads every cell).
    return "" if value is None else str(value).strip()


@contextlib.asynccontextmanager
async def datasette(db: Path) -> AsyncIterator[str]:
    """Serve `db` with datasette on a free loopback port; yields the base URL."""
    exe = str(DATASETTE) if DATASETTE.exists() else str(shutil.which("datasette"))
    proc = await asyncio.create_subprocess_exec(
        exe,
        "serve",
        str(db),
        "--host",
        "127.0.0.1",
        "--port",
        "0",
        "--setting",
        "sql_time_limit_ms",
        "20000",
        stdout=asyncio.subprocess.DEVNULL,
        stderr=asyncio.subprocess.PIPE,
    )
    assert proc.stderr is not None
    try:
        seen: list[str] = []
        while True:
            line = (await asyncio.wait_for(proc.stderr.readline(), timeout=120)).decode()
            if not line:
                raise AssertionError("datasette exited before listening:\n" + "".join(seen))
            seen.append(line)
            found = _LISTENING.search(line)
            if found:
                break
        yield f"http://127.0.0.1:{found.group(1)}"
    finally:
        proc.terminate()
        await proc.wait()


async def query(client: httpx.AsyncClient, base: str, db: Path, sql: str) -> list[dict[str, Any]]:
    body, params = as_datasette(sql)
    response = await client.get(f"{base}/{db.stem}.json", params={"sql": body, "_shape": "array", **params})
    assert response.status_code == 200, response.text
    rows: list[dict[str, Any]] = response.json()
    return rows


def test_every_documented_query_translates() -> None:
    for name, (sql, _) in EXAMPLES.items():
        body, params = as_datasette(sql)
        assert "@" not in re.sub(r"'[^']*'", "", body), name
        assert set(re.findall(r":(\w+)", re.sub(r"'[^']*'", "", body))) == set(params), name


async def test_datasette_answers_the_documented_queries_while_the_store_writes(live_db: Path) -> None:  # noqa: F811
    if not tokenizer_status().exact:
        pytest.skip("the documented token counts need the exact o200k_base tokenizer")
    async with writing(live_db) as store:
        async with datasette(live_db) as base, httpx.AsyncClient(timeout=60) as client:
            for name, (sql, output) in EXAMPLES.items():
                rows = await query(client, base, live_db, sql)
                assert [[_cell(v) for v in row.values()] for row in rows] == documented_rows(output), name
            # An open write transaction is invisible to datasette and does not block it.
            sql, output = EXAMPLES["token-totals"]
            async with store.transaction() as conn:
                pending = await repo.ensure_session(conn, "live:pending", sessions_dir=str(live_db.parent))
                await repo.append_messages(conn, pending, [repo.NewMessage(UserMessage(content="x"))], store.counter)
                rows = await query(client, base, live_db, sql)
                assert [[_cell(v) for v in row.values()] for row in rows] == documented_rows(output)
            # Once committed, the next request sees it: the reader is live, not a snapshot taken at start.
            rows = await query(client, base, live_db, sql)
            assert "live:pending" in {row["session_key"] for row in rows}
            write = await client.get(f"{base}/{live_db.stem}.json", params={"sql": "DELETE FROM messages"})
            assert write.status_code == 400
