"""Identifiers the whole package agrees on: the built-in engine ids and the shapes of new row ids."""

from __future__ import annotations

import secrets
import uuid

__all__ = ["LEGACY_ENGINE_ID", "LOSSLESS_ENGINE_ID", "new_session_id", "new_summary_id"]

LEGACY_ENGINE_ID = "legacy"
"""The built-in engine, reserved for core; the default of ``plugins.slots.contextEngine``."""

LOSSLESS_ENGINE_ID = "lossless-claw"
"""The lossless DAG-summary plugin's id. Core names it only to say whether it is installed."""


def new_session_id() -> str:
    """A fresh session id (UUID4, as OpenClaw uses)."""
    return str(uuid.uuid4())


def new_summary_id() -> str:
    """`sum_` + 16 hex characters."""
    return "sum_" + secrets.token_hex(8)
