"""What an import reports: progress while it runs, and per file and in total when it is done."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from pydantic import BaseModel, Field

__all__ = ["FileReport", "ImportProgress", "ImportReport", "ImportSummary", "ProgressCallback"]

_COUNTERS = ("entries", "entries_new", "messages_new", "messages_duplicate", "summaries_new", "skipped_lines")


@dataclass(frozen=True)
class ImportProgress:
    """Where an import stands: the file being read and the bytes read over all files."""

    file: str
    files_done: int
    files_total: int
    bytes_done: int
    bytes_total: int


ProgressCallback = Callable[[ImportProgress], None]


@dataclass
class FileReport:
    """What importing one file did."""

    path: str
    session_key: str | None = None
    session_id: str | None = None
    parent_session_id: str | None = None
    entries: int = 0
    entries_new: int = 0
    messages_new: int = 0
    messages_duplicate: int = 0
    summaries_new: int = 0
    skipped_lines: int = 0
    error: str | None = None


@dataclass
class ImportReport:
    """Totals of an import, per file, every skipped line as ``file:line: reason``, and the files left out on
    purpose (trajectories, backups of a transcript that is there) with why."""

    files: list[FileReport] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    def total(self, name: str) -> int:
        """Sum of one FileReport counter over all files (e.g. ``"messages_new"``)."""
        return sum(int(getattr(f, name)) for f in self.files)

    @property
    def failed_files(self) -> int:
        """Files that could not be imported at all."""
        return sum(1 for f in self.files if f.error)

    @property
    def clean(self) -> bool:
        """True when nothing was skipped."""
        return not self.skipped

    def to_json(self) -> dict[str, Any]:
        """A JSON-ready dict: totals, files and skipped lines."""
        totals = {name: self.total(name) for name in _COUNTERS}
        summary = ImportSummary(
            files=len(self.files),
            failed_files=self.failed_files,
            **totals,
            per_file=self.files,
            skipped=self.skipped,
            notes=self.notes,
        )
        return summary.model_dump(by_alias=True)


class ImportSummary(BaseModel):
    """The wire form of an :class:`ImportReport` (what ``import --json`` prints): totals, files, skipped lines."""

    files: int
    failed_files: int = Field(serialization_alias="failedFiles")
    entries: int
    entries_new: int
    messages_new: int
    messages_duplicate: int
    summaries_new: int
    skipped_lines: int
    per_file: list[FileReport] = Field(serialization_alias="perFile")
    skipped: list[str]
    notes: list[str] = []
