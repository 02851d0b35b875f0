"""Commands that drive the runtime: `replay`, `assemble`, `compact`."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer
from rich.markup import escape
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from openclaw_ctx._ids import LEGACY_ENGINE_ID
from openclaw_ctx.cli.app import CliState, console, err_console, known_engine, open_store, run, state_of
from openclaw_ctx.config import OpenClawConfig
from openclaw_ctx.contract import AssembleParams
from openclaw_ctx.messages import to_wire

if TYPE_CHECKING:
    from openclaw_ctx.host.runtime import Runtime
    from openclaw_ctx.store.store import Store

__all__ = ["register"]


def register(app: typer.Typer) -> None:
    """Add the runtime commands to `app`."""
    app.command("replay")(replay)
    app.command("assemble")(assemble)
    app.command("compact")(compact)


def replay(
    ctx: typer.Context,
    transcript: Path = typer.Argument(..., exists=True, dir_okay=False, help="OpenClaw JSONL (v3) transcript."),
    engine: str = typer.Option(
        None,
        "--engine",
        "-e",
        help="Engine to replay with \\[default: the configured slot, else legacy].",
        callback=known_engine,
    ),
    budget: int = typer.Option(32_000, "--budget", "-b", min=1_000, help="Context window in tokens."),
    key: str = typer.Option(None, "--key", "-k", help="Session key to replay into \\[default: replay:<session id>]."),
    as_json: bool = typer.Option(False, "--json", help="Print the report as JSON."),
) -> None:
    """Replay a transcript turn by turn through the runtime (the scripted model answers from it)."""
    state = state_of(ctx)
    config = state.config()
    engine = engine or config.slot_engine()[0]
    for warning in _budget_warnings(config, engine, budget):
        err_console.print(f"[bold yellow]warning:[/] {warning}", highlight=False)
    report: dict[str, Any] = run(_replay(state, transcript, engine, budget, key, quiet=as_json))
    if as_json:
        console.print_json(json.dumps(report))
    else:
        _print_replay(transcript, report)
    if report["problems"]:
        _print_problems(report["problems"])
        raise typer.Exit(1)


MAX_PROBLEMS_SHOWN = 20


def _print_problems(problems: list[str]) -> None:
    """A replay that left something out says what, on stderr, and the command exits 1."""
    for problem in problems[:MAX_PROBLEMS_SHOWN]:
        err_console.print(f"[bold yellow]skipped:[/] {escape(problem)}", highlight=False, soft_wrap=True)
    if len(problems) > MAX_PROBLEMS_SHOWN:
        err_console.print(f"… and {len(problems) - MAX_PROBLEMS_SHOWN:,} more (--json lists them all)")
    err_console.print(f"[bold red]error:[/] the replay left out {len(problems):,} part(s) of the transcript")


def _print_replay(transcript: Path, report: dict[str, Any]) -> None:
    table = Table(title=f"replay of {transcript.name}", show_header=False)
    tokens = report["context_tokens"]
    for label, value in (
        ("engine", report["engine"]),
        ("summarizer", report["summarizer"]),
        ("session key", report["session_key"]),
        ("budget (tokens)", f"{report['budget']:,}"),
        ("turns", _turns_cell(report)),
        ("messages in transcript", f"{report['transcript_messages']:,}"),
        ("messages stored", f"{report['messages_stored']:,}"),
        ("compactions", f"{report['compactions']:,}"),
        ("sessions in chain", f"{report['sessions_in_chain']:,}"),
        (
            "prompt tokens sent per turn min / median / max",
            f"{tokens['min']:,} / {tokens['median']:,} / {tokens['max']:,}",
        ),
        ("final context tokens", f"{tokens['final']:,}"),
        ("time", f"{report['seconds']:.2f} s"),
    ):
        table.add_row(label, str(value))
    console.print(table)


def _turns_cell(report: dict[str, Any]) -> str:
    notes = [f"{report[k]:,} {label}" for k, label in (("failed_turns", "failed"), ("skipped_turns", "already stored"))
             if report[k]]  # fmt: skip
    return f"{report['turns']:,}" + (f" ({', '.join(notes)})" if notes else "")


def _budget_warnings(config: OpenClawConfig, engine: str, budget: int) -> list[str]:
    """What an explicit compaction setting does to a small window (the runtime scales only defaults).

    Legacy's prompt gets the window minus the reserve; lossless-claw owns compaction and budgets itself.
    """
    if engine != LEGACY_ENGINE_ID:
        return []
    settings = config.agents.defaults.compaction
    explicit = settings.model_fields_set
    reserve = settings.effective_reserve()
    warnings = []
    if {"reserve_tokens", "reserve_tokens_floor"} & explicit and reserve >= budget * 3 // 4:
        room = max(0, budget - reserve)
        warnings.append(
            f"agents.defaults.compaction reserves {reserve:,} tokens (set in {config.source_path or 'the config'}), "
            f"leaving {room:,} of the {budget:,}-token budget for the prompt: most or all turns will overflow. "
            "Raise --budget or lower reserveTokens/reserveTokensFloor."
        )
    return warnings


async def _replay(
    state: CliState, transcript: Path, engine: str, budget: int, key: str | None, *, quiet: bool
) -> dict[str, Any]:
    from openclaw_ctx.host.replay import replay_transcript

    store = await open_store(state, bulk_write=True)
    try:
        with Progress(
            TextColumn("replaying"),
            BarColumn(),
            MofNCompleteColumn(),
            TextColumn("turns"),
            TimeElapsedColumn(),
            console=err_console,
            disable=quiet,
        ) as progress:
            task = progress.add_task("replay", total=None)

            def advance(done: int, total: int) -> None:
                progress.update(task, completed=done, total=total)

            report = await replay_transcript(
                store,
                transcript,
                engine=engine,
                budget=budget,
                session_key=key,
                config=state.config(),
                progress=advance,
            )
        return report.as_dict()
    finally:
        await store.close()


def assemble(
    ctx: typer.Context,
    key: str = typer.Option(..., "--key", "-k", help="Session key."),
    budget: int = typer.Option(128_000, "--budget", "-b", min=1, help="Token budget for the assembled context."),
    engine: str = typer.Option(
        None, "--engine", "-e", help="Override the configured engine slot.", callback=known_engine
    ),
    as_json: bool = typer.Option(False, "--json", help="Print the assembled messages as JSON."),
) -> None:
    """Show what the model would see next turn for a session key."""
    state = state_of(ctx)
    result: dict[str, Any] = run(_assemble(state, key, budget, engine))
    if as_json:
        console.print_json(json.dumps(result, ensure_ascii=False))
        return
    table = Table(title=f"{key}: {result['estimatedTokens']:,} tokens, {len(result['messages'])} messages")
    table.add_column("#", justify="right")
    table.add_column("role")
    table.add_column("text", overflow="fold")
    for i, message in enumerate(result["messages"]):
        table.add_row(str(i), message["role"], _preview(message))
    console.print(table)
    if result.get("systemPromptAddition"):
        console.print(f"[dim]systemPromptAddition: {len(str(result['systemPromptAddition']))} chars[/]")


async def _assemble(state: CliState, key: str, budget: int, engine: str | None) -> dict[str, Any]:
    from openclaw_ctx.context import pipeline_messages
    from openclaw_ctx.store import repo

    config = _config(state, engine)
    store = await open_store(state)
    try:
        runtime = await _runtime(store, config, budget)
        async with store.read() as conn:
            session = await repo.require_active_session(conn, key)
            entries = await repo.load_context(conn, session.session_id)
        history = pipeline_messages(entries)
        result = await runtime.engine.assemble(
            AssembleParams(
                session_id=session.session_id,
                session_key=key,
                messages=history,
                token_budget=budget,
                runtime_settings=runtime.runtime_settings(),
            )
        )
        # Legacy answers 0 ("host, estimate it"): the host's estimate is the stored counts.
        estimated = result.estimated_tokens or sum(e.token_count for e in entries)
        return {
            "sessionKey": key,
            "sessionId": session.session_id,
            "engine": runtime.engine.info.id,
            "estimatedTokens": estimated,
            "systemPromptAddition": result.system_prompt_addition,
            "promptAuthority": result.prompt_authority,
            "messages": [to_wire(m) for m in result.messages],
        }
    finally:
        await store.close()


def compact(
    ctx: typer.Context,
    key: str = typer.Option(..., "--key", "-k", help="Session key."),
    instructions: str = typer.Option(None, "--instructions", "-i", help="Custom focus for the summary."),
    budget: int = typer.Option(128_000, "--budget", "-b", min=1_000, help="Context window in tokens."),
    engine: str = typer.Option(
        None, "--engine", "-e", help="Override the configured engine slot.", callback=known_engine
    ),
    as_json: bool = typer.Option(False, "--json", help="Print the CompactResult as JSON."),
) -> None:
    """Compact a session key now (`/compact`), rotating it to a successor session."""
    state = state_of(ctx)
    result: dict[str, Any] = run(_compact(state, key, instructions, budget, engine))
    if as_json:
        console.print_json(json.dumps(result, ensure_ascii=False))
        return
    detail = result.get("result") or {}
    if not result["ok"]:
        err_console.print(f"[red]compaction failed:[/] {result.get('reason')}")
        raise typer.Exit(1)
    if not result["compacted"]:
        console.print(f"nothing compacted: {result.get('reason')}")
        return
    assert isinstance(detail, dict)
    console.print(
        f"compacted {key}: {detail.get('tokensBefore', 0):,} → {detail.get('tokensAfter', 0):,} tokens; "
        f"successor session {detail.get('sessionId')}"
    )


async def _compact(
    state: CliState, key: str, instructions: str | None, budget: int, engine: str | None
) -> dict[str, Any]:
    config = _config(state, engine)
    store = await open_store(state)
    try:
        runtime = await _runtime(store, config, budget)
        result = await runtime.compact(key, instructions=instructions)
        return result.model_dump(by_alias=True, exclude_none=True, mode="json")
    finally:
        await store.close()


def _config(state: CliState, engine: str | None) -> OpenClawConfig:
    config = state.config()
    return config.with_engine(engine) if engine else config


async def _runtime(store: Store, config: OpenClawConfig, budget: int) -> Runtime:
    from openclaw_ctx.host.runtime import Runtime
    from openclaw_ctx.host.scripted import ScriptedModel
    from openclaw_ctx.summarize import default_summarizer

    # assemble/compact need no model answer; the scripted model only supplies the context window.
    model = ScriptedModel(context_window=budget, name="offline")
    return await Runtime.create(store, config=config, model=model, summarizer=default_summarizer())


def _preview(message: dict[str, object], width: int = 160) -> str:
    content = message.get("content", message.get("summary", ""))
    if isinstance(content, list):
        parts = []
        for block in content:
            if isinstance(block, dict):
                parts.append(str(block.get("text") or block.get("thinking") or block.get("name") or block.get("type")))
        content = " ".join(parts)
    text = str(content).replace("\n", " ")
    return text if len(text) <= width else text[: width - 1] + "…"
