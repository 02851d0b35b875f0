"""Inspection commands: ``doctor``, ``sessions``, ``show``, ``sql``."""

from __future__ import annotations

import typer

__all__ = ["register"]


def register(app: typer.Typer) -> None:
    """Add the inspection commands to `app`."""
