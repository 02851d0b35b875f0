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

from openclaw_ctx.errors import HostStoreError, NotFoundError
from openclaw_ctx.transcripts.agent_store import (
    AGENT_STORE_NAME,
    HostSession,
    agent_database_path,
    is_agent_store,
    list_host_sessions,
    parse_session_file_marker,
    read_host_header,
)
from openclaw_ctx.transcripts.artifacts import Artifact, classify
from openclaw_ctx.transcripts.entries import SessionHeader, TranscriptLineError
from openclaw_ctx.transcripts.jsonl import iter_entries

__all__ = ["SourceFile", "discover", "link_chain", "parent_candidates", "read_header"]

_UUID_TAIL = re.compile(r"([0-9a-fA-F-]{36})$")


@dataclass
class SourceFile:
    """A transcript to import (a file, or a session of an agent store), with the session key it is given."""

    path: Path
    session_key: str | None = None
    header: SessionHeader | None = None
    header_error: str | None = None
    parent_id: str | None = None
    # Every `sessions.json` entry naming this file, verbatim, by key (a cron job and its run may share one).
    store_entries: dict[str, Any] = field(default_factory=dict)
    host: HostSession | None = None
    """Set when the transcript is a session of OpenClaw's SQLite agent store at `path`."""
    host_size: int = 0
    previous_session_id: str | None = None
    """The session this one continues, as the agent store records it (a JSONL file's header says it)."""

    @property
    def name(self) -> str:
        """How reports name it: the file, or ``<store>#<session id>``."""
        return self.host.name if self.host is not None else str(self.path)

    @property
    def size(self) -> int:
        """Bytes to read."""
        return self.host_size if self.host is not None else self.path.stat().st_size


_MAX_DEPTH = 6


def _holds_sessions(folder: Path) -> bool:
    if (folder / "sessions.json").is_file() or (folder / AGENT_STORE_NAME).is_file():
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


def _read_sessions_json(folder: Path, problems: list[str]) -> dict[Path | HostSession, dict[str, Any]]:
    """The `sessions.json` entries of `folder` by the transcript they name (in the file's key order): a
    file, or an agent store's session for a ``sqlite:`` marker (OpenClaw 2026.7+)."""
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
    keyed: dict[Path | HostSession, dict[str, Any]] = {}
    for key, entry in data.items():
        session_id = entry.get("sessionId") if isinstance(entry, dict) else None
        marker = parse_session_file_marker(entry.get("sessionFile")) if isinstance(entry, dict) else None
        if marker is not None:
            # The marker names the store where it was written; a copied agent directory has it beside.
            # The store beside the sessions/ folder first: importing a copy must not read the live store.
            candidates = (agent_database_path(path), marker.store_path)
            store = next((c for c in candidates if c.is_file()), None)
            if store is None:
                problems.append(f"{path}: session key {key!r}: agent store {marker.store_path} not found")
                continue
            where = HostSession(store.resolve(), marker.session_id, marker.agent_id)
            keyed.setdefault(where, {})[key] = entry
            continue
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


def _host_sources(store: Path, found: dict[str, SourceFile], problems: list[str]) -> int:
    """Add every session of an agent store to `found`; how many it holds."""
    store = store.resolve()  # one name per store, however it was reached (a path given, a marker)
    try:
        listings = list_host_sessions(store)
    except HostStoreError as exc:
        problems.append(str(exc))
        return 0
    for listing in listings:
        source = found.setdefault(listing.session.name, SourceFile(listing.session.store_path, host=listing.session))
        source.host_size, source.previous_session_id = listing.size, listing.previous_session_id
        source.session_key = source.session_key or listing.session_key
        if listing.entry is not None and listing.session_key is not None:
            source.store_entries.setdefault(listing.session_key, listing.entry)
    return len(listings)


def _folder_sources(folder: Path, found: dict[str, SourceFile], problems: list[str], notes: list[str]) -> int:
    """Add the transcripts of one directory to `found` (by OpenClaw's naming rules); how many."""
    keyed = _read_sessions_json(folder, problems)
    files = _host_sources(folder / AGENT_STORE_NAME, found, problems) if (folder / AGENT_STORE_NAME).is_file() else 0
    for where in (k for k in keyed if isinstance(k, HostSession)):
        if where.name not in found:
            files += _host_sources(where.store_path, found, problems)
    named = [(f, classify(f.name)) for f in sorted(folder.iterdir()) if f.is_file()]
    primaries = {a.session_id for _, a in named if a.kind == "transcript" and a.session_id}
    for file, artifact in named:
        if artifact.kind == "other":
            continue
        if (note := _left_out(file, artifact, primaries)) is not None:
            notes.append(note)
            continue
        resolved = file.resolve()
        found.setdefault(str(resolved), SourceFile(resolved))
        files += 1
    for named_by, entries in keyed.items():
        source = found.get(named_by.name if isinstance(named_by, HostSession) else str(named_by))
        if source is not None:
            source.session_key = next(iter(entries))
            source.store_entries = {**source.store_entries, **entries}
    return files


def discover(paths: Iterable[str | Path]) -> tuple[list[SourceFile], list[str], list[str]]:
    """The transcripts under `paths` (files, session dirs, agent dirs, agent stores), the problems found,
    and notes naming each file left out on purpose and why.

    Raises:
        NotFoundError: a path does not exist.
    """
    found: dict[str, SourceFile] = {}
    problems: list[str] = []
    notes: list[str] = []
    for raw in paths:
        path = Path(raw).expanduser()
        if path.name == "sessions.json" and path.is_file():
            path = path.parent
        if path.is_file():
            if not is_agent_store(path):
                found.setdefault(str(path.resolve()), SourceFile(path.resolve()))
            elif not _host_sources(path.resolve(), found, problems):
                problems.append(f"{path}: the agent store holds no transcripts")
            continue
        if not path.is_dir():
            raise NotFoundError(f"{path}: {_why_not_a_transcript(path)}")
        files = sum(_folder_sources(folder, found, problems, notes) for folder in _session_dirs(path))
        if not files:
            problems.append(f"{path}: no transcripts (*.jsonl, {AGENT_STORE_NAME}) found")
    return _prefer_the_store(list(found.values()), notes), problems, notes


def _prefer_the_store(sources: list[SourceFile], notes: list[str]) -> list[SourceFile]:
    """Leave out a JSONL file of a session the agent store also holds: since 2026.7 the store is the
    transcript and the file the legacy copy it was migrated from."""
    in_store = {s.host.session_id for s in sources if s.host is not None}
    kept = []
    for source in sources:
        if source.host is None and (match := _UUID_TAIL.search(source.path.name.removesuffix(".jsonl"))):
            if match.group(1) in in_store and classify(source.path.name).kind == "transcript":
                notes.append(f"{source.path}: the legacy copy of a session the agent store holds; not imported")
                continue
        kept.append(source)
    return kept


def read_header(source: SourceFile) -> None:
    """Fill `source.header`, or `source.header_error` saying why it has none."""
    try:
        first = read_host_header(source.host) if source.host else next(iter_entries(source.path), None)
    except HostStoreError as exc:
        source.header_error = str(exc)
        return
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
    """The file name and the session id a `parentSession` path names (an agent store's marker names an id)."""
    if (marker := parse_session_file_marker(parent)) is not None:
        return f"{marker.session_id}.jsonl", marker.session_id
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
        if source.header and source.previous_session_id:
            parent = by_id.get(source.previous_session_id)
            if parent is not None and parent is not source:
                parents[source.header.id] = parent
                source.parent_id = parent.header.id if parent.header else None
        elif source.header and source.header.parent_session:
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

    return sorted(sources, key=lambda s: (depth(s), s.name))
