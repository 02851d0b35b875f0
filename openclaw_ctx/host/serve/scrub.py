"""Secrets never leave the server: ``runtimeContext.config`` is dropped on arrival, log lines are scrubbed.

The host's ``runtimeContext.config`` carries the user's provider API keys; :func:`drop_secrets` removes it
from a request's params before anything validates, logs or stores them. :class:`ScrubbingFormatter` also
masks any value under a key named like ``apiKey``, ``token``, ``secret``, ``password`` or ``authorization``
in every log line (JSON, Python reprs and ``key=value`` forms).
"""

from __future__ import annotations

import logging
import re
from typing import Any

__all__ = ["ScrubbingFormatter", "drop_secrets", "scrub"]

_SECRET_NAME = r"[\w-]*(?:api[_-]?key|token|secret|password|authorization)"
# "apiKey": "v" / 'apiKey': 'v' (JSON, repr) and apiKey=v / Authorization: Bearer v (plain text).
_QUOTED = re.compile(rf"""(["']{_SECRET_NAME}["']\s*:\s*)(["'])(?:\\.|(?!\2).)*\2""", re.IGNORECASE)
_BARE = re.compile(rf"""(\b{_SECRET_NAME}\s*[=:]\s*)(?!["'])(?:bearer\s+)?[^\s,;'"}}\]]+""", re.IGNORECASE)
MASK = "***"


def drop_secrets(params: Any) -> Any:
    """`params` without ``runtimeContext.config`` (a new dict; the rest is shared, never mutated)."""
    if not isinstance(params, dict):
        return params
    context = params.get("runtimeContext")
    if not isinstance(context, dict) or "config" not in context:
        return params
    return {**params, "runtimeContext": {k: v for k, v in context.items() if k != "config"}}


def scrub(text: str) -> str:
    """`text` with the values under secret-named keys masked."""
    text = _QUOTED.sub(lambda m: f"{m.group(1)}{m.group(2)}{MASK}{m.group(2)}", text)
    return _BARE.sub(lambda m: f"{m.group(1)}{MASK}", text)


class ScrubbingFormatter(logging.Formatter):
    """A formatter whose every line (message, exception text included) goes through :func:`scrub`."""

    def format(self, record: logging.LogRecord) -> str:
        return scrub(super().format(record))
