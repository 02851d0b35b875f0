"""Progress of a long schema upgrade step (a full-text index rebuilt), for a front end to draw.

Migrations run deep inside Alembic, so the reporter travels in a context variable: the command line
sets it once, :meth:`Store.upgrade` hands it to the migration through Alembic's config attributes,
and a migration that rebuilds something calls it as it goes. Nothing is reported when it is unset.
"""

from __future__ import annotations

from collections.abc import Callable
from contextvars import ContextVar

__all__ = ["UpgradeProgress", "upgrade_progress"]

UpgradeProgress = Callable[[str, int, int], None]
"""Called with (what is being done, units done, units in all); `done == total` ends that step."""

upgrade_progress: ContextVar[UpgradeProgress | None] = ContextVar("openclaw_ctx_upgrade_progress", default=None)
