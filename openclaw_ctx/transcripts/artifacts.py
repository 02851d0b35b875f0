"""What each file in an OpenClaw sessions directory is, by OpenClaw's own naming rules (its `artifacts` module).

Besides the live ``<sessionId>.jsonl`` transcripts, a sessions directory holds the history of
``/reset``, ``/new`` and deleted sessions (``<id>.jsonl.reset.<stamp>``, ``.deleted.<stamp>``),
backups (``.bak.<stamp>``, ``.migrated``, ``.pre-doctor-…-repair-….bak``), compaction checkpoints
(``<id>.checkpoint.<uuid>.jsonl``) and trajectory sidecars (``<id>.trajectory.jsonl``: run telemetry,
not a transcript). Archives may be zstd-compressed (a ``.zst`` suffix).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal

__all__ = ["Artifact", "classify"]

Kind = Literal["transcript", "archive", "backup", "checkpoint", "trajectory", "other"]

_STAMP = re.compile(r"^(\d{4}-\d{2}-\d{2}T\d{2}-\d{2}-\d{2}(?:\.\d{3})?Z)(?:\.[0-9a-f]{32})?$")
_CHECKPOINT = re.compile(
    r"^(.+)\.checkpoint\.[0-9a-f]{8}-[0-9a-f]{4}-[1-5][0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}\.jsonl$", re.I
)
_MIGRATED = re.compile(r"^(.+)\.jsonl\.migrated(?:\.\d+)?$")
_PRE_DOCTOR = re.compile(
    r"^(.+)\.jsonl\.pre-doctor-(?:branch|openai-codex)-repair-\d{4}-\d{2}-\d{2}T\d{2}-\d{2}-\d{2}-\d{3}Z\.bak$"
)
ZSTD_SUFFIX = ".zst"


@dataclass(frozen=True)
class Artifact:
    """One file's role: `kind`, the session it belongs to, why it was archived, and whether it is zstd."""

    kind: Kind
    session_id: str | None = None
    reason: str | None = None  # reset, deleted, bak, migrated, pre-doctor repair, or checkpoint
    stamp: str | None = None  # when it was archived, as the file name spells it
    compressed: bool = False

    @property
    def history(self) -> bool:
        """A session's own history (a live transcript, or one archived by /reset, /new or deletion)."""
        return self.kind in ("transcript", "archive")


def _session_of(prefix: str) -> str:
    return prefix[: -len(".jsonl")] if prefix.endswith(".jsonl") else prefix


def classify(name: str) -> Artifact:
    """The role of a file named `name` in a sessions directory."""
    if name.endswith((".trajectory.jsonl", ".trajectory-path.json")):
        return Artifact("trajectory", name.split(".trajectory", 1)[0])
    compressed = name.endswith(ZSTD_SUFFIX)
    plain = name[: -len(ZSTD_SUFFIX)] if compressed else name
    if match := _CHECKPOINT.match(plain):
        return Artifact("checkpoint", match.group(1), "checkpoint", compressed=compressed)
    for reason in ("reset", "deleted", "bak"):
        marker = f".{reason}."
        at = plain.rfind(marker)
        if at > 0 and (stamp := _STAMP.match(plain[at + len(marker) :])):
            kind: Kind = "backup" if reason == "bak" else "archive"
            return Artifact(kind, _session_of(plain[:at]), reason, stamp.group(1), compressed)
    if match := _MIGRATED.match(plain):
        return Artifact("backup", match.group(1), "migrated", compressed=compressed)
    if match := _PRE_DOCTOR.match(plain):
        return Artifact("backup", match.group(1), "pre-doctor repair", compressed=compressed)
    if plain.endswith(".jsonl") and plain != ".jsonl":
        return Artifact("transcript", plain[: -len(".jsonl")], compressed=compressed)
    return Artifact("other")
