"""The fault suite's machinery: real CLI processes, real mounts, store fingerprints, and its figures.

Every check here goes through `python -m openclaw_ctx` in a subprocess onto a real SQLite file; the
mounts (a small tmpfs for a full disk, a read-only bind mount) are real kernel mounts, skipped with a
reason where this process may not mount. The figures each test records are printed at the end of
the run by `tests/faults/conftest.py`, the table the reliability issue asks for.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import random
import sqlite3
import subprocess
import sys
from collections import Counter, defaultdict
from collections.abc import Iterator
from pathlib import Path

import pytest

FIGURES: dict[str, Counter[str]] = defaultdict(Counter)
"""category → counts (runs, kills, consistent, recovered, lost, duplicated, tracebacks, …)."""

COLUMNS = ("runs", "kills", "consistent", "recovered", "lost", "duplicated", "tracebacks")


def record(category: str, **counts: int) -> None:
    """Add `counts` to the category's row of the figures table."""
    FIGURES[category].update(counts)


def cli(db: Path, *args: str, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    """Run the real CLI on `db` to the end."""
    return subprocess.run(
        [sys.executable, "-m", "openclaw_ctx", "--db", str(db), *args],
        capture_output=True,
        text=True,
        env={**os.environ, "COLUMNS": "200"},
        cwd=db.parent if db.parent.exists() else None,
        timeout=timeout,
        check=False,
    )


def popen(db: Path, *args: str) -> subprocess.Popen[bytes]:
    """Start the real CLI on `db` (to be killed)."""
    return subprocess.Popen(
        [sys.executable, "-m", "openclaw_ctx", "--db", str(db), *args],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env={**os.environ, "COLUMNS": "200"},
    )


def no_traceback(result: subprocess.CompletedProcess[str]) -> bool:
    return "Traceback" not in result.stderr and "Traceback" not in result.stdout


def write_transcript(path: Path, *, messages: int, words: int, seed: int) -> Path:
    """An OpenClaw v3 transcript of alternating user/assistant messages of `words` random words each."""
    rng = random.Random(seed)
    vocabulary = ["alpha", "beta", "gamma", "delta", "kappa", "omega", "zeta", "sigma"]
    header = {"type": "session", "version": 3, "id": f"fault-{seed}", "timestamp": "2026-03-14T09:02:11.117Z"}
    lines = [json.dumps(header)]
    for n in range(messages):
        text = " ".join(f"{rng.choice(vocabulary)}{rng.randint(0, 99_999)}" for _ in range(words))
        message: dict[str, object] = {
            "role": "user" if n % 2 == 0 else "assistant",
            "content": [{"type": "text", "text": text}],
            "timestamp": 1_773_478_931_117 + n * 1000,
        }
        if n % 2:
            message |= {
                "api": "openai-responses",
                "provider": "openai",
                "model": "gpt-test",
                "usage": {"input": 1, "output": 1, "cacheRead": 0, "cacheWrite": 0, "totalTokens": 2},
                "stopReason": "stop",
            }
        entry = {
            "type": "message",
            "id": f"s{seed}e{n}",
            "parentId": f"s{seed}e{n - 1}" if n else None,
            "timestamp": "2026-03-14T09:02:11.117Z",
            "message": message,
        }
        lines.append(json.dumps(entry))
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def message_fingerprint(db: Path) -> Counter[tuple[str, str, str | None, str]]:
    """Every stored message as (session key, role, entry id, content hash), with multiplicity."""
    with contextlib.closing(sqlite3.connect(db)) as conn:
        rows = conn.execute("SELECT session_key, role, entry_id, message_json FROM messages").fetchall()
    return Counter((k, r, e, hashlib.sha256(m.encode()).hexdigest()[:16]) for k, r, e, m in rows)


def integrity(db: Path) -> list[str]:
    with contextlib.closing(sqlite3.connect(db)) as conn:
        return [str(row[0]) for row in conn.execute("PRAGMA integrity_check")]


def file_digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _mount(*args: str) -> None:
    subprocess.run(["mount", *args], check=True, capture_output=True, text=True)


def _can_mount() -> str | None:
    if sys.platform != "linux":
        return "mounts are Linux-only here"
    if os.geteuid() != 0:
        return "mounting a tmpfs or a read-only bind needs root (CI runs as root)"
    return None


@contextlib.contextmanager
def _mounted(target: Path, *mount_args: str, then: tuple[str, ...] = ()) -> Iterator[Path]:
    """`mount *mount_args target` (and `mount *then target`) for the block; skipped where it cannot mount."""
    reason = _can_mount()
    if reason:
        pytest.skip(reason)
    target.mkdir(parents=True, exist_ok=True)
    try:
        _mount(*mount_args, str(target))
    except subprocess.CalledProcessError as exc:
        pytest.skip(f"cannot mount {' '.join(mount_args)} here: {exc.stderr.strip()}")
    try:
        if then:
            _mount(*then, str(target))
        yield target
    finally:
        subprocess.run(["umount", "-l", str(target)], check=False)


def tmpfs(path: Path, size: str) -> contextlib.AbstractContextManager[Path]:
    """A real tmpfs of `size` mounted at `path` (the full-disk tests fill it)."""
    return _mounted(path, "-t", "tmpfs", "-o", f"size={size}", "tmpfs")


def resize(path: Path, size: str) -> None:
    _mount("-o", f"remount,size={size}", str(path))


def read_only_view(source: Path, view: Path) -> contextlib.AbstractContextManager[Path]:
    """`source` bind-mounted read-only at `view`: the kernel refuses every write, root's included."""
    return _mounted(view, "--bind", str(source), then=("-o", "remount,bind,ro"))
