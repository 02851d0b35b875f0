"""The ``openclaw-ctx/*`` custom entries: stored rows that travel inside OpenClaw transcripts, by kind.

Core's kinds: ``openclaw-ctx/lcm-summary`` (summary nodes and their edges, :mod:`.summaries`),
``openclaw-ctx/lcm-context`` (a session's context projection, :mod:`.context`), ``openclaw-ctx/turn``
and ``openclaw-ctx/compaction-record`` (the runtime's records, :mod:`.audit`). Engines add the kinds
of their own tables through :class:`EntryKinds` (see :mod:`.load`).
"""

from openclaw_ctx.transcripts.custom.audit import COMPACTION_KIND, COMPACTION_TYPE, TURN_KIND, TURN_TYPE
from openclaw_ctx.transcripts.custom.context import (
    CONTEXT_KIND,
    CONTEXT_TYPE,
    Projection,
    context_data,
    resolve_context,
)
from openclaw_ctx.transcripts.custom.load import ENTRY_POINT_GROUP, core_entry_kinds, load_entry_kinds
from openclaw_ctx.transcripts.custom.lookup import CHUNK, message_ids, summary_keys
from openclaw_ctx.transcripts.custom.registry import (
    EntryData,
    EntryIdOf,
    EntryKind,
    EntryKinds,
    ExportNames,
    FoundEntries,
    RestoreScope,
    dump,
    from_row,
    validate_entries,
)
from openclaw_ctx.transcripts.custom.summaries import (
    SUMMARY_KIND,
    SUMMARY_TYPE,
    Restored,
    restore_summaries,
    summary_data,
)

__all__ = [
    "CHUNK",
    "COMPACTION_KIND",
    "COMPACTION_TYPE",
    "CONTEXT_KIND",
    "CONTEXT_TYPE",
    "ENTRY_POINT_GROUP",
    "SUMMARY_KIND",
    "SUMMARY_TYPE",
    "TURN_KIND",
    "TURN_TYPE",
    "EntryData",
    "EntryIdOf",
    "EntryKind",
    "EntryKinds",
    "ExportNames",
    "FoundEntries",
    "Projection",
    "RestoreScope",
    "Restored",
    "context_data",
    "core_entry_kinds",
    "dump",
    "from_row",
    "load_entry_kinds",
    "message_ids",
    "resolve_context",
    "restore_summaries",
    "summary_data",
    "summary_keys",
    "validate_entries",
]
