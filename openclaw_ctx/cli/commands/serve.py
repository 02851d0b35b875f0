"""`openclaw-ctx serve`: the engines over newline-delimited JSON-RPC 2.0 on stdin/stdout (docs/serve.md).

The OpenClaw plugin starts one such process per host process. stdout carries protocol lines only (fd 1 is
pointed at stderr before anything else runs); logs go to stderr, scrubbed of secrets.
"""

from __future__ import annotations

from typing import BinaryIO

import typer

from openclaw_ctx.cli.app import CliState, known_engine, open_store, run, state_of

__all__ = ["register"]


def register(app: typer.Typer) -> None:
    """Add `serve` to `app`."""
    app.command("serve")(serve)


def serve(
    ctx: typer.Context,
    engine: str = typer.Option(
        None,
        "--engine",
        "-e",
        help="Engine id \\[default: the configured slot; initialize may override it].",
        callback=known_engine,
    ),
    summarizer: str = typer.Option(
        None,
        "--summarizer",
        help="host (the client's model via host/llmComplete), extractive, or provider/model "
        "\\[default: the configured summary model, else extractive].",
        show_default=False,
    ),
) -> None:
    """Serve the context engine over JSON-RPC on stdio until shutdown or EOF (for the OpenClaw plugin)."""
    from openclaw_ctx.host.serve import claim_stdout, configure_logging

    out = claim_stdout()
    configure_logging()
    run(_serve(state_of(ctx), out, engine, summarizer))


async def _serve(state: CliState, out: BinaryIO, engine: str | None, summarizer: str | None) -> None:
    from openclaw_ctx.host.serve import serve_stdio

    config = state.config()
    store = await open_store(state)
    try:
        await serve_stdio(store, config, out, engine_id=engine, summarizer=summarizer)
    finally:
        await store.close()
