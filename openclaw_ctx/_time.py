"""The one timestamp format of the store and its transcripts: ISO-8601 UTC, milliseconds, a `Z`.

``2026-01-31T12:00:00.000Z`` sorts as text in time order, which the SQL views and indexes rely on.
OpenClaw's transcripts carry epoch milliseconds; these helpers are the only conversions between the two.
"""

from __future__ import annotations

from datetime import UTC, datetime

__all__ = ["format_utc", "iso_from_ms", "ms_from_iso", "utc_now"]


def format_utc(moment: datetime) -> str:
    """`moment` in the store's format; a naive datetime is taken to be UTC already."""
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"


def utc_now() -> str:
    """The current time in the store's format."""
    return format_utc(datetime.now(UTC))


def iso_from_ms(ms: int | None) -> str | None:
    """Epoch milliseconds in the store's format (None stays None)."""
    if ms is None:
        return None
    return format_utc(datetime.fromtimestamp(ms / 1000, UTC))


def ms_from_iso(value: str | None) -> int | None:
    """An ISO-8601 timestamp as epoch milliseconds (None when absent or unparseable)."""
    if not value:
        return None
    try:
        return int(datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp() * 1000)
    except ValueError:
        return None
