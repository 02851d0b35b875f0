"""Moving history between engines: `migrate` (legacy ⇄ lossless-claw) and `backfill` (bulk DAG building)."""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TypeVar

import typer
from rich import box
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TaskID, TextColumn, TimeRemainingColumn
from rich.table import Table

from engines.lossless.backfill import DEFAULT_BATCH, BackfillProgress, BackfillReport, backfill_key, pending_backfill
from engines.lossless.config import LosslessConfig, resolve_config
from engines.lossless.engine import DEFAULT_TOKEN_BUDGET
from engines.lossless.ingest import ENGINE_ID as LOSSLESS
from openclaw_ctx.cli.app import CliState, console, err_console, open_store, run, state_of
from openclaw_ctx.config import CompactionSettings
from openclaw_ctx.errors import OpenClawCtxError, StoreError
from openclaw_ctx.ops.migrate import (
    ENGINES,
    MigrationPlan,
    MigrationResult,
    current_engine,
    keys_to_migrate,
    migrate_key,
    plan_migration,
)
from openclaw_ctx.store import repo
from openclaw_ctx.store.store import Store
from openclaw_ctx.summarize.base import Summarizer

__all__ = ["EXIT_UNFINISHED", "register"]

T = TypeVar("T")

EXIT_UNFINISHED = 3


def register(app: typer.Typer) -> None:
    """Add `migrate` and `backfill` to `app`."""
    app.command("migrate")(migrate)
    app.command("backfill")(backfill)


@dataclass(frozen=True)
class _Settings:
    lossless: LosslessConfig
    compaction: CompactionSettings
    budget: int
    batch: int


def _settings(state: CliState, budget: int, batch: int) -> _Settings:
    config = state.config()
    entry = config.entry(LOSSLESS)
    return _Settings(resolve_config(entry.config if entry else None), config.agents.defaults.compaction, budget, batch)


def _keys(key: str | None, all_keys: bool) -> None:
    if (key is None) == (not all_keys):
        raise typer.BadParameter("give exactly one of --key and --all")


def _progress(enabled: bool) -> tuple[Progress, Callable[[BackfillProgress], None]]:
    progress = Progress(
        TextColumn("[bold]{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("{task.fields[summaries]} summaries"),
        TimeRemainingColumn(),
        console=err_console,
        transient=True,
        disable=not (enabled and err_console.is_terminal),
    )
    tasks: dict[str, TaskID] = {}

    def update(event: BackfillProgress) -> None:
        if event.session_key not in tasks:
            tasks[event.session_key] = progress.add_task(event.session_key, total=event.items_total, summaries=0)
        task = tasks[event.session_key]
        progress.update(task, completed=event.items_done, total=event.items_total, summaries=event.summaries_created)

    return progress, update


async def _each_key(
    state: CliState,
    key: str | None,
    select: Callable[[Store], Awaitable[list[str]]],
    work: Callable[[Store, str], Awaitable[T]],
) -> tuple[list[T], list[str]]:
    """Run `work(store, key)` for one key or every selected key; with --all a failing key is reported and skipped."""
    if not state.db.exists():
        raise StoreError(f"{state.db}: no database file")
    store = await open_store(state)
    try:
        keys = [key] if key is not None else await select(store)
        done: list[T] = []
        failed: list[str] = []
        for k in keys:
            try:
                done.append(await work(store, k))
            except OpenClawCtxError as exc:
                if key is not None:
                    raise
                failed.append(f"{k}: {exc.detail}")
        return done, failed
    finally:
        await store.close()


# --- migrate ---------------------------------------------------------------------------------------


def migrate(
    ctx: typer.Context,
    to: str = typer.Option(..., "--to", "-t", help=f"Target engine: {' or '.join(ENGINES)}."),
    key: str = typer.Option(None, "--key", "-k", help="Migrate this session key."),
    all_keys: bool = typer.Option(False, "--all", "-a", help="Migrate every session key with an active session."),
    dry_run: bool = typer.Option(False, "--dry-run", "-n", help="Print what would change; write nothing."),
    budget: int = typer.Option(DEFAULT_TOKEN_BUDGET, "--budget", "-b", min=1_000, help="Context window in tokens."),
    batch: int = typer.Option(DEFAULT_BATCH, "--batch", min=1, help="Context items per batch (to lossless-claw)."),
    as_json: bool = typer.Option(False, "--json", help="Print the plan or the result as JSON."),
) -> None:
    """Move a session key's active context to another engine's projection, rotating its session.

    legacy → lossless-claw builds the DAG from the raw messages, adopting the legacy summary; lossless-claw → legacy writes one summary of the DAG view and keeps the recent messages.

    Every message stays stored and reachable. Select the engine for new turns in openclaw.json (plugins.slots.contextEngine).
    """  # noqa: E501
    _keys(key, all_keys)
    state = state_of(ctx)
    settings = _settings(state, budget, batch)
    if to not in ENGINES:
        raise typer.BadParameter(f"--to must be one of {', '.join(ENGINES)}, got {to!r}")
    progress, update = _progress(not as_json)

    async def one(store: Store, k: str) -> MigrationPlan | MigrationResult:
        if dry_run:
            return await plan_migration(
                store, k, to, lossless=settings.lossless, settings=settings.compaction, budget=budget
            )
        return await migrate_key(
            store,
            k,
            to,
            lossless=settings.lossless,
            settings=settings.compaction,
            summarizer=_summarizer(),
            budget=budget,
            batch=batch,
            progress=update,
        )

    with progress:
        done, failed = run(_each_key(state, key, keys_to_migrate, one))
    if as_json:
        print(json.dumps({"dryRun": dry_run, "keys": [d.to_json() for d in done], "failed": failed}, indent=2))
    else:
        _print_migration(done, dry_run, to)
    for line in failed:
        err_console.print(f"[red]failed[/] {line}", highlight=False, soft_wrap=True)
    if not dry_run:
        _slot_hint(state, to)
    if failed:
        raise typer.Exit(1)


def _slot_hint(state: CliState, to: str) -> None:
    """Say so when openclaw.json would run new turns on another engine than the one migrated to."""
    slot, source = state.config().slot_engine()
    if slot != to:
        err_console.print(
            f"note: new turns run on {slot!r} ({source} in openclaw.json plugins.slots.contextEngine); "
            f"select {to!r} there to continue these keys on it",
            highlight=False,
            soft_wrap=True,
        )


def _summarizer() -> Summarizer:
    from openclaw_ctx.summarize import default_summarizer

    return default_summarizer()


def _print_migration(done: list[MigrationPlan | MigrationResult], dry_run: bool, to: str) -> None:
    table = Table(title=("dry run: nothing written" if dry_run else f"migrated to {to}"), box=box.SIMPLE_HEAD)
    for column in ("session key", "from", "items", "tokens", "what" if dry_run else "result"):
        table.add_column(column, overflow="fold", justify="right" if column in ("items", "tokens") else "left")
    for d in done:
        plan = d.plan if isinstance(d, MigrationResult) else d
        if isinstance(d, MigrationResult) and d.migrated:
            outcome = (
                f"session {str(d.successor_session_id)[:8]}: {d.summaries_created} summary(ies), "
                f"{plan.tokens:,} → {d.tokens_after or 0:,} tokens"
            )
        else:
            outcome = plan.action
        table.add_row(plan.session_key, plan.source, f"{plan.items:,}", f"{plan.tokens:,}", outcome)
    console.print(table)


# --- backfill --------------------------------------------------------------------------------------


async def _backfill_keys(store: Store) -> list[str]:
    """Keys not yet on lossless-claw, and keys whose backfill was interrupted."""
    out = []
    for k in await keys_to_migrate(store):
        async with store.read() as conn:
            session = await repo.active_session(conn, k)
            pending = await pending_backfill(conn, k)
        if session is not None and (current_engine(session) != LOSSLESS or pending is not None):
            out.append(k)
    return out


def backfill(
    ctx: typer.Context,
    key: str = typer.Option(None, "--key", "-k", help="Backfill this session key."),
    all_keys: bool = typer.Option(
        False, "--all", "-a", help="Every key not yet on lossless-claw, and every interrupted backfill."
    ),
    budget: int = typer.Option(DEFAULT_TOKEN_BUDGET, "--budget", "-b", min=1_000, help="Context window in tokens."),
    batch: int = typer.Option(DEFAULT_BATCH, "--batch", min=1, help="Context items read and summarised per batch."),
    stop_after: int = typer.Option(
        None, "--stop-after", min=1, help="Stop after this many batches (run again to resume)."
    ),
    as_json: bool = typer.Option(False, "--json", help="Print the report as JSON."),
) -> None:
    """Build the lossless-claw DAG over a very long history in bounded batches; resumable.

    Each batch commits its summaries and its progress; after an interrupt (Ctrl-C, a crash, or --stop-after) the same command resumes from the last committed batch, with the batch size and budget it started with. The last step rotates the key to a lossless-claw session.

    Exit status 3 when a backfill stopped before the end.
    """  # noqa: E501
    _keys(key, all_keys)
    state = state_of(ctx)
    settings = _settings(state, budget, batch)
    progress, update = _progress(not as_json)

    async def one(store: Store, k: str) -> BackfillReport:
        return await backfill_key(
            store,
            k,
            config=settings.lossless,
            summarizer=_summarizer(),
            budget=budget,
            batch=batch,
            stop_after=stop_after,
            progress=update,
        )

    try:
        with progress:
            done, failed = run(_each_key(state, key, _backfill_keys, one))
    except KeyboardInterrupt:
        err_console.print("interrupted: every finished batch is committed; run the same command to resume")
        raise typer.Exit(130) from None
    if as_json:
        print(json.dumps({"keys": [d.to_json() for d in done], "failed": failed}, indent=2))
    else:
        console.print(_backfill_table(done))
    for line in failed:
        err_console.print(f"[red]failed[/] {line}", highlight=False, soft_wrap=True)
    if failed:
        raise typer.Exit(1)
    if any(not d.finished for d in done):
        raise typer.Exit(EXIT_UNFINISHED)


def _backfill_table(done: list[BackfillReport]) -> Table:
    table = Table(title="backfill", box=box.SIMPLE_HEAD)
    table.add_column("session key", overflow="fold")
    for column in ("items", "batches", "summaries", "depth", "tokens"):
        table.add_column(column, justify="right", no_wrap=True)
    table.add_column("state", overflow="fold")
    for d in done:
        tokens = f"{d.tokens_before:,} → {d.tokens_after:,}" if d.tokens_after is not None else f"{d.tokens_before:,}"
        status = f"done: session {str(d.successor_session_id)[:8]}" if d.finished else "; ".join(d.notes)
        if d.resumed:
            status = "resumed; " + status
        depth = "" if d.max_depth is None else str(d.max_depth)
        table.add_row(
            d.session_key, f"{d.items_total:,}", str(d.batches), str(d.summaries_created), depth, tokens, status
        )
    return table
