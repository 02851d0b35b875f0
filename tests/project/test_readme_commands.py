"""README's command table and `openclaw-ctx --help` list the same commands."""

from __future__ import annotations

import re
from pathlib import Path

from typer.testing import CliRunner

import openclaw_ctx.cli.app as cli

README = Path(__file__).resolve().parents[2] / "README.md"


def test_every_command_is_in_the_readme_table_and_nothing_else() -> None:
    if not any(c.name == "import" for c in cli.app.registered_commands):
        cli._load_commands()
    registered = {c.name for c in cli.app.registered_commands} | {g.name for g in cli.app.registered_groups}
    table = README.read_text(encoding="utf-8").split("| command | does |", 1)[1].split("\n\n", 1)[0]
    documented = {name for cell in re.findall(r"^\| (.*?) \|", table, re.M) for name in re.findall(r"`(\w+)", cell)}
    assert documented == registered
    help_text = CliRunner().invoke(cli.app, ["--help"], env={"COLUMNS": "200"}).stdout
    assert all(name in help_text for name in registered)
