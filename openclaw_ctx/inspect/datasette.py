"""Datasette over a store: the metadata shipped with the package and the command line that serves it.

The metadata (``datasette.json`` beside this module) turns on full-text search for ``messages`` and
``summaries``, describes the tables, offers facets (role, session key, kind, depth, …) and carries
docs/sql.md's queries as canned queries; a test keeps those equal to the document's. Datasette names a
database after its file's stem, so the shipped file is written for ``openclaw-ctx.db`` and
:func:`metadata_for` renames it for any other file.
"""

from __future__ import annotations

import importlib.util
import json
import shutil
import sys
from importlib import resources
from pathlib import Path
from typing import Any

__all__ = ["INSTALL_HINT", "METADATA_DATABASE", "datasette_executable", "metadata_for", "serve_command"]

METADATA_DATABASE = "openclaw-ctx"
INSTALL_HINT = "pip install 'openclaw-ctx[datasette]' (or: pipx install datasette)"


def metadata_for(db: Path) -> dict[str, Any]:
    """The shipped metadata, keyed by the database name datasette will give `db`."""
    shipped: dict[str, Any] = json.loads(
        resources.files("openclaw_ctx.inspect").joinpath("datasette.json").read_text("utf-8")
    )
    shipped["databases"] = {db.stem: shipped["databases"][METADATA_DATABASE]}
    return shipped


def datasette_executable() -> list[str] | None:
    """How to run datasette: from this environment when installed here, else the one on PATH."""
    if importlib.util.find_spec("datasette") is not None:
        return [sys.executable, "-m", "datasette"]
    found = shutil.which("datasette")
    return [found] if found else None


def serve_command(
    datasette: list[str], db: Path, metadata: Path, *, port: int, open_browser: bool, extra: list[str]
) -> list[str]:
    """``datasette serve`` on loopback only. Datasette opens a database file read-only (``mode=ro``), so
    it serves the live file while agents write it, and never changes it."""
    command = [*datasette, "serve", str(db), "--metadata", str(metadata), "--host", "127.0.0.1", "--port", str(port)]
    if open_browser:
        command.append("--open")
    return [*command, *extra]
