"""Benchmarks for openclaw-ctx: hot paths against raw SQLite and peer session stores, in one process.

Each benchmark is a module ``bench/b_<name>.py`` with ``NAME``, ``TITLE`` and
``run(size, ctx) -> list[Row]``. ``python -m bench`` runs them all; ``python -m bench NAME --size tiny``
runs one. They print figures and ratios; they are not tests (``tests/project/test_bench_smoke.py`` only
checks that each still runs at the tiny size).
"""

from __future__ import annotations

import importlib
from types import ModuleType

from bench.core import BenchContext, PeerMissing, Row, Size

__all__ = ["BENCHMARKS", "BenchContext", "PeerMissing", "Row", "Size", "load", "run_one"]

# Run order: cheap and foundational first.
BENCHMARKS = (
    "ingest",
    "tokens",
    "recall",
    "recall_quality",
    "summary_retention",
    "turn",
    "compaction",
    "peers",
    "adapters",
    "memory",
)


def load(name: str) -> ModuleType:
    """The benchmark module for `name`.

    Raises:
        KeyError: no benchmark has that name.
    """
    if name not in BENCHMARKS:
        raise KeyError(f"unknown benchmark {name!r}; choose from: {', '.join(BENCHMARKS)}")
    return importlib.import_module(f"bench.b_{name}")


def run_one(name: str, size: Size, ctx: BenchContext) -> list[Row]:
    """Run one benchmark; a missing peer library raises :class:`PeerMissing` for the caller to report."""
    rows: list[Row] = load(name).run(size, ctx)
    return rows
