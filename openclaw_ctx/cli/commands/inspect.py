"""Inspection commands: ``doctor``, ``sessions``, ``show``, ``sql``.

None of them changes the database: ``doctor`` opens it without migrating, ``sessions`` and ``show``
refuse an out-of-date schema instead of upgrading it, and ``sql`` opens the file read-only.
"""

from __future__ import annotations

import csv
import importlib
import inspect as pyinspect
import json
import sys
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Literal

import typer
from rich.table import Table
from rich.tree import Tree
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncConnection

from openclaw_ctx import registry
from openclaw_ctx.cli.app import CliState, console, run, state_of
from openclaw_ctx.config import OpenClawConfig, default_config_path
from openclaw_ctx.contract import EngineContext, supports
from openclaw_ctx.errors import NotFoundError, OpenClawCtxError, StoreError
from openclaw_ctx.inspect.sql import QueryResult, query
from openclaw_ctx.store import repo
from openclaw_ctx.store.store import Store
from openclaw_ctx.tokens import tokenizer_status

__all__ = ["Check", "DoctorReport", "diagnose", "register"]

Status = Literal["ok", "warn", "fail"]
_STYLE = {"ok": "green", "warn": "yellow", "fail": "bold red"}
_TABLE_ROWS = 1000


@dataclass
class Check:
    """One line of the doctor's report."""

    name: str
    status: Status
    detail: str


@dataclass
class DoctorReport:
    """Everything ``doctor`` found; ``ok`` is False when any check failed."""

    checks: list[Check] = field(default_factory=list)
    engines: list[dict[str, Any]] = field(default_factory=list)
    quarantines: list[dict[str, Any]] = field(default_factory=list)
    facts: dict[str, Any] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        """True unless a check failed."""
        return all(c.status != "fail" for c in self.checks)

    def add(self, name: str, status: Status, detail: str) -> None:
        """Record a check."""
        self.checks.append(Check(name, status, detail))


# --- doctor --------------------------------------------------------------------------------------


def _exists(path: Path) -> bool:
    return path.exists()


async def _check_database(report: DoctorReport, path: Path) -> Store | None:
    report.facts["database"] = str(path)
    if not _exists(path):
        report.add("database", "warn", f"{path} does not exist yet (the first write creates it)")
        return None
    try:
        store = await Store.connect(path)
    except OpenClawCtxError as exc:
        report.add("database", "fail", exc.detail)
        return None
    try:
        state = await store.schema_state()
        report.facts.update(schema_revision=state.current, schema_head=state.head)
        async with store.read() as conn:
            mode = await conn.scalar(text("PRAGMA journal_mode"))
            damage = [str(r[0]) for r in await conn.execute(text("PRAGMA quick_check(5)"))]
    except OpenClawCtxError as exc:
        await store.engine.dispose()
        report.add("database", "fail", exc.detail)
        return None
    report.facts["journal_mode"] = mode
    ok = damage == ["ok"]
    report.add("database", "ok" if ok else "fail", str(path) if ok else f"{path}: damaged: {'; '.join(damage)}")
    if state.up_to_date:
        report.add("schema", "ok", f"revision {state.current} (head)")
    else:
        report.add(
            "schema", "fail", f"revision {state.current or 'empty'}, head {state.head}: run `openclaw-ctx db upgrade`"
        )
    report.add("WAL", "ok" if mode == "wal" else "warn", f"journal_mode={mode}")
    if ok and state.up_to_date:
        return store
    await store.engine.dispose()  # engines must not be handed a store they cannot use
    return None


async def _check_engine(report: DoctorReport, config: OpenClawConfig | None, store: Store | None) -> None:
    selected, source = config.slot_engine() if config is not None else ("legacy", "default")
    registry.ensure_engines_loaded()
    reg = registry.get_registry()
    for name, error in sorted(reg.load_errors.items()):
        # A broken plugin the slot does not select is worth a warning; the selected one is fatal.
        report.add(f"plugin {name}", "fail" if name == selected else "warn", f"entry point failed to load: {error}")
    try:
        resolved = await registry.resolve_context_engine(config, EngineContext(store=store, openclaw_config=config))
    except Exception as exc:  # the default engine itself is broken: that is exactly what doctor reports
        report.add("engine", "fail", f"{selected} ({source}): {type(exc).__name__}: {exc}")
    else:
        active = resolved.active_id
        report.facts.update(engine_selected=selected, engine_source=source, engine_active=active)
        if resolved.fallback_reason:
            report.add("engine", "fail", f"{selected} ({source}) is {resolved.fallback_reason}; running {active}")
        else:
            report.add("engine", "ok", f"{active} ({source}, owner {resolved.owner})")
        if supports(resolved.engine, "dispose"):
            await resolved.engine.dispose()
    report.engines = [
        {"id": e.engine_id, "owner": e.owner, "lifecycle": e.lifecycle, "selected": e.engine_id == selected}
        for e in reg.list_engines()
    ]
    report.quarantines = [asdict(q) for q in registry.list_quarantines()]


async def _deep_check(report: DoctorReport, store: Store | None) -> None:
    try:
        deep_check = getattr(importlib.import_module("engines.lossless.dag"), "deep_check")  # noqa: B009
    except (ImportError, AttributeError) as exc:
        report.add("deep check", "warn", f"deep check unavailable ({exc})")
        return
    if store is None:
        report.add("deep check", "warn", "skipped: no usable database")
        return
    result = deep_check(store)
    problems = [str(p) for p in (await result if pyinspect.isawaitable(result) else result)]
    report.facts["deep_problems"] = problems
    if problems:
        report.add("deep check", "fail", f"{len(problems)} problem(s): " + "; ".join(problems[:5]))
    else:
        report.add("deep check", "ok", "summary DAG and context items are consistent")


def _check_tokenizer(report: DoctorReport) -> None:
    status = tokenizer_status()
    report.facts["tokenizer"] = asdict(status)
    if status.exact:
        report.add("tokenizer", "ok", f"{status.counter} ({status.detail})")
    else:
        report.add("tokenizer", "warn", f"HEURISTIC {status.counter}: token counts are estimates ({status.detail})")


async def diagnose(state: CliState, *, deep: bool = False) -> DoctorReport:
    """Run every doctor check for the database and config the CLI state names."""
    report = DoctorReport()
    config: OpenClawConfig | None = None
    try:
        config = state.config()
        where = config.source_path or f"{state.config_path or default_config_path()} (absent: defaults)"
        report.add("config", "ok", where)
    except OpenClawCtxError as exc:
        report.add("config", "fail", exc.detail)
    store = await _check_database(report, state.db)
    try:
        await _check_engine(report, config, store)
        _check_tokenizer(report)
        if deep:
            await _deep_check(report, store)
    finally:
        if store is not None:
            await store.engine.dispose()
    return report


def doctor(
    ctx: typer.Context,
    as_json: bool = typer.Option(False, "--json", help="Machine-readable output."),
    deep: bool = typer.Option(False, "--deep", help="Also verify the lossless summary DAG (slower)."),
) -> None:
    """Check the engine slot, registered engines, quarantines, database, schema and tokenizer. Exit 1 if broken."""
    report = run(diagnose(state_of(ctx), deep=deep))
    if as_json:
        payload = {"ok": report.ok, **asdict(report)}
        print(json.dumps(payload, ensure_ascii=False, default=str))
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
    if not _exists(state.db):
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


def sql(
    ctx: typer.Context,
    statement: str = typer.Argument(..., metavar='"SELECT …"', help="One read-only statement."),
    as_json: bool = typer.Option(False, "--json", help="Rows as a JSON array of objects."),
    as_csv: bool = typer.Option(False, "--csv", help="Rows as CSV with a header line."),
    explain: bool = typer.Option(False, "--explain", help="Print EXPLAIN QUERY PLAN instead of running it."),
    limit: int = typer.Option(None, "--limit", min=1, help=f"At most N rows \\[default: {_TABLE_ROWS} for tables]."),
) -> None:
    """Run one read-only SQL statement against the database (writes are refused before they run)."""
    if as_json and as_csv:
        raise typer.BadParameter("choose one of --json and --csv")
    fmt = "json" if as_json else "csv" if as_csv else "table"
    max_rows = limit if limit is not None else (_TABLE_ROWS if fmt == "table" and not explain else None)
    result = run(query(state_of(ctx).db, statement, explain=explain, max_rows=max_rows))
    if explain and fmt == "table":
        _print_plan(result)
    else:
        _print_result(result, fmt)


def register(app: typer.Typer) -> None:
    """Add the inspection commands to `app`."""
    app.command("doctor")(doctor)
    app.command("sessions")(sessions)
    app.command("show")(show)
    app.command("sql")(sql)
