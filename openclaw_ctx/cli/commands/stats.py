"""`openclaw-ctx stats --key K`: a Rich table and terminal sparklines of a key's context over time."""

from __future__ import annotations

import json

import typer
from rich import box
from rich.table import Table

from openclaw_ctx.cli.app import CliState, console, open_store, run, state_of
from openclaw_ctx.errors import StoreError
from openclaw_ctx.inspect.pictures import sparkline
from openclaw_ctx.inspect.stats import KeyStats, key_stats

__all__ = ["register"]

_LABEL = 24
_SHOW_COMPACTIONS = 10


def register(app: typer.Typer) -> None:
    """Add `stats` to `app`."""
    app.command("stats")(stats)


async def _stats(state: CliState, key: str) -> KeyStats:
    if not state.db.exists():
        raise StoreError(f"{state.db}: no database file")
    store = await open_store(state, upgrade=False)
    try:
        return await key_stats(store, key)
    finally:
        await store.close()


def stats(
    ctx: typer.Context,
    key: str = typer.Option(..., "--key", "-k", help="Session key."),
    as_json: bool = typer.Option(False, "--json", help="Print the statistics (and every turn) as JSON."),
) -> None:
    """Context tokens per turn and compactions over time for a session key.

    Turns come from the `turns` table the runtime writes (the prompt tokens it sent the model, as `replay` reports them); imported history without turn rows is drawn from the `compactions` table (context size before and after each compaction).
    """  # noqa: E501
    found = run(_stats(state_of(ctx), key))
    if as_json:
        print(json.dumps(found.to_json(), ensure_ascii=False, indent=2))
        return
    console.print(_overview(found))
    for line in _sparklines(found, max(10, console.width - _LABEL - 2)):
        console.print(line, highlight=False, soft_wrap=True)
    if found.compactions:
        console.print(_compaction_table(found))


def _overview(found: KeyStats) -> Table:
    table = Table(title=f"stats of {found.session_key}", show_header=False, box=box.SIMPLE_HEAD)
    table.add_column("what")
    table.add_column("value", justify="right")
    what = "prompt tokens sent per turn" if found.source == "turns" else "context tokens at compactions"
    rows: list[tuple[str, str]] = [
        ("engine", found.engine_id or "legacy"),
        ("turns recorded", f"{len(found.turns):,}" if found.turns else "none (imported history)"),
        ("messages stored", f"{found.messages:,} ({found.stored_tokens:,} tokens)"),
        ("sessions in chain", f"{found.sessions:,}"),
        ("compactions", f"{len(found.compactions):,}"),
        (
            "summaries",
            f"{found.summaries:,}" + (f" (max depth {found.max_depth})" if found.max_depth is not None else ""),
        ),
        (f"{what} min / median / max", _summary(found)),
        ("context tokens now", f"{found.context_tokens:,}"),
    ]
    if found.turns_without_prompt_tokens:
        rows.append(("turns without that figure", _without(found)))
    if found.turns:
        rows.append(("budget (last turn)", f"{found.turns[-1].budget:,}"))
    for label, value in rows:
        table.add_row(label, value)
    return table


def _summary(found: KeyStats) -> str:
    if not found.series:
        return "none recorded"
    series = found.series_summary
    return f"{series['min']:,} / {series['median']:,} / {series['max']:,}"


def _without(found: KeyStats) -> str:
    missing = found.turns_without_prompt_tokens
    return f"{missing:,} of {len(found.turns):,} (recorded before openclaw-ctx kept it, or never sent to the model)"


def _sparklines(found: KeyStats, width: int) -> list[str]:
    series = found.series
    if not series:
        return []
    marks = found.compacted
    bars = sparkline(series, width=width)
    # One mark per bar: a bar that groups several points is marked when any of them compacted.
    size = len(series) / len(bars)
    ticks = "".join(
        "▲" if any(marks[int(i * size) : max(int(i * size) + 1, int((i + 1) * size))]) else " "
        for i in range(len(bars))
    )
    what = "tokens per turn" if found.source == "turns" else "tokens at compactions"
    return [f"{what:<{_LABEL}}{bars}", f"{'compactions':<{_LABEL}}{ticks}"]


def _compaction_table(found: KeyStats) -> Table:
    shown = found.compactions[-_SHOW_COMPACTIONS:]
    title = "compactions" + (
        f" (last {len(shown)} of {len(found.compactions)})" if len(shown) < len(found.compactions) else ""
    )
    table = Table(title=title, box=box.SIMPLE_HEAD)
    for column in ("at", "trigger", "engine", "tokens", "summaries"):
        table.add_column(column, justify="right" if column in ("tokens", "summaries") else "left", no_wrap=True)
    for c in shown:
        after = f"{c.tokens_after:,}" if c.tokens_after is not None else "?"
        table.add_row(c.at, c.trigger, c.engine_id, f"{c.tokens_before:,} → {after}", str(c.summaries_created))
    return table
