"""The `openclaw-ctx` command line: the Typer app in `app.py`, one module of commands per area."""

from openclaw_ctx.cli.app import main

__all__ = ["main"]
