"""Moving history in and out: `import` (OpenClaw transcripts, agent dirs and stores, lossless-claw's lcm.db)
and `export`."""

from __future__ import annotations

import json
from dataclasses import asdict
from pathlib import Path
from typing import Any

import typer
from rich import box
from rich.progress import (
    BarColumn,
    DownloadColumn,
    MofNCompleteColumn,
    Progress,
    TaskID,
    TextColumn,
    TimeRemainingColumn,
)
from rich.table import Table

from openclaw_ctx.cli.app import CliState, console, err_console, open_store, run, state_of
from openclaw_ctx.transcripts import ExportReport, ImportProgress, ImportReport, export_session, import_paths
from openclaw_ctx.transcripts.lcm_db import LcmImportReport, import_lcm_db

__all__ = ["register"]

EXIT_SKIPPED = 2
_SHOW_SKIPPED = 50


def register(app: typer.Typer) -> None:
    """Add `import` and `export` to `app`."""
    app.command("import")(import_command)
    app.command("export")(export_command)


def import_command(
    ctx: typer.Context,
    paths: list[Path] = typer.Argument(
        None,
        help="JSONL transcripts, OpenClaw sessions/ or agent directories, an agents/ root, or openclaw-agent.sqlite.",
        show_default=False,
    ),
    lcm_db: Path | None = typer.Option(
        None,
        "--lcm-db",
        help="lossless-claw's lcm.db: its summaries, DAG and context onto the sessions imported (after PATHS).",
    ),
    as_json: bool = typer.Option(False, "--json", help="Print the report as JSON on stdout."),
) -> None:
    """Import OpenClaw transcripts; re-importing the same files adds nothing.

    Session keys come from sessions.json; a bare file continues its parent's key, or gets `file:<sessionId>`.

    In a directory, the archives /reset, /new and deletion leave (`<id>.jsonl.reset.<stamp>`, `.deleted.`,
    zstd too) import as sessions; trajectory sidecars, and backups or checkpoints of a transcript that is
    there, are left out with a note.

    OpenClaw 2026.7+ keeps transcripts in `agents/<id>/agent/openclaw-agent.sqlite`: every session there
    (live, deleted-session archives, cold storage) imports, read-only while the gateway runs, keyed as
    the host keys it; a JSONL file of a session the store also holds is its legacy copy (left out).

    `--lcm-db lcm.db` brings lossless-claw's summary DAG and context onto those sessions: matched by
    session id and transcript entry id (else stable event key), token counts counted again; whatever
    matches nothing is reported and left out.

    Exit status 2 when lines or files were skipped (each listed as file:line: reason and kept verbatim)
    or lcm.db rows were left out (each named).
    """
    state = state_of(ctx)
    if not paths and lcm_db is None:
        raise typer.BadParameter("give transcripts to import, --lcm-db, or both", param_hint="PATHS")
    report, lcm = run(_import(state, paths or [], lcm_db, show_progress=not as_json))
    if as_json:
        data = report.to_json() | ({"lcm": _lcm_json(lcm)} if lcm is not None else {})
        console.print_json(json.dumps(data, ensure_ascii=False))
    else:
        if paths:
            console.print(_import_table(report))
        if lcm is not None:
            console.print(_lcm_table(lcm))
    for line in lcm.problems if lcm is not None else []:
        err_console.print(f"[yellow]lcm.db[/] {line}", highlight=False, markup=True, soft_wrap=True)
    for line in report.notes[:_SHOW_SKIPPED]:
        err_console.print(f"[dim]left out[/] {line}", highlight=False, markup=True, soft_wrap=True)
    if len(report.notes) > _SHOW_SKIPPED:
        err_console.print(f"… and {len(report.notes) - _SHOW_SKIPPED} more files left out", highlight=False)
    for line in report.skipped[:_SHOW_SKIPPED]:
        err_console.print(f"[yellow]skipped[/] {line}", highlight=False, markup=True, soft_wrap=True)
    if len(report.skipped) > _SHOW_SKIPPED:
        err_console.print(f"… and {len(report.skipped) - _SHOW_SKIPPED} more skipped lines", highlight=False)
    if not report.clean or (lcm is not None and not lcm.clean):
        raise typer.Exit(EXIT_SKIPPED)


async def _import(
    state: CliState, paths: list[Path], lcm_db: Path | None, *, show_progress: bool
) -> tuple[ImportReport, LcmImportReport | None]:
    store = await open_store(state, bulk_write=True)
    progress = Progress(
        TextColumn("[bold]{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        DownloadColumn(),
        TimeRemainingColumn(),
        console=err_console,
        transient=True,
        disable=not (show_progress and err_console.is_terminal),
    )
    tasks: dict[str, TaskID] = {}

    def update(event: ImportProgress) -> None:
        if not tasks:
            tasks["files"] = progress.add_task("files", total=event.files_total)
            tasks["bytes"] = progress.add_task("bytes", total=event.bytes_total)
        progress.update(tasks["files"], completed=event.files_done, description=f"files ({Path(event.file).name})")
        progress.update(tasks["bytes"], completed=event.bytes_done)

    try:
        with progress:
            report = await import_paths(store, paths, progress=update) if paths else ImportReport()
        return report, await import_lcm_db(store, lcm_db) if lcm_db is not None else None
    finally:
        await store.close()


def _lcm_json(report: LcmImportReport) -> dict[str, Any]:
    return {"path": report.path, "conversations": [asdict(c) for c in report.conversations], "orphans": report.orphans}


def _lcm_table(report: LcmImportReport) -> Table:
    table = Table(title=f"lcm.db: {len(report.conversations)} conversation(s)", box=box.SIMPLE_HEAD)
    table.add_column("session", no_wrap=True)
    table.add_column("session key", overflow="fold")
    for column in ("messages", "matched", "summaries", "new", "context"):
        table.add_column(column, justify="right", no_wrap=True)
    for c in report.conversations:
        table.add_row(
            c.session_id[:8],
            c.session_key or "—",
            f"{c.messages:,}",
            f"{c.messages_matched:,}",
            f"{c.summaries:,}",
            f"{c.summaries_new:,}",
            f"{c.context_items:,}",
        )
    return table


def _import_table(report: ImportReport) -> Table:
    table = Table(title=f"imported {len(report.files)} file(s)", box=box.SIMPLE_HEAD)
    table.add_column("session", no_wrap=True)
    table.add_column("session key", overflow="fold")
    for column in ("entries", "new", "dup", "sums", "skipped"):
        table.add_column(column, justify="right", no_wrap=True)
    for f in report.files:
        table.add_row(
            (f.session_id or Path(f.path).name)[:8],
            f.session_key or "—",
            f"{f.entries:,}",
            f"{f.messages_new:,}",
            f"{f.messages_duplicate:,}",
            f"{f.summaries_new:,}",
            "file" if f.error else f"{f.skipped_lines:,}",
        )
    table.add_section()
    totals = ("entries", "messages_new", "messages_duplicate", "summaries_new")
    table.add_row("total", "", *(f"{report.total(name):,}" for name in totals), f"{len(report.skipped):,}")
    table.caption = "new/dup: messages written now / already stored; sums: summaries from compaction entries"
    return table


def export_command(
    ctx: typer.Context,
    out: Path = typer.Option(..., "--out", "-o", help="Directory (--key), or a .jsonl file or directory (--session)."),
    key: str = typer.Option(None, "--key", "-k", help="Export every session of this key's chain, plus sessions.json."),
    session: str = typer.Option(None, "--session", "-s", help="Export one session by id."),
    force: bool = typer.Option(False, "--force", "-f", help="Replace transcript files that already exist."),
    as_json: bool = typer.Option(False, "--json", help="Print the report as JSON on stdout."),
) -> None:
    """Write stored sessions as OpenClaw JSONL (v3) transcripts.

    An existing transcript file is replaced only with --force, and never the database itself; a refused export writes nothing.
    """  # noqa: E501
    if (key is None) == (session is None):
        raise typer.BadParameter("give exactly one of --key and --session")
    if key is not None and out.suffix.lower() == ".jsonl" and not out.is_dir():
        # A key's chain is one transcript per session plus sessions.json: a directory, never one file.
        raise typer.BadParameter(
            f"--key writes one transcript per session of the key's chain, plus sessions.json, into a directory; "
            f"{out} looks like a file name. Give a directory, or --session ID --out {out} for one transcript.",
            param_hint="--out",
        )
    state = state_of(ctx)
    report = run(_export(state, key, session, out, force))
    if as_json:
        console.print_json(json.dumps(report.model_dump(by_alias=True), ensure_ascii=False))
        return
    for f in report.files:
        console.print(
            f"wrote {f.path} ({f.entries:,} entries, {f.messages:,} messages)", highlight=False, soft_wrap=True
        )
    if report.sessions_json:
        console.print(f"wrote {report.sessions_json} (key {report.session_key})", highlight=False, soft_wrap=True)


async def _export(state: CliState, key: str | None, session: str | None, out: Path, force: bool) -> ExportReport:
    store = await open_store(state)
    try:
        return await export_session(store, session_key=key, session_id=session, out=out, force=force)
    finally:
        await store.close()
