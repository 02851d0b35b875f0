"""Best-effort mirror of quarantines to a small JSON file, so another process (``doctor``) can see them.

OpenClaw keeps the same kind of file (``quarantine-health.ts``), keyed by process id. Records of
processes that are no longer alive are dropped whenever the file is read or rewritten. Failing to
read or write the file never affects resolution: it is logged at debug level and ignored.
"""

from __future__ import annotations

import json
import logging
import os
from dataclasses import asdict
from pathlib import Path
from typing import Any

from openclaw_ctx.config import default_state_dir
from openclaw_ctx.registry.records import QuarantineRecord

__all__ = ["HEALTH_FILE_NAME", "default_health_path", "read_health", "write_health"]

HEALTH_FILE_NAME = "context-engine-health.json"
_log = logging.getLogger("openclaw_ctx.registry.registry")


def default_health_path() -> Path:
    """``<OpenClaw state dir>/context-engine-health.json`` (resolved at call time)."""
    return default_state_dir() / HEALTH_FILE_NAME


def _alive(pid: int) -> bool:
    if pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # exists, owned by someone else
        return True
    except OSError:
        return False
    return True


def _load(path: Path) -> dict[int, list[dict[str, Any]]]:
    try:
        raw = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return {}
    except (OSError, ValueError) as exc:
        _log.debug("ignoring unreadable quarantine health file %s: %s", path, exc)
        return {}
    if not isinstance(raw, dict):
        return {}
    out: dict[int, list[dict[str, Any]]] = {}
    for key, records in raw.items():
        if isinstance(key, str) and key.isdigit() and isinstance(records, list) and _alive(int(key)):
            out[int(key)] = [r for r in records if isinstance(r, dict)]
    return out


def _record(pid: int, data: dict[str, Any]) -> QuarantineRecord | None:
    try:
        return QuarantineRecord(
            engine_id=str(data["engine_id"]),
            owner=data.get("owner"),
            operation=str(data["operation"]),
            reason=str(data["reason"]),
            failed_at=str(data["failed_at"]),
            pid=pid,
        )
    except KeyError:
        return None


def read_health(path: Path, *, exclude_pid: int | None = None) -> list[QuarantineRecord]:
    """Quarantines recorded by live processes (except `exclude_pid`), oldest first."""
    records = [
        rec
        for pid, items in _load(path).items()
        if pid != exclude_pid
        for rec in (_record(pid, item) for item in items)
        if rec is not None
    ]
    return sorted(records, key=lambda r: r.failed_at)


def write_health(path: Path, records: list[QuarantineRecord]) -> None:
    """Replace this process's records in the file (atomically; dead processes' records are pruned)."""
    try:
        data = _load(path)
        pid = os.getpid()
        if records:
            data[pid] = [{k: v for k, v in asdict(r).items() if k != "pid"} for r in records]
        else:
            data.pop(pid, None)
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f"{path.name}.{pid}.tmp")
        tmp.write_text(json.dumps({str(k): v for k, v in data.items()}, ensure_ascii=False), encoding="utf-8")
        os.replace(tmp, path)
    except OSError as exc:
        _log.debug("could not write quarantine health file %s: %s", path, exc)
