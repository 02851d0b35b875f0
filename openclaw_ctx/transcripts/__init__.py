"""OpenClaw session transcripts (JSONL files, and the host's SQLite agent store): reading, import, export.

:mod:`.jsonl` streams a file into the typed entries of :mod:`.entries`; :mod:`.tree` walks the active
branch and rebuilds the model context; :mod:`.discover` finds the files of agent directories;
:mod:`.importer` and :mod:`.export` move them in and out (:mod:`.agent_store` reads the transcripts
OpenClaw 2026.9 keeps in SQLite, :mod:`.lcm_db` brings lossless-claw's own database onto them);
:mod:`.custom` holds the ``openclaw-ctx/*`` entries that carry the rows a plain transcript cannot.
"""

from openclaw_ctx.transcripts.agent_store import (
    HostSession,
    host_session_of,
    read_host_transcript,
)
from openclaw_ctx.transcripts.custom import EntryKind, EntryKinds, core_entry_kinds, load_entry_kinds
from openclaw_ctx.transcripts.discover import SourceFile, discover
from openclaw_ctx.transcripts.entries import (
    ENTRY_TYPES,
    TRANSCRIPT_VERSION,
    BranchSummaryEntry,
    CompactionEntry,
    CustomEntry,
    CustomMessageEntry,
    Entry,
    LabelEntry,
    MessageEntry,
    ModelChangeEntry,
    SessionHeader,
    SessionInfoEntry,
    ThinkingLevelChangeEntry,
    TranscriptLineError,
    UnknownEntry,
    parse_entry,
)
from openclaw_ctx.transcripts.export import ExportedFile, ExportReport, export_session
from openclaw_ctx.transcripts.host_turns import with_host_entry_ids
from openclaw_ctx.transcripts.importer import import_host_session, import_paths, import_transcript
from openclaw_ctx.transcripts.jsonl import iter_entries, iter_lines, read_transcript
from openclaw_ctx.transcripts.lcm_db import LcmImportReport, import_lcm_db
from openclaw_ctx.transcripts.legacy_summaries import IMPORT_SUMMARIZER, legacy_summary_id
from openclaw_ctx.transcripts.report import FileReport, ImportProgress, ImportReport, ProgressCallback
from openclaw_ctx.transcripts.tree import SessionContext, Transcript, context_message

__all__ = [
    "ENTRY_TYPES",
    "IMPORT_SUMMARIZER",
    "TRANSCRIPT_VERSION",
    "BranchSummaryEntry",
    "CompactionEntry",
    "CustomEntry",
    "CustomMessageEntry",
    "Entry",
    "EntryKind",
    "EntryKinds",
    "ExportReport",
    "ExportedFile",
    "FileReport",
    "HostSession",
    "ImportProgress",
    "ImportReport",
    "LabelEntry",
    "LcmImportReport",
    "MessageEntry",
    "ModelChangeEntry",
    "ProgressCallback",
    "SessionContext",
    "SessionHeader",
    "SessionInfoEntry",
    "SourceFile",
    "ThinkingLevelChangeEntry",
    "Transcript",
    "TranscriptLineError",
    "UnknownEntry",
    "context_message",
    "core_entry_kinds",
    "discover",
    "export_session",
    "host_session_of",
    "import_host_session",
    "import_lcm_db",
    "import_paths",
    "import_transcript",
    "iter_entries",
    "iter_lines",
    "legacy_summary_id",
    "load_entry_kinds",
    "parse_entry",
    "read_host_transcript",
    "with_host_entry_ids",
    "read_transcript",
]
