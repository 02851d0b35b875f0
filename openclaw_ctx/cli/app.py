"""`openclaw-ctx`: the command line (Typer + Rich).

The app and its global options live here; each area's commands live in `openclaw_ctx/cli/commands/<area>.py`
and expose ``register(app)``. Commands are thin: they parse options, call the async library through
:func:`run`, and print with Rich. Logs and warnings go to stderr; ``--json`` output goes to stdout.
"""

from __future__ import annotations

import asyncio
import importlib
import os
import sys
from collections.abc import Coroutine
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import typer
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TaskID, TextColumn, TimeRemainingColumn

from openclaw_ctx._version import __version__
from openclaw_ctx.config import OpenClawConfig, default_db_path, load_config
from openclaw_ctx.errors import OpenClawCtxError
from openclaw_ctx.store.store import Store, database_path
from openclaw_ctx.store.upgrade_progress import upgrade_progress

__all__ = ["CliState", "app", "console", "err_console", "known_engine", "main", "open_store", "run", "state_of"]

T = TypeVar("T")

PIPED_WIDTH = 4096


def _stdout_width() -> int | None:
    """Rich squeezes every table to 80 columns when stdout is not a terminal; a pipe or a file gets
    whole lines instead (``COLUMNS`` still wins), as ``sqlite-utils`` and ``llm`` print them."""
    if os.environ.get("COLUMNS") or sys.stdout.isatty():
        return None
    return PIPED_WIDTH


console = Console(width=_stdout_width())
err_console = Console(stderr=True)

app = typer.Typer(
    name="openclaw-ctx",
    help=(
        "Persistent, SQL-backed context engines for LLM agents.\n\n"
        "Every message lives in one SQLite file; the model sees a budgeted view assembled by the\n"
        "selected engine (legacy or lossless-claw); compaction rotates sessions and destroys nothing."
    ),
    no_args_is_help=True,
    context_settings={"help_option_names": ["-h", "--help"]},
    pretty_exceptions_enable=False,
)

# Each module registers its commands on `app`; order is the order of `--help`.
COMMAND_MODULES = [
    "openclaw_ctx.cli.commands.inspect",
    "openclaw_ctx.cli.commands.db",
    "openclaw_ctx.cli.commands.turns",
    "openclaw_ctx.cli.commands.transfer",
    "openclaw_ctx.cli.commands.migrate",
    "openclaw_ctx.cli.commands.stats",
    "openclaw_ctx.cli.commands.recall",
    "openclaw_ctx.cli.commands.ask",
    "openclaw_ctx.cli.commands.chat",
    "openclaw_ctx.cli.commands.serve",
]


@dataclass
class CliState:
    """Global options, resolved once per invocation."""

    db: Path
    config_path: Path | None

    def config(self) -> OpenClawConfig:
        """The loaded openclaw.json (errors are reported by the caller)."""
        return load_config(self.config_path)


def _version(value: bool) -> None:
    if value:
        console.print(f"openclaw-ctx {__version__}")
        raise typer.Exit()


@app.callback()
def _global(
    ctx: typer.Context,
    # A str, not a Path: Path("postgresql://h/db") folds the "//" and would hide that it is a URL.
    db: str = typer.Option(
        None,
        "--db",
        envvar="OPENCLAW_CTX_DB",
        help=(
            "SQLite database file or sqlite:///PATH URL "
            "\\[default: $OPENCLAW_STATE_DIR/openclaw-ctx.db, ~/.openclaw/openclaw-ctx.db]."
        ),
        show_default=False,
    ),
    config: Path = typer.Option(
        None,
        "--config",
        envvar="OPENCLAW_CONFIG_PATH",
        help="openclaw.json (JSON5) \\[default: $OPENCLAW_STATE_DIR/openclaw.json].",
        show_default=False,
    ),
    version: bool = typer.Option(False, "--version", callback=_version, is_eager=True, help="Show the version."),
) -> None:
    ctx.obj = CliState(db=database_path(db) if db else default_db_path(), config_path=config)


def known_engine(engine_id: str | None) -> str | None:
    """Typer callback for ``--engine``: an id no installed engine registers is a usage error.

    The host's registry falls back to legacy for an unknown configured slot, as OpenClaw does; an id
    typed on the command line is a request, and running legacy instead would silently ignore it.
    """
    if engine_id is None:
        return None
    from openclaw_ctx.registry import get_registry

    registry = get_registry()
    registry.ensure_loaded()
    if registry.get(engine_id) is None:
        available = ", ".join(e.engine_id for e in registry.list_engines()) or "(none)"
        raise typer.BadParameter(f"no engine {engine_id!r} is installed; available: {available}")
    return engine_id


def state_of(ctx: typer.Context) -> CliState:
    """The CliState of the running command."""
    obj = ctx.find_root().obj
    assert isinstance(obj, CliState)
    return obj


def run(coro: Coroutine[Any, Any, T]) -> T:
    """Run a coroutine for a command; library errors become a clear message and exit status 1."""
    try:
        return asyncio.run(coro)
    except OpenClawCtxError as exc:
        err_console.print(f"[bold red]error:[/] {exc.detail}", highlight=False, soft_wrap=True)
        raise typer.Exit(1) from exc


async def open_store(state: CliState, *, upgrade: bool = True, bulk_write: bool = False) -> Store:
    """Open the database the global options name; `bulk_write` refuses read-only storage and a damaged file first."""
    store = await Store.open(state.db, upgrade=upgrade)
    if bulk_write:
        try:
            store.require_writable()
            await store.check_integrity()
        except BaseException:
            await store.close()
            raise
    return store


class UpgradeBar:
    """Draws a long schema-upgrade step (a full-text index rebuilt) on stderr, whichever command opened
    the store; a step of one batch or less is not worth a bar and draws nothing."""

    MIN_UNITS = 5000

    def __init__(self) -> None:
        self._progress: Progress | None = None
        self._tasks: dict[str, TaskID] = {}

    def __call__(self, what: str, done: int, total: int) -> None:
        if total <= self.MIN_UNITS and what not in self._tasks:
            return
        if self._progress is None:
            self._progress = Progress(
                TextColumn("{task.description}"),
                BarColumn(),
                MofNCompleteColumn(),
                TimeRemainingColumn(),
                console=err_console,
            )
            self._progress.start()
        if what not in self._tasks:
            self._tasks[what] = self._progress.add_task(what, total=total)
        self._progress.update(self._tasks[what], completed=done, total=total)
        if done >= total:
            self._progress.stop()
            self._progress, self._tasks = None, {}


def _load_commands() -> None:
    for name in COMMAND_MODULES:
        importlib.import_module(name).register(app)


def main() -> None:
    """Console-script entry point."""
    os.environ.setdefault("PYTHONIOENCODING", "utf-8")
    _load_commands()
    upgrade_progress.set(UpgradeBar())
    try:
        app(standalone_mode=True)
    except OpenClawCtxError as exc:  # raised outside `run` (a command reading the config first): no traceback
        err_console.print(f"[bold red]error:[/] {exc.detail}", highlight=False, soft_wrap=True)
        sys.exit(1)
