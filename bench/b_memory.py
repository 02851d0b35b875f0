"""Memory (issue 7 item 7): peak RSS of a turn at 100k history, and of importing a transcript directory.

Each workload runs in a fresh child process (:mod:`bench.memprobe`), which reports its peak RSS
(``ru_maxrss``) and the RSS after imports and the tokenizer vocabulary (``base``: the interpreter,
SQLAlchemy, pydantic, tiktoken's o200k table), so the table shows the whole process and the note
what the workload itself added.

- **turn**: 10 turns (:mod:`bench.b_turn`) on the cached lossless-claw and legacy histories of the
  largest size (100k messages at full). Target: peak ≤ 200 MB.
- **import**: an OpenClaw agent directory of generated transcripts (``agents/main/sessions/*.jsonl``
  plus ``sessions.json``; same generator as the other benchmarks, ~2.8 KB per JSONL line) imported
  with ``transcripts_import.import_paths`` at two sizes, 4× apart. Bounded means the peak does not
  grow with the directory: ratio of peaks (large / small) ≤ 1.25. The issue asks for 1 GB; the full
  size writes ~440 MB (≈160k messages) to keep a full run within minutes on this box; the 4× step
  is what shows boundedness. Files are equal-sized, because a transcript is read whole (its branch
  tree must be resolved before writing), so the bound is the largest single file, not the directory.
"""

from __future__ import annotations

import json
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any

from bench import data, history
from bench.core import BenchContext, Row, Size, Stat, Target, pick

NAME = "memory"
TITLE = "Memory: peak RSS of a turn at 100k history and of a transcript-directory import"


def _probe(*args: str) -> dict[str, Any]:
    out = subprocess.run(
        [sys.executable, "-m", "bench.memprobe", *args],
        check=True,
        capture_output=True,
        text=True,
        cwd=Path(__file__).resolve().parent.parent,
    )
    result: dict[str, Any] = json.loads(out.stdout.strip().splitlines()[-1])
    return result


def write_agent_dir(root: Path, files: int, per_file: int, *, seed: int = 31) -> int:
    """Write `files` transcripts of `per_file` messages under ``root/agents/main/sessions``; total bytes."""
    folder = root / "agents" / "main" / "sessions"
    folder.mkdir(parents=True, exist_ok=True)
    listing: dict[str, Any] = {}
    total = 0
    for f in range(files):
        sid = str(uuid.UUID(int=(seed << 64) + f, version=4))
        path = folder / f"{sid}.jsonl"
        header = {"type": "session", "version": 3, "id": sid, "timestamp": "2026-02-01T09:00:00.000Z", "cwd": "/w"}
        parent = None
        with path.open("w", encoding="utf-8") as out:
            out.write(json.dumps(header) + "\n")
            for i, msg in enumerate(data.stream(per_file, seed=seed + f)):
                entry_id = f"{f:04x}{i:08x}"
                stamp = f"2026-02-01T{9 + (i // 3600) % 12:02d}:{(i // 60) % 60:02d}:{i % 60:02d}.000Z"
                entry = {"type": "message", "id": entry_id, "parentId": parent, "timestamp": stamp, "message": msg}
                out.write(json.dumps(entry, ensure_ascii=False) + "\n")
                parent = entry_id
        total += path.stat().st_size
        listing[f"agent:main:bench-{f:04d}"] = {"sessionId": sid, "sessionFile": path.name}
    (folder / "sessions.json").write_text(json.dumps(listing), encoding="utf-8")
    return total


def run(size: Size, ctx: BenchContext) -> list[Row]:
    """Run the memory benchmark at `size`."""
    n = pick(size, 1000, 10_000, 100_000)
    rows: list[Row] = []
    for engine_id in ("lossless-claw", "legacy"):
        h = history.history(ctx, n, engine_id, copy_as=f"memory-{engine_id}-{n}.db")  # type: ignore[arg-type]
        ctx.log(f"memory: turns on the {n:,}-message {engine_id} history in a child process")
        got = _probe("turn", str(h.path), str(n), engine_id, "10")
        rows.append(
            Row(
                NAME,
                f"{engine_id}: peak RSS of 10 turns at {n:,} msgs history",
                "MB",
                Stat.of([got["peak_mb"]]),
                False,
                target=Target("value", "<=", 200),
                layer="whole process: interpreter + imports + vocabulary + the turns",
                note=f"{got['base_mb']:.0f} MB before the first turn",
                extra=got,
            )
        )
    files_small, files_large, per_file = pick(size, (2, 8, 200), (6, 24, 1000), (20, 80, 2000))
    peaks: list[dict[str, Any]] = []
    for files in (files_small, files_large):
        root = ctx.workdir / f"agentdir-{files}"
        ctx.log(f"memory: writing {files} transcripts × {per_file} messages")
        total = write_agent_dir(root, files, per_file)
        db = ctx.path(f"memory-import-{files}.db")
        ctx.log(f"memory: importing {total / 2**20:.0f} MB in a child process")
        got = _probe("import", str(root), str(db))
        got["input_mb"] = total / 2**20
        peaks.append(got)
    small, large = peaks
    for got in peaks:
        sampled = got.get("sampled_peak", {})
        rows.append(
            Row(
                NAME,
                f"import a {got['input_mb']:.0f} MB transcript dir ({got.get('messages', 0):,} msgs)",
                "MB",
                Stat.of([got["peak_mb"]]),
                False,
                layer="transcripts_import.import_paths (one file in memory at a time)",
                note=(
                    f"{got['base_mb']:.0f} MB before; heap peak {sampled.get('RssAnon', 0):.0f} MB, "
                    f"mapped DB pages peak {sampled.get('RssFile', 0):.0f} MB; {got['seconds']:.0f} s"
                ),
                extra=got,
            )
        )
    growth = f"input grew {large['input_mb'] / small['input_mb']:.1f}×"
    rows.append(
        Row(
            NAME,
            f"import peak RSS growth, {large['input_mb']:.0f} MB vs {small['input_mb']:.0f} MB input",
            "MB",
            Stat.of([large["peak_mb"]]),
            False,
            Stat.of([small["peak_mb"]]),
            f"peak at {small['input_mb']:.0f} MB input",
            Target("ratio", "<=", 1.25),
            note=f"{growth}; includes SQLite's mmap of the growing file (capped by mmap_size=256 MB)",
        )
    )
    if all("sampled_peak" in p for p in peaks):
        rows.append(
            Row(
                NAME,
                f"import heap (RssAnon) peak growth, {large['input_mb']:.0f} MB vs {small['input_mb']:.0f} MB input",
                "MB",
                Stat.of([large["sampled_peak"]["RssAnon"]]),
                False,
                Stat.of([small["sampled_peak"]["RssAnon"]]),
                f"heap peak at {small['input_mb']:.0f} MB input",
                Target("ratio", "<=", 1.25),
                note=f"{growth}; sampled every 20 ms",
            )
        )
    return rows
