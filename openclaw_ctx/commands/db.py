"""Schema commands: ``db upgrade|current|downgrade|check``."""

from __future__ import annotations

import typer

__all__ = ["register"]


def register(app: typer.Typer) -> None:
    """Add the ``db`` command group to `app`."""
