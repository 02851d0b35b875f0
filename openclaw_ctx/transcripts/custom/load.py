"""Which entry kinds a process knows: core's, plus those engines register through entry points.

An engine registers the kinds of its own tables in the entry-point group
``openclaw_ctx.transcript_entries``, under its engine id::

    [project.entry-points."openclaw_ctx.transcript_entries"]
    my-engine = "my_engine.transcript:register"     # def register(kinds: EntryKinds) -> None

``OPENCLAW_CTX_ENGINES`` restricts these entry points as it restricts engines. A file holding a kind
that one of the project's own engines writes, without that engine, still imports: those entries are
reported as lines that need it.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Collection
from importlib.metadata import entry_points

from openclaw_ctx._ids import LOSSLESS_ENGINE_ID
from openclaw_ctx.config import engines_allowed_by_env
from openclaw_ctx.transcripts.custom.audit import COMPACTION_KIND, TURN_KIND
from openclaw_ctx.transcripts.custom.context import CONTEXT_KIND
from openclaw_ctx.transcripts.custom.registry import EntryKinds
from openclaw_ctx.transcripts.custom.summaries import SUMMARY_KIND

__all__ = ["ENTRY_POINT_GROUP", "core_entry_kinds", "load_entry_kinds"]

ENTRY_POINT_GROUP = "openclaw_ctx.transcript_entries"
# The kinds our own plugins write, so that a file holding one names what is missing.
_PLUGIN_KINDS = {"openclaw-ctx/lcm-large-content": LOSSLESS_ENGINE_ID}
_log = logging.getLogger(__name__)


def core_entry_kinds() -> EntryKinds:
    """A registry of the kinds whose rows are core tables (no engine's)."""
    kinds = EntryKinds(missing=dict(_PLUGIN_KINDS))
    for kind in (SUMMARY_KIND, COMPACTION_KIND, TURN_KIND, CONTEXT_KIND):
        kinds.register(kind)
    return kinds


def load_entry_kinds(allow: Collection[str] | None = None) -> EntryKinds:
    """Core's kinds plus every installed engine's (loaded once per `allow` set).

    Args:
        allow: entry-point names (engine ids) to load; None reads ``OPENCLAW_CTX_ENGINES`` and loads
            everything when that is unset. A failing entry point is logged and skipped.
    """
    return _loaded(frozenset(allow) if allow is not None else engines_allowed_by_env())


@functools.cache
def _loaded(allow: frozenset[str] | None) -> EntryKinds:
    kinds = core_entry_kinds()
    for ep in entry_points(group=ENTRY_POINT_GROUP):
        if allow is not None and ep.name not in allow:
            continue
        try:
            ep.load()(kinds)
        except Exception as exc:
            _log.error('[transcripts] entry kinds of "%s" (%s) failed to load: %s', ep.name, ep.value, exc)
    return kinds
