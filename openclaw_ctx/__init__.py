"""openclaw-ctx: persistent, SQL-backed context engines for LLM agents."""

from __future__ import annotations

from openclaw_ctx._version import __version__

__all__ = ["__version__"]
