"""Finding the transcripts to import: files, `sessions/` directories, agent directories, an `agents/` root.

Inside a directory every file is read by OpenClaw's naming rules (:mod:`.artifacts`): live transcripts
and the archives `/reset`, `/new` and deletion leave import as sessions; a backup or compaction
checkpoint is left out, with a note, when the transcript it copies is there (else it is the only copy
and imports); trajectory sidecars are left out with a note. A directory without transcripts is
searched below (a folder of exported agent directories, an OpenClaw state directory).

Session keys come from `sessions.json` when a whole agent directory is imported (a successor's
ancestors inherit the key). A file whose header names a `parentSession` is linked to that parent, and
parents are imported before their successors.
"""

from __future__ import annotations

import errno
import json
import re
import stat
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from openclaw_ctx.errors import NotFoundError
from openclaw_ctx.transcripts.artifacts import Artifact, classify
from openclaw_ctx.transcripts.entries import SessionHeader, TranscriptLineError
from openclaw_ctx.transcripts.jsonl import iter_entries

__all__ = ["SourceFile", "discover", "link_chain", "parent_candidates", "read_header"]

_UUID_TAIL = re.compile(r"([0-9a-fA-F-]{36})$")


@dataclass
class SourceFile:
    """A transcript file to import, with the session key `sessions.json` gives it (if any)."""

    path: Path
    session_key: str | None = None
    header: SessionHeader | None = None
    header_error: str | None = None
    parent_id: str | None = None
    # Every `sessions.json` entry naming this file, verbatim, by key (a cron job and its run may share one).
    store_entries: dict[str, Any] = field(default_factory=dict)

    @property
    def size(self) -> int:
        """File size in bytes."""
        return self.path.stat().st_size


_MAX_DEPTH = 6


def _holds_sessions(folder: Path) -> bool:
    if (folder / "sessions.json").is_file():
        return True
    return any(f.is_file() and classify(f.name).kind != "other" for f in folder.iterdir())


def _session_dirs(root: Path, depth: int = 0, seen: set[Path] | None = None) -> list[Path]:
    """The directories under `root` that hold transcripts (`root` itself when it does)."""
    seen = set() if seen is None else seen
    real = root.resolve()
    if real in seen or depth > _MAX_DEPTH:
        return []
    seen.add(real)
    try:
        if _holds_sessions(root):
            return [root]
        children = sorted(d for d in root.iterdir() if d.is_dir())
    except OSError:
        return []
    return [found for child in children for found in _session_dirs(child, depth + 1, seen)]


def _left_out(path: Path, artifact: Artifact, primaries: set[str]) -> str | None:
    """Why a file is not imported (a note), or None to import it."""
    if artifact.kind == "trajectory":
        return f"{path}: an OpenClaw trajectory sidecar (run telemetry, not a transcript); not imported"
    if artifact.kind in ("backup", "checkpoint") and artifact.session_id in primaries:
        what = "compaction checkpoint" if artifact.kind == "checkpoint" else f"backup ({artifact.reason})"
        return f"{path}: an OpenClaw {what} of {artifact.session_id}.jsonl, which holds its entries; not imported"
    return None


def _resolve_listed(folder: Path, session_id: str, session_file: Any) -> Path | None:
    candidates: list[Path] = []
    if isinstance(session_file, str) and session_file:
        given = Path(session_file)
        candidates += [given if given.is_absolute() else folder / given, folder / given.name]
    candidates.append(folder / f"{session_id}.jsonl")
    candidates += sorted(folder.glob(f"*_{session_id}.jsonl"))
    return next((c for c in candidates if c.is_file()), None)


def _read_sessions_json(folder: Path, problems: list[str]) -> dict[Path, dict[str, Any]]:
    """The `sessions.json` entries of `folder` by the transcript they name (in the file's key order)."""
    path = folder / "sessions.json"
    if not path.is_file():
        return {}
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        problems.append(f"{path}: not valid JSON ({exc}); its files are imported as bare transcripts")
        return {}
    if not isinstance(data, dict):
        problems.append(f"{path}: expected an object of session keys; its files are imported as bare transcripts")
        return {}
    keyed: dict[Path, dict[str, Any]] = {}
    for key, entry in data.items():
        session_id = entry.get("sessionId") if isinstance(entry, dict) else None
        if not isinstance(session_id, str) or not session_id:
            problems.append(f"{path}: session key {key!r} has no sessionId")
            continue
        file = _resolve_listed(folder, session_id, entry.get("sessionFile"))
        if file is None:
            problems.append(f"{path}: session key {key!r}: transcript for {session_id} not found")
            continue
        keyed.setdefault(file.resolve(), {})[key] = entry
    return keyed


def _why_not_a_transcript(path: Path) -> str:
    """Why `path` is neither a file nor a directory to import: missing, a dangling or looping link, or a device."""
    try:
        mode = path.stat().st_mode
    except RuntimeError:  # Python < 3.13 reports a symlink loop this way
        return "a symbolic link loop"
    except OSError as exc:
        if path.is_symlink():
            return "a symbolic link loop" if exc.errno == errno.ELOOP else "a symbolic link to nothing"
        return "no such file or directory"
    if stat.S_ISFIFO(mode):
        return "a named pipe, not a transcript file (copy it to a file first)"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "a device, not a transcript file"
    if stat.S_ISSOCK(mode):
        return "a socket, not a transcript file"
    return "not a regular file or directory"


def discover(paths: Iterable[str | Path]) -> tuple[list[SourceFile], list[str], list[str]]:
    """The transcript files under `paths` (files, session dirs, agent dirs), the problems found, and notes
    naming each file left out on purpose and why.

    Raises:
        NotFoundError: a path does not exist.
    """
    found: dict[Path, SourceFile] = {}
    problems: list[str] = []
    notes: list[str] = []
    for raw in paths:
        path = Path(raw).expanduser()
        if path.name == "sessions.json" and path.is_file():
            path = path.parent
        if path.is_file():
            found.setdefault(path.resolve(), SourceFile(path.resolve()))
            continue
        if not path.is_dir():
            raise NotFoundError(f"{path}: {_why_not_a_transcript(path)}")
        files = 0
        for folder in _session_dirs(path):
            keyed = _read_sessions_json(folder, problems)
            named = [(f, classify(f.name)) for f in sorted(folder.iterdir()) if f.is_file()]
            primaries = {a.session_id for _, a in named if a.kind == "transcript" and a.session_id}
            for file, artifact in named:
                if artifact.kind == "other":
                    continue
                if (note := _left_out(file, artifact, primaries)) is not None:
                    notes.append(note)
                    continue
                resolved = file.resolve()
                source = found.setdefault(resolved, SourceFile(resolved))
                if entries := keyed.get(resolved):
                    source.session_key = next(iter(entries))
                    source.store_entries = entries
                files += 1
        if not files:
            problems.append(f"{path}: no transcripts (*.jsonl) found")
    return list(found.values()), problems, notes


def read_header(source: SourceFile) -> None:
    """Fill `source.header`, or `source.header_error` saying why it has none."""
    try:
        first = next(iter_entries(source.path), None)
    except OSError as exc:
        source.header_error = f"cannot read: {exc}"
        return
    if isinstance(first, SessionHeader):
        source.header = first
    elif isinstance(first, TranscriptLineError):
        source.header_error = f"no usable session header ({first})"
    else:
        source.header_error = "no session header"


def parent_candidates(parent: str) -> tuple[str, str]:
    """The file name and the session id a `parentSession` path names."""
    name = Path(parent).name
    stem = name[:-6] if name.endswith(".jsonl") else name
    match = _UUID_TAIL.search(stem)
    return name, match.group(1) if match else stem.rsplit("_", 1)[-1]


def link_chain(sources: list[SourceFile]) -> list[SourceFile]:
    """Resolve parents among the sources, spread keys to ancestors, order parents first."""
    by_name = {s.path.name: s for s in sources if s.header}
    by_id = {s.header.id: s for s in sources if s.header}
    parents: dict[str, SourceFile] = {}
    for source in sources:
        if source.header and source.header.parent_session:
            name, guessed_id = parent_candidates(source.header.parent_session)
            parent = by_name.get(name) or by_id.get(guessed_id)
            if parent is not None and parent is not source:
                parents[source.header.id] = parent
                source.parent_id = parent.header.id if parent.header else None
    for source in sources:
        current, key, seen = source, source.session_key, set()
        while key and current.header and current.header.id in parents and id(current) not in seen:
            seen.add(id(current))
            current = parents[current.header.id]
            current.session_key = current.session_key or key

    def depth(s: SourceFile) -> int:
        n, current = 0, s
        while current.header and current.header.id in parents and n < len(sources):
            current, n = parents[current.header.id], n + 1
        return n

    return sorted(sources, key=lambda s: (depth(s), str(s.path)))
