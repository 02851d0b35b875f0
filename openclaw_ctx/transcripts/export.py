"""Export stored sessions as OpenClaw JSONL (v3) transcripts.

Each session becomes one file (:mod:`openclaw_ctx.transcripts.export_lines` says what goes in it).
Exporting a session key writes one file per session of its chain (each successor's header names its
predecessor's exported file as `parentSession`) and a `sessions.json` that maps the key to the newest
session, so the directory imports back under the same key.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field
from pydantic.alias_generators import to_camel
from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncConnection

from openclaw_ctx._files import database_files, guard_output, write_atomic
from openclaw_ctx._time import ms_from_iso
from openclaw_ctx.errors import NotFoundError
from openclaw_ctx.store.models import Session
from openclaw_ctx.store.repo import SessionRow, active_session, get_session, session_chain
from openclaw_ctx.store.store import Store
from openclaw_ctx.transcripts.custom import EntryKinds, load_entry_kinds
from openclaw_ctx.transcripts.export_lines import session_lines
from openclaw_ctx.transcripts.write import BARE_KEY_PREFIX

__all__ = ["ExportReport", "ExportedFile", "export_session"]


class ExportedFile(BaseModel):
    """One written transcript."""

    model_config = ConfigDict(frozen=True)

    path: str
    session_id: str
    parent_session_id: str | None
    entries: int
    messages: int


class ExportReport(BaseModel):
    """What an export wrote; ``model_dump(by_alias=True)`` is what ``export --json`` prints."""

    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True)

    session_key: str
    sessions_json: str | None = None
    files: list[ExportedFile] = Field(default_factory=list)


def _write_atomic(path: Path, lines: list[str]) -> None:
    write_atomic(path, "".join(line + "\n" for line in lines))


def _exported(target: Path, session: SessionRow, lines: list[str], messages: int) -> ExportedFile:
    return ExportedFile(
        path=str(target),
        session_id=session.session_id,
        parent_session_id=session.parent_session_id,
        entries=len(lines) - 1,  # the header is not an entry
        messages=messages,
    )


def _ordered(chain: list[SessionRow]) -> list[SessionRow]:
    ids = {s.session_id for s in chain}
    placed: list[SessionRow] = []
    done: set[str] = set()
    remaining = list(chain)
    while remaining:
        ready = [s for s in remaining if s.parent_session_id not in ids or s.parent_session_id in done]
        ready = ready or remaining[:1]  # a cycle cannot happen through the schema, but never loop forever
        for s in ready:
            placed.append(s)
            done.add(s.session_id)
            remaining.remove(s)
    return placed


def _file_name(session: SessionRow, used: set[str]) -> str:
    name = Path(session.session_file).name if session.session_file else f"{session.session_id}.jsonl"
    if not name.endswith(".jsonl") or name in used:
        name = f"{session.session_id}.jsonl"
    used.add(name)
    return name


def _update_sessions_json(folder: Path, key: str, head: SessionRow, head_path: Path, imported: dict[str, Any]) -> Path:
    """Write the key's entry (and any other key that named the same session) into `folder/sessions.json`.

    An entry imported from OpenClaw's `sessions.json` comes back with every field it had; only
    `sessionId` and `sessionFile` are set to what was written.
    """
    path = folder / "sessions.json"
    data: dict[str, Any] = {}
    if path.is_file():
        try:
            loaded = json.loads(path.read_text(encoding="utf-8"))
            data = loaded if isinstance(loaded, dict) else {}
        except (UnicodeDecodeError, json.JSONDecodeError):
            data = {}
    # A bare file's pseudo-key (`file:<id>`) is ours, not OpenClaw's: it is never written there.
    wanted = dict(imported) if imported else ({} if key.startswith(BARE_KEY_PREFIX) else {key: {}})
    for name, stored in wanted.items():
        existing = data.get(name)
        entry = {**(existing if isinstance(existing, dict) else {}), **(stored if isinstance(stored, dict) else {})}
        entry.setdefault("updatedAt", ms_from_iso(head.created_at) or 0)
        entry.update({"sessionId": head.session_id, "sessionFile": str(head_path)})
        data[name] = entry
    _write_atomic(path, [json.dumps(data, ensure_ascii=False, indent=2)])
    return path


async def _imported_entries(conn: AsyncConnection, newest_first: list[SessionRow]) -> dict[str, Any] | None:
    """The `sessions.json` entries the chain was imported with: the newest session's that has them (a
    rotation after the import starts a session without them)."""
    ids = [s.session_id for s in newest_first]
    rows = await conn.execute(select(Session.session_id, Session.meta_json).where(Session.session_id.in_(ids)))
    metas: dict[str, str | None] = dict(rows.all())
    for session_id in ids:
        meta = json.loads(metas.get(session_id) or "{}")
        if isinstance(meta, dict) and isinstance(meta.get("sessionsJson"), dict):
            return dict(meta["sessionsJson"])
    return None


async def export_session(
    store: Store,
    *,
    session_key: str | None = None,
    session_id: str | None = None,
    out: Path,
    kinds: EntryKinds | None = None,
    force: bool = False,
) -> ExportReport:
    """Write sessions as OpenClaw JSONL v3 transcripts.

    Args:
        store: the open store.
        session_key: export every session of this key's chain into the directory `out`, plus `sessions.json`.
        session_id: export one session; `out` is the file (``*.jsonl``) or a directory to write it in.
        out: where to write.
        kinds: the custom entry kinds whose rows are written (default: core's and every installed engine's).
        force: replace transcript files that already exist (never the database itself).

    Returns:
        The files written.

    Raises:
        NotFoundError: no such session or key.
        OutputPathError: a file to write exists and `force` is not set, or it is the database; nothing
            was written.
        ValueError: neither or both of `session_key` and `session_id` given.
    """
    if (session_key is None) == (session_id is None):
        raise ValueError("give exactly one of session_key and session_id")
    out = await asyncio.to_thread(lambda: Path(out).expanduser().absolute())
    kinds = kinds if kinds is not None else load_entry_kinds()
    async with store.read() as conn:
        if session_id is not None:
            session = await get_session(conn, session_id)
            target = out if out.suffix == ".jsonl" else out / _file_name(session, set())
            guard_output(target, force=force, protected=database_files(Path(store.path)))
            lines, messages = await session_lines(conn, session, None, kinds)
            await asyncio.to_thread(_write_atomic, target, lines)
            return ExportReport(session_key=session.session_key, files=[_exported(target, session, lines, messages)])
        assert session_key is not None
        chain = _ordered(await session_chain(conn, session_key))
        if not chain:
            raise NotFoundError(f"no sessions stored under key {session_key!r}")
        report = ExportReport(session_key=session_key)
        paths: dict[str, Path] = {}
        used: set[str] = set()
        targets = [out / _file_name(session, used) for session in chain]
        # Every target is checked before the first is written: a refused export writes nothing.
        for target in [*targets, out / "sessions.json"]:
            guard_output(
                target, force=force or target.name == "sessions.json", protected=database_files(Path(store.path))
            )
        for session, target in zip(chain, targets, strict=True):
            parent = paths.get(session.parent_session_id or "")
            lines, messages = await session_lines(conn, session, str(parent) if parent else None, kinds)
            await asyncio.to_thread(_write_atomic, target, lines)
            paths[session.session_id] = target
            report.files.append(_exported(target, session, lines, messages))
        head = await active_session(conn, session_key) or chain[-1]
        imported = await _imported_entries(conn, [head, *reversed(chain)])
        written = await asyncio.to_thread(
            _update_sessions_json, out, session_key, head, paths[head.session_id], imported or {}
        )
        report.sessions_json = str(written)
    return report
