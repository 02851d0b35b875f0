"""What every recall function shares: where it reads from and how ids and JSON keys are spelled.

A session key's history is every session of that key, so recall scopes by ``session_key``, never by
``session_id``. Message ids are spelled ``msg_<message_id>``; summary ids are ``sum_…``.
"""

from __future__ import annotations

import re
from typing import Any

from pydantic.alias_generators import to_camel

from openclaw_ctx.store import ReadSource, reading

__all__ = ["Source", "camel_keys", "parse_message_id", "reading"]

Source = ReadSource


def parse_message_id(value: str | int) -> int | None:
    """The integer id of ``msg_<n>`` / ``<n>`` / an int, or None if `value` is not a message id."""
    if isinstance(value, int):
        return value
    match = re.fullmatch(r"(?:msg_|msg#)?(\d+)", value.strip())
    return int(match.group(1)) if match else None


def camel_keys(value: dict[str, Any], keep: tuple[str, ...] = ()) -> dict[str, Any]:
    """`value` with camelCase keys, recursing into dicts and lists except under the `keep` keys."""

    def convert(item: Any) -> Any:
        if isinstance(item, dict):
            return {to_camel(k): v if k in keep else convert(v) for k, v in item.items()}
        if isinstance(item, list):
            return [convert(v) for v in item]
        return item

    result: dict[str, Any] = convert(value)
    return result
