"""Moving history between engines: `migrate` (legacy ⇄ lossless-claw) and `backfill` (bulk DAG building).

The target engine comes through the registry and its adoption capability (`openclaw_ctx.ops.adopters`):
with lossless-claw not installed, `migrate --to legacy` still works and the rest says it is not installed.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TypeVar

import typer
from rich import box
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TaskID, TextColumn, TimeRemainingColumn
from rich.table import Table

from openclaw_ctx._ids import LEGACY_ENGINE_ID, LOSSLESS_ENGINE_ID
from openclaw_ctx.cli.app import CliState, console, err_console, open_store, run, state_of
from openclaw_ctx.config import CompactionSettings
from openclaw_ctx.contract.adoption import AdoptionProgress, AdoptionReport, AdoptsContext
from openclaw_ctx.errors import OpenClawCtxError, StoreError
from openclaw_ctx.ops.adopters import adopter_for
from openclaw_ctx.ops.migrate import (
    DEFAULT_BATCH,
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


DEFAULT_BUDGET = 128_000
"""The context window migrate and backfill shape the new projection for, unless --budget says otherwise."""


@dataclass(frozen=True)
class _Target:
    """The engine a command moves keys to: None as the adopter means legacy (the built-in compaction)."""

    engine_id: str
    adopter: AdoptsContext | None
    compaction: CompactionSettings


async def _target(state: CliState, store: Store, engine_id: str) -> _Target:
    config = state.config()
    adopter = None
    if engine_id != LEGACY_ENGINE_ID:
        adopter = await adopter_for(engine_id, store=store, config=config, summarizer=_summarizer())
    return _Target(engine_id, adopter, config.agents.defaults.compaction)


def _keys(key: str | None, all_keys: bool) -> None:
    if (key is None) == (not all_keys):
        raise typer.BadParameter("give exactly one of --key and --all")


def _progress(enabled: bool) -> tuple[Progress, Callable[[AdoptionProgress], None]]:
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

    def update(event: AdoptionProgress) -> None:
        if event.session_key not in tasks:
            tasks[event.session_key] = progress.add_task(event.session_key, total=event.items_total, summaries=0)
        task = tasks[event.session_key]
        progress.update(task, completed=event.items_done, total=event.items_total, summaries=event.summaries_created)

    return progress, update


async def _each_key(
    state: CliState,
    key: str | None,
    engine_id: str,
    select: Callable[[Store, _Target], Awaitable[list[str]]],
    work: Callable[[Store, _Target, str], Awaitable[T]],
) -> tuple[list[T], list[str]]:
    """Run `work` for one key or every selected key; with --all a failing key is reported and skipped."""
    if not state.db.exists():
        raise StoreError(f"{state.db}: no database file")
    store = await open_store(state, bulk_write=True)
    try:
        target = await _target(state, store, engine_id)
        keys = [key] if key is not None else await select(store, target)
        done: list[T] = []
        failed: list[str] = []
        for k in keys:
            try:
                done.append(await work(store, target, k))
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
    to: str = typer.Option(..., "--to", "-t", help="Target engine: legacy or lossless-claw."),
    key: str = typer.Option(None, "--key", "-k", help="Migrate this session key."),
    all_keys: bool = typer.Option(False, "--all", "-a", help="Migrate every session key with an active session."),
    dry_run: bool = typer.Option(False, "--dry-run", "-n", help="Print what would change; write nothing."),
    budget: int = typer.Option(DEFAULT_BUDGET, "--budget", "-b", min=1_000, help="Context window in tokens."),
    batch: int = typer.Option(DEFAULT_BATCH, "--batch", min=1, help="Context items per batch (to lossless-claw)."),
    as_json: bool = typer.Option(False, "--json", help="Print the plan or the result as JSON."),
) -> None:
    """Move a session key's active context to another engine's projection, rotating its session.

    legacy → lossless-claw builds the DAG from the raw messages, adopting the legacy summary; lossless-claw → legacy writes one summary of the DAG view and keeps the recent messages.

    Every message stays stored and reachable. Select the engine for new turns in openclaw.json (plugins.slots.contextEngine).
    """  # noqa: E501
    _keys(key, all_keys)
    state = state_of(ctx)
    if to not in (LEGACY_ENGINE_ID, LOSSLESS_ENGINE_ID):
        raise typer.BadParameter(f"--to must be one of {LEGACY_ENGINE_ID}, {LOSSLESS_ENGINE_ID}, got {to!r}")
    progress, update = _progress(not as_json)

    async def every_key(store: Store, _target: _Target) -> list[str]:
        return await keys_to_migrate(store)

    async def one(store: Store, target: _Target, k: str) -> MigrationPlan | MigrationResult:
        if dry_run:
            return await plan_migration(store, k, to, adopter=target.adopter, settings=target.compaction, budget=budget)
        return await migrate_key(
            store,
            k,
            to,
            adopter=target.adopter,
            settings=target.compaction,
            summarizer=_summarizer(),
            budget=budget,
            batch=batch,
            progress=update,
        )

    with progress:
        done, failed = run(_each_key(state, key, to, every_key, one))
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
            # The same counts as the dry run's plan: new summaries, and the ones adopted or folded in.
            carried = "adopted" if plan.target == LOSSLESS_ENGINE_ID else "folded in"
            outcome = (
                f"session {str(d.successor_session_id)[:8]}: {d.summaries_created} new summary(ies), "
                f"{plan.to_summarize_summaries} {carried}, {plan.tokens:,} → {d.tokens_after or 0:,} tokens"
            )
        else:
            outcome = plan.action
        table.add_row(plan.session_key, plan.source, f"{plan.items:,}", f"{plan.tokens:,}", outcome)
    console.print(table)


# --- backfill --------------------------------------------------------------------------------------


async def _backfill_keys(store: Store, target: _Target) -> list[str]:
    """Keys not yet on lossless-claw, and keys whose backfill was interrupted."""
    assert target.adopter is not None
    out = []
    for k in await keys_to_migrate(store):
        async with store.read() as conn:
            session = await repo.active_session(conn, k)
        if session is not None and (
            current_engine(session) != target.engine_id or await target.adopter.adoption_pending(k)
        ):
            out.append(k)
    return out


def backfill(
    ctx: typer.Context,
    key: str = typer.Option(None, "--key", "-k", help="Backfill this session key."),
    all_keys: bool = typer.Option(
        False, "--all", "-a", help="Every key not yet on lossless-claw, and every interrupted backfill."
    ),
    budget: int = typer.Option(DEFAULT_BUDGET, "--budget", "-b", min=1_000, help="Context window in tokens."),
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
    progress, update = _progress(not as_json)

    async def one(store: Store, target: _Target, k: str) -> AdoptionReport:
        assert target.adopter is not None
        return await target.adopter.adopt_context(
            k, budget=budget, batch=batch, reason="backfill", stop_after=stop_after, progress=update
        )

    try:
        with progress:
            done, failed = run(_each_key(state, key, LOSSLESS_ENGINE_ID, _backfill_keys, one))
    except KeyboardInterrupt:
        err_console.print("interrupted: every finished batch is committed; run the same command to resume")
        raise typer.Exit(130) from None
    if as_json:
        print(json.dumps({"keys": [d.model_dump(by_alias=True) for d in done], "failed": failed}, indent=2))
    else:
        console.print(_backfill_table(done))
    for line in failed:
        err_console.print(f"[red]failed[/] {line}", highlight=False, soft_wrap=True)
    if failed:
        raise typer.Exit(1)
    if any(not d.finished for d in done):
        raise typer.Exit(EXIT_UNFINISHED)


def _backfill_table(done: list[AdoptionReport]) -> Table:
    table = Table(title="backfill", box=box.SIMPLE_HEAD)
    table.add_column("session key", overflow="fold")
    for column in ("items", "batches", "summaries", "depth", "tokens"):
        table.add_column(column, justify="right", no_wrap=True)
    table.add_column("state", overflow="fold")
    for d in done:
        tokens = f"{d.tokens_before:,} → {d.tokens_after:,}" if d.tokens_after is not None else f"{d.tokens_before:,}"
        rotated = d.finished and d.successor_session_id != d.source_session_id
        # Unfinished or not rotated (nothing to do), the report's own notes say why.
        status = f"done: session {str(d.successor_session_id)[:8]}" if rotated else "; ".join(d.notes)
        if d.resumed:
            status = "resumed; " + status
        depth = "" if d.max_depth is None else str(d.max_depth)
        table.add_row(
            d.session_key, f"{d.items_total:,}", str(d.batches), str(d.summaries_created), depth, tokens, status
        )
    return table
