"""Child process for the memory benchmark: run one workload, print peak RSS as JSON.

``python -m bench.memprobe turn DB N ENGINE TURNS`` runs TURNS turns (as :mod:`bench.b_turn`) on a
history database; ``python -m bench.memprobe import DIR DB`` imports an OpenClaw transcript directory.
A fresh process per workload, so ``ru_maxrss`` is the peak of that workload alone (plus the
interpreter and imports, reported separately as ``base_mb``).
"""

from __future__ import annotations

import asyncio
import json
import resource
import sys
import threading
import time
from pathlib import Path


def _rss_mb() -> float:
    # Linux reports ru_maxrss in KiB.
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def _current_mb() -> float:
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    return _rss_mb()


def _status_mb(*fields: str) -> dict[str, float]:
    """Selected ``/proc/self/status`` sizes in MB (RssAnon = heap, RssFile = mapped file pages)."""
    out: dict[str, float] = {}
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            name, _, value = line.partition(":")
            if name in fields:
                out[name] = int(value.split()[0]) / 1024
    except OSError:
        pass
    return out


class _Sampler(threading.Thread):
    """Samples RssAnon (heap) and RssFile (mapped file pages: SQLite's mmap of the database) every 20 ms."""

    def __init__(self) -> None:
        super().__init__(daemon=True)
        self.peak: dict[str, float] = {"RssAnon": 0.0, "RssFile": 0.0}
        self._halt = threading.Event()

    def run(self) -> None:
        while not self._halt.wait(0.02):
            for name, value in _status_mb("RssAnon", "RssFile").items():
                self.peak[name] = max(self.peak[name], value)

    def stop(self) -> dict[str, float]:
        self._halt.set()
        self.join()
        return self.peak


def main(argv: list[str]) -> int:
    """Run the workload named by argv[0]; print ``{"base_mb", "peak_mb", "seconds", ...}``."""
    from bench import b_turn
    from openclaw_ctx.store.store import Store
    from openclaw_ctx.tokens import get_counter
    from openclaw_ctx.transcripts import import_paths

    get_counter()  # the vocabulary is part of the baseline, not of the workload
    base = _current_mb()
    sampler = _Sampler()
    sampler.start()
    start = time.perf_counter()
    extra: dict[str, object] = {}
    if argv[0] == "turn":
        db, n, engine, turns = Path(argv[1]), int(argv[2]), argv[3], int(argv[4])
        asyncio.run(b_turn._turns(db, engine, n, turns, warmup=0))
    elif argv[0] == "import":
        folder, db = Path(argv[1]), Path(argv[2])

        async def go() -> None:
            store = await Store.open(db)
            try:
                report = await import_paths(store, [folder])
                extra["files"] = len(report.files)
                extra["messages"] = sum(getattr(f, "messages_new", 0) or 0 for f in report.files)
            finally:
                await store.close()

        asyncio.run(go())
    else:
        raise SystemExit(f"unknown workload {argv[0]!r}")
    extra["sampled_peak"] = sampler.stop()
    status = _status_mb("RssAnon", "RssFile", "RssShmem")
    print(
        json.dumps(
            {"base_mb": base, "peak_mb": _rss_mb(), "seconds": time.perf_counter() - start, "end": status, **extra}
        )
    )
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
