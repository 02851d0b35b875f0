"""Inspection commands: ``doctor``, ``sessions``, ``show``, ``sql``, ``datasette``.

None of them changes the database: ``doctor`` opens it without migrating, ``sessions`` and ``show``
refuse an out-of-date schema instead of upgrading it, and ``sql`` and datasette open the file read-only.
"""

from __future__ import annotations

import csv
import json
import signal
import subprocess
import sys
import tempfile
from dataclasses import asdict
from pathlib import Path
from typing import Any

import typer
from rich.markup import escape
from rich.table import Table
from rich.tree import Tree
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncConnection

from openclaw_ctx import registry
from openclaw_ctx.cli.app import CliState, console, err_console, run, state_of
from openclaw_ctx.cli.commands.db import schema_state
from openclaw_ctx.config import OpenClawConfig, default_config_path
from openclaw_ctx.contract import EngineContext, supports
from openclaw_ctx.errors import NotFoundError, StoreError
from openclaw_ctx.inspect import doctor as doctor_mod
from openclaw_ctx.inspect.datasette import INSTALL_HINT, datasette_executable, metadata_for, serve_command
from openclaw_ctx.inspect.doctor import EngineFacts
from openclaw_ctx.inspect.sql import QueryLimitError, QueryResult, query
from openclaw_ctx.store import repo
from openclaw_ctx.store.store import Store

__all__ = ["engine_facts", "register"]

_STYLE = {"ok": "green", "warn": "yellow", "fail": "bold red"}
_TABLE_ROWS = 1000
_ROW_CAP = 100_000
_TIMEOUT_S = 60.0


# --- doctor --------------------------------------------------------------------------------------


async def engine_facts(config: OpenClawConfig | None, store: Store | None) -> EngineFacts:
    """What the registry says about the slot's engine, for the doctor (resolved against `store`)."""
    selected, source = config.slot_engine() if config is not None else ("legacy", "default")
    registry.ensure_engines_loaded()
    reg = registry.get_registry()
    outcome: dict[str, str | None] = {}
    try:
        resolved = await registry.resolve_context_engine(config, EngineContext(store=store, openclaw_config=config))
    except Exception as exc:  # the default engine itself is broken: that is exactly what doctor reports
        outcome["resolve_error"] = f"{type(exc).__name__}: {exc}"
    else:
        outcome.update(active=resolved.active_id, owner=resolved.owner, fallback_reason=resolved.fallback_reason)
        if supports(resolved.engine, "dispose"):
            await resolved.engine.dispose()
    # Listed after resolving: resolution may have quarantined the selected engine.
    engines = [
        {"id": e.engine_id, "owner": e.owner, "lifecycle": e.lifecycle, "selected": e.engine_id == selected}
        for e in reg.list_engines()
    ]
    quarantines = [asdict(q) for q in registry.list_quarantines()]
    return EngineFacts(selected, source, dict(reg.load_errors), engines, quarantines, **outcome)


def doctor(
    ctx: typer.Context,
    as_json: bool = typer.Option(False, "--json", help="Machine-readable output."),
    deep: bool = typer.Option(False, "--deep", help="Also verify the lossless summary DAG (slower)."),
) -> None:
    """Check the engine slot, registered engines, quarantines, database, schema and tokenizer. Exit 1 if broken."""
    state = state_of(ctx)
    default_config = state.config_path or default_config_path()
    report = run(doctor_mod.diagnose(state.db, state.config, default_config, engine_facts, deep=deep))
    if as_json:
        print(json.dumps(report.to_json(), ensure_ascii=False, default=str))
    else:
        table = Table(title="openclaw-ctx doctor", show_lines=False)
        for column in ("check", "status", "detail"):
            table.add_column(column, overflow="fold")
        for c in report.checks:
            table.add_row(c.name, f"[{_STYLE[c.status]}]{c.status}[/]", c.detail)
        console.print(table)
        engines = _table("registered engines", ["id", "owner", "lifecycle", "selected"], report.engines)
        console.print(engines)
        if report.quarantines:
            console.print(_table("quarantined", ["engine_id", "owner", "operation", "reason"], report.quarantines))
    if not report.ok:
        raise typer.Exit(1)


def _table(title: str, columns: list[str], rows: list[dict[str, Any]]) -> Table:
    table = Table(title=title)
    for column in columns:
        table.add_column(column, overflow="fold")
    for row in rows:
        table.add_row(*(_cell(row.get(c)) for c in columns))
    return table


def _cell(value: Any, width: int | None = None) -> str:
    if value is None:
        return ""
    if isinstance(value, bytes):
        return f"x'{value.hex()}'"
    out = str(value)
    if width is not None and len(out) > width:
        out = out[: width - 1] + "…"
    return out.replace("[", r"\[")


# --- sessions / show -----------------------------------------------------------------------------


async def _open_existing(state: CliState) -> Store:
    if not state.db.exists():
        raise StoreError(f"{state.db}: no database file")
    return await Store.open(state.db, upgrade=False)


_SESSIONS_SQL = text(
    """
    SELECT s.session_key, s.session_id, s.status, s.engine_id,
           (SELECT count(*) FROM messages AS m WHERE m.session_id = s.session_id) AS messages,
           (SELECT coalesce(sum(ci.token_count), 0) FROM context_items AS ci
             WHERE ci.session_id = s.session_id) AS context_tokens,
           s.created_at, s.parent_session_id, s.rotation_reason, s.session_file
    FROM sessions AS s
    WHERE (:key IS NULL OR s.session_key = :key) AND (:all OR s.status = 'active')
    ORDER BY s.session_key, s.created_at, s.session_id
    """
)


async def _sessions(state: CliState, key: str | None, include_all: bool) -> list[dict[str, Any]]:
    async with await _open_existing(state) as store, store.read() as conn:
        rows = await conn.execute(_SESSIONS_SQL, {"key": key, "all": int(include_all)})
        return [dict(r._mapping) for r in rows]


def sessions(
    ctx: typer.Context,
    key: str = typer.Option(None, "--key", "-k", help="Only this session key."),
    include_all: bool = typer.Option(False, "--all", "-a", help="Include rotated and archived sessions."),
    as_json: bool = typer.Option(False, "--json", help="Machine-readable output."),
) -> None:
    """List sessions (active ones unless --all) with message counts and context tokens."""
    rows = run(_sessions(state_of(ctx), key, include_all))
    if as_json:
        print(json.dumps(rows, ensure_ascii=False))
        return
    columns = ["session_key", "session_id", "status", "engine_id", "messages", "context_tokens", "created_at"]
    console.print(_table(f"sessions ({len(rows)})", columns, rows))


async def _resolve_session(conn: AsyncConnection, ref: str) -> repo.SessionRow:
    try:
        return await repo.get_session(conn, ref)
    except NotFoundError:
        pass
    active = await repo.active_session(conn, ref)
    if active is not None:
        return active
    chain = await repo.session_chain(conn, ref)
    if chain:
        return chain[-1]
    raise NotFoundError(f"no session with id or key {ref!r}")


_MESSAGES_SQL = text(
    """
    SELECT * FROM (
        SELECT message_id, seq, entry_id, role, tool_name, token_count, created_at, text, message_json
        FROM messages WHERE session_id = :sid ORDER BY seq DESC LIMIT :limit
    ) ORDER BY seq
    """
)
_CONTEXT_SQL = text(
    """
    SELECT * FROM (
        SELECT ci.ordinal, ci.item_type, ci.message_id, ci.summary_id,
               CASE WHEN ci.item_type = 'message' THEN m.role ELSE 'summary:' || su.kind END AS role,
               su.depth AS summary_depth, ci.token_count,
               CASE WHEN ci.item_type = 'message' THEN m.text ELSE su.content END AS text
        FROM context_items AS ci
        LEFT JOIN messages AS m ON m.message_id = ci.message_id
        LEFT JOIN summaries AS su ON su.summary_id = ci.summary_id
        WHERE ci.session_id = :sid ORDER BY ci.ordinal DESC LIMIT :limit
    ) ORDER BY ordinal
    """
)


async def _show(state: CliState, ref: str, context: bool, limit: int | None) -> dict[str, Any]:
    async with await _open_existing(state) as store, store.read() as conn:
        session = await _resolve_session(conn, ref)
        params = {"sid": session.session_id, "limit": -1 if limit is None else limit}
        rows = [dict(r._mapping) for r in await conn.execute(_CONTEXT_SQL if context else _MESSAGES_SQL, params)]
    for row in rows:
        if "message_json" in row:
            row["message"] = json.loads(row.pop("message_json"))
    return {"session": asdict(session), "context" if context else "messages": rows}


def show(
    ctx: typer.Context,
    ref: str = typer.Argument(..., metavar="SESSION_ID_OR_KEY", help="A session id, or a key (its active session)."),
    context: bool = typer.Option(False, "--context", "-c", help="Show the context items the model sees instead."),
    limit: int = typer.Option(None, "--limit", "-n", min=1, help="Only the last N messages or items."),
    as_json: bool = typer.Option(False, "--json", help="Machine-readable output (full message JSON)."),
) -> None:
    """Show a session's messages in order (or, with --context, its active context items)."""
    data = run(_show(state_of(ctx), ref, context, limit))
    if as_json:
        print(json.dumps(data, ensure_ascii=False))
        return
    s = data["session"]
    title = f"{s['session_key']} · {s['session_id']} · {s['status']}"
    if context:
        columns = ["ordinal", "item_type", "role", "summary_depth", "token_count", "text"]
        rows = data["context"]
    else:
        columns = ["seq", "entry_id", "role", "tool_name", "token_count", "text"]
        rows = data["messages"]
    table = Table(title=f"{title} ({len(rows)} {'items' if context else 'messages'})")
    for column in columns:
        table.add_column(column, overflow="fold")
    for row in rows:
        table.add_row(*(_cell(row.get(c), 300 if c == "text" else None) for c in columns))
    console.print(table)


# --- sql -----------------------------------------------------------------------------------------


def _json_value(value: Any) -> Any:
    return value.hex() if isinstance(value, bytes) else value


def _print_result(result: QueryResult, fmt: str) -> None:
    if fmt == "json":
        rows = [{c: _json_value(v) for c, v in zip(result.columns, row, strict=True)} for row in result.rows]
        print(json.dumps(rows, ensure_ascii=False))
    elif fmt == "csv":
        writer = csv.writer(sys.stdout, lineterminator="\n")
        writer.writerow(result.columns)
        writer.writerows([[_json_value(v) for v in row] for row in result.rows])
    else:
        table = Table(title=f"{len(result.rows)} row(s)" + (" (more not shown)" if result.truncated else ""))
        for column in result.columns:
            table.add_column(_cell(column), overflow="fold")
        for row in result.rows:
            table.add_row(*(_cell(v) for v in row))
        console.print(table)


def _print_plan(result: QueryResult) -> None:
    root = Tree("QUERY PLAN")
    nodes: dict[int, Tree] = {0: root}
    for node_id, parent, _unused, detail in result.rows:
        nodes[node_id] = nodes.get(parent, root).add(_cell(detail))
    console.print(root)


async def _query(
    state: CliState, statement: str, explain: bool, max_rows: int | None, cap: int, seconds: float
) -> QueryResult:
    """The query, its bounds' errors naming the options that raise them."""
    try:
        return await query(state.db, statement, explain=explain, max_rows=max_rows, row_cap=cap, timeout_s=seconds)
    except QueryLimitError as exc:
        if exc.bound == "rows":
            hint = f"--max-rows {cap}); raise it with --max-rows N, or take the first N rows with --limit N"
        else:
            hint = f"--timeout {seconds:g}); raise it with --timeout SECONDS"
        raise QueryLimitError(f"{exc.detail.removesuffix(')')}, {hint}", exc.bound, exc.value) from exc


def sql(
    ctx: typer.Context,
    statement: str = typer.Argument(..., metavar='"SELECT …"', help="One read-only statement."),
    as_json: bool = typer.Option(False, "--json", help="Rows as a JSON array of objects."),
    as_csv: bool = typer.Option(False, "--csv", help="Rows as CSV with a header line."),
    explain: bool = typer.Option(False, "--explain", help="Print EXPLAIN QUERY PLAN instead of running it."),
    limit: int = typer.Option(None, "--limit", min=1, help=f"At most N rows \\[default: {_TABLE_ROWS} for tables]."),
    max_rows: int = typer.Option(
        _ROW_CAP, "--max-rows", min=1, help="Without --limit: refuse a --json/--csv result of more rows."
    ),
    timeout: float = typer.Option(_TIMEOUT_S, "--timeout", min=0.001, help="Stop the statement after SECONDS."),
) -> None:
    """Run one read-only SQL statement against the database (writes are refused before they run; Ctrl-C stops it)."""
    if as_json and as_csv:
        raise typer.BadParameter("choose one of --json and --csv")
    fmt = "json" if as_json else "csv" if as_csv else "table"
    shown = limit if limit is not None else (_TABLE_ROWS if fmt == "table" and not explain else None)
    result = run(_query(state_of(ctx), statement, explain, shown, max_rows, timeout))
    if explain and fmt == "table":
        _print_plan(result)
    else:
        _print_result(result, fmt)


# --- datasette -----------------------------------------------------------------------------------


async def _servable(db: Path) -> str | None:
    """Refuse what datasette should not be pointed at; a warning when the schema predates the FTS declarations."""
    state = await schema_state(db)
    if state.known and not state.up_to_date:
        return (
            f"{db}: schema at {state.current or 'empty'}, head is {state.head}; datasette's search works through the "
            "metadata, but run `openclaw-ctx db upgrade` so other SQL tools (sqlite-utils) find the full-text tables"
        )
    return None


def datasette(
    ctx: typer.Context,
    port: int = typer.Option(8001, "--port", "-p", min=0, max=65535, help="Port on 127.0.0.1 (0: any free one)."),
    open_browser: bool = typer.Option(False, "--open", "-o", help="Open the page in a browser."),
    print_metadata: bool = typer.Option(
        False, "--print-metadata", help="Print the metadata for this database (for your own `datasette -m`) and exit."
    ),
    extra: list[str] = typer.Argument(
        None, metavar="[-- DATASETTE_OPTIONS]", help="More `datasette serve` options, after `--`.", show_default=False
    ),
) -> None:
    """Browse and search the database in Datasette, read-only on 127.0.0.1.

    Full-text search on messages and summaries, facets, and docs/sql.md's queries as canned queries,
    from the metadata shipped with openclaw-ctx.
    Datasette is an optional extra: pip install 'openclaw-ctx\\[datasette]'.
    """
    db = state_of(ctx).db
    if print_metadata:
        print(json.dumps(metadata_for(db), indent=2, ensure_ascii=False))
        return
    warning = run(_servable(db))
    if warning:
        err_console.print(f"[yellow]warning:[/] {warning}", highlight=False, soft_wrap=True)
    executable = datasette_executable()
    if executable is None:
        err_console.print(
            f"[bold red]error:[/] datasette is not installed: {escape(INSTALL_HINT)}", highlight=False, soft_wrap=True
        )
        raise typer.Exit(1)
    with tempfile.TemporaryDirectory(prefix="openclaw-ctx-datasette-") as tmp:
        metadata = Path(tmp) / "metadata.json"
        metadata.write_text(json.dumps(metadata_for(db), ensure_ascii=False), encoding="utf-8")
        command = serve_command(executable, db, metadata, port=port, open_browser=open_browser, extra=extra or [])
        if port:
            err_console.print(f"serving {db} read-only at http://127.0.0.1:{port}/{db.stem} (Ctrl-C stops it)")
        child = subprocess.Popen(command)
        # A SIGTERM for this process is for datasette too: never leave it serving on its own.
        signal.signal(signal.SIGTERM, lambda signum, _frame: child.send_signal(signum))
        try:
            code = child.wait()
        except KeyboardInterrupt:  # the terminal sent Ctrl-C to datasette too: let it finish
            code = child.wait()
    raise typer.Exit(code)


def register(app: typer.Typer) -> None:
    """Add the inspection commands to `app`."""
    app.command("doctor")(doctor)
    app.command("sessions")(sessions)
    app.command("show")(show)
    app.command("sql")(sql)
    app.command("datasette")(datasette)
