"""Identifiers the whole package agrees on: the built-in engine ids and the shapes of new row ids."""

from __future__ import annotations

import secrets
import unicodedata
import uuid

from openclaw_ctx.errors import InvalidSessionKeyError

__all__ = [
    "LEGACY_ENGINE_ID",
    "LOSSLESS_ENGINE_ID",
    "MAX_SESSION_KEY_CHARS",
    "check_session_key",
    "new_session_id",
    "new_summary_id",
]

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


MAX_SESSION_KEY_CHARS = 1024
"""OpenClaw's keys (``agent:<id>:<channel>:…``) run to tens of characters; a megabyte key is a mistake."""

_BIDI_CONTROLS = frozenset("\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069")


def check_session_key(session_key: str) -> str:
    """`session_key` if it may start a session; keys are printed in terminals, logs and file names.

    Raises:
        InvalidSessionKeyError: not a string, empty, longer than MAX_SESSION_KEY_CHARS, or holding a
            control character (ANSI escapes, NUL, newlines) or a bidirectional override.
    """
    if not isinstance(session_key, str):
        raise InvalidSessionKeyError(f"session key must be a string, not {type(session_key).__name__}")
    if not session_key.strip():
        raise InvalidSessionKeyError("session key is empty")
    if len(session_key) > MAX_SESSION_KEY_CHARS:
        raise InvalidSessionKeyError(
            f"session key is {len(session_key):,} characters; the limit is {MAX_SESSION_KEY_CHARS:,}"
        )
    for at, char in enumerate(session_key):
        if unicodedata.category(char) == "Cc" or char in _BIDI_CONTROLS:
            raise InvalidSessionKeyError(
                f"session key {session_key[:40].encode('unicode_escape').decode()!r} holds U+{ord(char):04X} "
                f"at character {at}: control characters and direction overrides are not allowed in keys"
            )
    return session_key
