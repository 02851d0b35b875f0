"""``recall`` (ask the history a question in plain words) and ``embed`` (store the vectors it ranks by).

``recall`` reads only: items with no stored vector yet are embedded in memory for the query.
``embed`` writes the vectors for existing history, a committed batch at a time with a progress bar,
so an interrupted run carries on where it stopped.
"""

from __future__ import annotations

import json
from typing import cast

import typer
from rich.markup import escape
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn
from rich.table import Table

from openclaw_ctx import recall
from openclaw_ctx.cli.app import CliState, console, err_console, run, state_of
from openclaw_ctx.cli.commands.recall import _open
from openclaw_ctx.errors import StoreError
from openclaw_ctx.store.store import Store

__all__ = ["register"]


async def _recall(
    state: CliState, question: str, key: str | None, mode: str, since: str | None, before: str | None, limit: int
) -> recall.RecallHits:
    async with await _open(state) as store:
        return await recall.recall(
            store,
            question,
            session_key=key,
            mode=cast("recall.RecallMode", mode),  # recall() refuses any other string by name
            since=since,
            before=before,
            limit=limit,
        )


def recall_command(
    ctx: typer.Context,
    question: str = typer.Argument(..., help="A question in plain words, e.g. 'where is the staging db hosted now?'"),
    key: str = typer.Option(None, "--key", "-k", help="Search this session key's whole history (all its sessions)."),
    all_keys: bool = typer.Option(False, "--all", "-a", help="Search every session key."),
    mode: str = typer.Option("hybrid", "--mode", "-m", help="hybrid (words and meaning), lexical or semantic."),
    since: str = typer.Option(None, "--since", help="Only items at or after this ISO-8601 time."),
    before: str = typer.Option(None, "--before", help="Only items before this ISO-8601 time."),
    limit: int = typer.Option(10, "--limit", "-n", help="Number of hits, 1 to 200."),
    as_json: bool = typer.Option(False, "--json", help="Machine-readable output."),
) -> None:
    """Ask the history a question in plain words: ranked messages and summaries, ready for expand."""
    if bool(key) == all_keys:
        raise typer.BadParameter("name one session key with --key K, or search every key with --all")
    hits = run(_recall(state_of(ctx), question, key, mode, since, before, limit))
    if as_json:
        doc = {"hits": [h.to_dict() for h in hits], "mode": hits.mode, "notes": hits.notes}
        print(json.dumps(doc, ensure_ascii=False, indent=2))
        return
    table = Table(title=f"{len(hits)} hit(s) for {question!r} ({hits.mode})")
    for column in ("#", "id", "kind", "where"):
        table.add_column(column, no_wrap=True)
    for column in ("session key", "time", "snippet"):
        table.add_column(column, overflow="fold")
    for h in hits:
        if h.kind == "message":
            kind = f"{h.role} #{h.seq}"
            where = "raw in context" if h.in_context else (h.covering_summary_id or "uncovered")
        else:
            kind, where = f"{h.summary_kind} d{h.depth}", "in context" if h.in_context else ""
        table.add_row(str(h.rank), h.id, kind, where, h.session_key, h.time or "", escape(h.snippet))
    console.print(table)
    for note in hits.notes:
        err_console.print(f"[yellow]note:[/] {escape(note)}", highlight=False, soft_wrap=True)


async def _embed(state: CliState, key: str | None, show: bool) -> tuple[recall.EmbedReport, int]:
    from openclaw_ctx.recall.embedding import default_embedder, unavailable_reason

    embedder = default_embedder()
    if embedder is None:
        raise StoreError(unavailable_reason() or "no embedding model is available")
    if not state.db.exists():
        raise StoreError(f"{state.db}: no database file")
    async with await Store.open(state.db, upgrade=False) as store:
        store.require_writable()
        async with store.read() as conn:
            pending = await recall.pending_counts(conn, embedder.model, key)
        total = sum(pending.values())
        with Progress(
            TextColumn("embedding"), BarColumn(), MofNCompleteColumn(), TimeRemainingColumn(),
            console=err_console, disable=not show or total == 0, transient=False,
        ) as progress:  # fmt: skip
            task = progress.add_task("embed", total=total)
            report = await recall.embed_pending(
                store, embedder, session_key=key, progress=lambda n: progress.advance(task, n)
            )
        return report, total


def embed(
    ctx: typer.Context,
    key: str = typer.Option(None, "--key", "-k", help="Only this session key's history (default: every key)."),
    as_json: bool = typer.Option(False, "--json", help="Machine-readable output."),
) -> None:
    """Store the embeddings semantic recall ranks by, for every message and summary that has none.

    Resumable: each batch is committed, so a second run carries on where an interrupted one stopped.
    """
    report, total = run(_embed(state_of(ctx), key, not as_json))
    if as_json:
        print(json.dumps({"model": report.model, "messages": report.messages, "summaries": report.summaries}))
        return
    if total == 0:
        console.print(f"nothing to embed: every item has a {report.model} vector")
        return
    console.print(f"embedded {report.messages} message(s) and {report.summaries} summary(ies) with {report.model}")


def register(app: typer.Typer) -> None:
    """Add ``recall`` and ``embed`` to `app`."""
    app.command("recall")(recall_command)
    app.command("embed")(embed)
