"""Recall commands: ``grep``, ``describe``, ``expand``, ``dag`` over the lossless summary DAG.

They read the store only (no migration: an out-of-date schema is refused with the upgrade hint) and
work across every session of a key (its rotation chain) or, for ``grep --all``, across all keys.
Human output is Rich; ``--json`` prints one JSON document to stdout.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import typer
from rich.markup import escape
from rich.table import Table

from openclaw_ctx import recall, registry
from openclaw_ctx._files import database_files, guard_output, write_atomic
from openclaw_ctx.cli.app import CliState, console, err_console, run, state_of
from openclaw_ctx.errors import StoreError
from openclaw_ctx.inspect import dag as dag_mod
from openclaw_ctx.inspect.pictures import render_svg
from openclaw_ctx.store.store import Store

__all__ = ["print_expansion", "print_grep_hits", "register"]


async def _open(state: CliState) -> Store:
    if not state.db.exists():
        raise StoreError(f"{state.db}: no database file")
    return await Store.open(state.db, upgrade=False)


def _print_json(value: Any) -> None:
    print(json.dumps(value, ensure_ascii=False, indent=2, default=str))


# --- grep ------------------------------------------------------------------------------------------


async def _grep(state: CliState, pattern: str, key: str | None, options: dict[str, Any]) -> recall.GrepHits:
    async with await _open(state) as store:
        return await recall.grep(store, pattern, session_key=key, **options)


def grep(
    ctx: typer.Context,
    pattern: str = typer.Argument(
        ..., help="Words (all must match; a trailing * is a prefix) or, with --mode regex, a regex."
    ),
    key: str = typer.Option(None, "--key", "-k", help="Search this session key's whole history (all its sessions)."),
    all_keys: bool = typer.Option(False, "--all", "-a", help="Search every session key."),
    mode: str = typer.Option("full_text", "--mode", "-m", help="full_text or regex."),
    scope: str = typer.Option("both", "--scope", "-s", help="messages, summaries or both."),
    sort: str = typer.Option("recency", "--sort", help="recency, relevance (bm25) or hybrid."),
    since: str = typer.Option(None, "--since", help="Only items at or after this ISO-8601 time."),
    before: str = typer.Option(None, "--before", help="Only items before this ISO-8601 time."),
    limit: int = typer.Option(50, "--limit", "-n", help="Number of hits, 1 to 200."),
    as_json: bool = typer.Option(False, "--json", help="Machine-readable output."),
) -> None:
    """Search stored messages and summaries (FTS5, LIKE for CJK, or regex)."""
    if bool(key) == all_keys:
        raise typer.BadParameter("name one session key with --key K, or search every key with --all")
    options = {"mode": mode, "scope": scope, "sort": sort, "since": since, "before": before, "limit": limit}
    hits = run(_grep(state_of(ctx), pattern, key, options))
    if as_json:
        _print_json(
            {"hits": [h.to_dict() for h in hits], "strategy": hits.strategy, "complete": hits.complete,
             "leftOut": hits.left_out}
        )  # fmt: skip
        return
    print_grep_hits(hits, pattern, sort)


def print_grep_hits(hits: recall.GrepHits, pattern: str, sort: str = "recency") -> None:
    """The human rendering of grep hits (the `grep` command and the chat's `/grep`)."""
    table = Table(title=f"{len(hits)} hit(s) for {pattern!r} ({hits.strategy}, {sort})")
    for column in ("id", "kind", "where"):
        table.add_column(column, no_wrap=True)
    for column in ("session key", "time", "snippet"):
        table.add_column(column, overflow="fold")
    for h in hits:
        if h.kind == "message":
            kind = f"{h.role} #{h.seq}"
            where = "raw in context" if h.in_context else (h.covering_summary_id or "uncovered")
        else:
            kind, where = f"{h.summary_kind} d{h.depth}", ""
        table.add_row(h.id, kind, where, h.session_key, h.time or "", escape(h.snippet))
    console.print(table)
    if not hits.complete:
        err_console.print("[yellow]note:[/] the regex scan stopped at its row bound; older rows were not searched")
    if (note := hits.left_out_note()) is not None:
        err_console.print(f"[yellow]note:[/] {note}", highlight=False, soft_wrap=True)


# --- describe --------------------------------------------------------------------------------------


async def _describe(state: CliState, ref: str, token_cap: int | None, expand_file: bool) -> recall.Description:
    registry.ensure_engines_loaded()  # an engine's own ids (file_…) are described by the engine
    async with await _open(state) as store:
        return await recall.describe(store, ref, token_cap=token_cap, expand_file=expand_file)


def describe(
    ctx: typer.Context,
    ref: str = typer.Argument(
        ..., metavar="ID", help="A summary id (sum_…), a message id (msg_<n> or <n>) or a large-content id (file_…)."
    ),
    token_cap: int = typer.Option(None, "--token-cap", min=1, help="Mark subtree nodes whose expansion fits."),
    expand_file: bool = typer.Option(False, "--expand-file", help="For a file_… id: print its stored text (32 KB)."),
    as_json: bool = typer.Option(False, "--json", help="Machine-readable output."),
) -> None:
    """Show a summary (metadata, sources, children, subtree costs), a message and what covers it, or large content."""
    found = run(_describe(state_of(ctx), ref, token_cap, expand_file))
    if as_json:
        _print_json(found.to_dict())
        return
    row = found.row
    if isinstance(found, recall.FileDescription):
        console.print(
            f"[bold]{found.id}[/] {row['kind']} {escape(str(row['name']))} · {row['byte_size']} bytes · "
            f"{row['token_count']} tok · {row['message_id']} · key {row['session_key']}"
        )
        console.print(escape(found.stub), highlight=False)
        if found.content is not None:
            cut = f" (first {recall.FILE_CONTENT_CAP_BYTES} bytes)" if found.truncated else ""
            console.rule(f"content{cut}")
            console.print(escape(found.content), highlight=False)
        return
    if isinstance(found, recall.MessageDescription):
        chain = " → ".join(c["id"] for c in found.covering) or "none (still raw)"
        console.print(
            f"[bold]{found.id}[/] {row['role']} #{row['seq']} · key {row['session_key']} · {row['token_count']} tok"
        )
        console.print(f"session {row['session_id']} · in context: {found.in_context} · covered by: {chain}")
        console.print(escape(row["text"]), highlight=False)
        return
    console.print(
        f"[bold]{found.id}[/] {row['kind']} depth {row['depth']} · {row['token_count']} tok · key {row['session_key']}"
    )
    console.print(f"range {row['earliest_at']} .. {row['latest_at']} · in context: {found.in_context}")
    console.print(
        "sources: "
        + (", ".join(s["id"] for s in found.sources) or "none")
        + (f" + {len(found.source_message_ids)} message(s)" if found.source_message_ids else "")
    )
    console.print("built into: " + (", ".join(c["id"] for c in found.children) or "none"))
    table = Table(title=f"subtree: {found.manifest_total} node(s)")
    for column in ("id", "level", "kind", "depth", "tokens", "expand: summaries", "expand: messages", "fits"):
        table.add_column(column)
    for m in found.manifest:
        fits = "" if m.fits_cap is None else ("yes" if m.fits_cap else "no")
        table.add_row(
            m.id, str(m.level), m.kind, str(m.depth), str(m.tokens), str(m.summaries_cost), str(m.messages_cost), fits
        )
    console.print(table)
    console.print(escape(row["content"]), highlight=False)


# --- expand ----------------------------------------------------------------------------------------


async def _expand(state: CliState, ref: str, options: dict[str, Any]) -> recall.ExpandResult:
    async with await _open(state) as store:
        return await recall.expand(store, ref, **options)


def expand(
    ctx: typer.Context,
    ref: str = typer.Argument(..., metavar="ID", help="A summary id (sum_…)."),
    messages: bool = typer.Option(False, "--messages", help="Return the original messages under the leaves."),
    token_cap: int = typer.Option(4000, "--token-cap", help="Stop before exceeding this many stored tokens."),
    max_depth: int = typer.Option(3, "--max-depth", help="Summary levels to walk below ID."),
    as_json: bool = typer.Option(False, "--json", help="Machine-readable output."),
) -> None:
    """Walk a summary down to its sources (and the original messages with --messages) within a token cap."""
    options = {"token_cap": token_cap, "include_messages": messages, "max_depth": max_depth}
    result = run(_expand(state_of(ctx), ref, options))
    if as_json:
        _print_json(result.to_dict())
        return
    print_expansion(result)


def print_expansion(result: recall.ExpandResult) -> None:
    """The human rendering of an expansion (the `expand` command and the chat's `/expand`)."""
    console.print(escape(result.render()), highlight=False, soft_wrap=True)


# --- dag -------------------------------------------------------------------------------------------


async def _dag(state: CliState, key: str, fmt: str, include_messages: bool) -> tuple[str, int, int]:
    async with await _open(state) as store:
        graph = await dag_mod.load_dag(store, key, include_messages=include_messages)
    if graph.number_of_nodes() == 0:
        raise StoreError(f"session key {key!r} has no messages or summaries")
    if fmt == "svg":
        body = await render_svg(dag_mod.export(graph, "dot"))
    else:
        body = dag_mod.export(graph, fmt)
    return body, graph.number_of_nodes(), graph.number_of_edges()


DAG_FORMATS = (*dag_mod.FORMATS, "svg")


async def _dag_to(
    state: CliState, key: str, fmt: str, messages: bool, out: Path | None, force: bool
) -> tuple[str, int, int]:
    """The DAG drawn; written to `out` (checked before any work, written whole) when one is named."""
    if out is not None:
        guard_output(out, force=force, protected=database_files(state.db))
    body, nodes, edges = await _dag(state, key, fmt, messages)
    if out is not None:
        await asyncio.to_thread(write_atomic, out, body)
    return body, nodes, edges


def dag(
    ctx: typer.Context,
    key: str = typer.Option(..., "--key", "-k", help="Whose DAG (every session of this key)."),
    fmt: str = typer.Option("dot", "--format", "-f", help="dot, graphml, mermaid, or svg (drawn by Graphviz dot)."),
    out: Path = typer.Option(None, "--out", "-o", help="Write to this file instead of stdout."),
    no_messages: bool = typer.Option(False, "--no-messages", help="Leave out raw messages no summary covers."),
    force: bool = typer.Option(False, "--force", help="Replace the --out file if it exists (never the database)."),
) -> None:
    """Export or draw a session key's summary DAG (summaries → sources): DOT, GraphML, Mermaid or SVG.

    Summary nodes show kind, depth, tokens and the time range they cover; items in the current context are drawn bold. SVG needs Graphviz's `dot` on PATH. An existing --out file is replaced only with --force.
    """  # noqa: E501
    if fmt not in DAG_FORMATS:
        raise typer.BadParameter(f"--format must be one of {', '.join(DAG_FORMATS)}, got {fmt!r}")
    body, nodes, edges = run(_dag_to(state_of(ctx), key, fmt, not no_messages, out, force))
    if out is None:
        print(body, end="")
        return
    err_console.print(f"wrote {out} ({fmt}: {nodes} nodes, {edges} edges)", highlight=False)


def register(app: typer.Typer) -> None:
    """Add the recall commands to `app`."""
    app.command("grep")(grep)
    app.command("describe")(describe)
    app.command("expand")(expand)
    app.command("dag")(dag)
