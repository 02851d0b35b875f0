"""The harness's vocabulary: size tiers, timing samples, result rows and their targets.

Every benchmark returns :class:`Row` objects. A row holds our figure and, when there is one, the
baseline measured in the same process on the same data, plus the target the issue sets for the
ratio (or for the absolute value). Rows are plain data so the report can print them and write JSON.
"""

from __future__ import annotations

import asyncio
import statistics
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Literal

__all__ = [
    "SIZES",
    "BenchContext",
    "PeerMissing",
    "Row",
    "Size",
    "Stat",
    "Target",
    "ameasure",
    "interleaved",
    "measure",
    "pick",
]

Size = Literal["tiny", "small", "full"]
SIZES: tuple[Size, ...] = ("tiny", "small", "full")


class PeerMissing(RuntimeError):
    """A peer library this benchmark compares against is not installed; the benchmark is skipped."""


def pick(size: Size, tiny: Any, small: Any, full: Any) -> Any:
    """The parameter for a size tier."""
    return {"tiny": tiny, "small": small, "full": full}[size]


@dataclass(frozen=True)
class Stat:
    """Summary of timing samples: median, p99 (only with enough samples to mean something), spread."""

    median: float
    p99: float | None
    low: float
    high: float
    n: int

    @classmethod
    def of(cls, samples: Sequence[float]) -> Stat:
        """Summarise samples (at least one)."""
        if not samples:
            raise ValueError("no samples")
        ordered = sorted(samples)
        p99 = ordered[min(len(ordered) - 1, int(round(0.99 * (len(ordered) - 1))))] if len(ordered) >= 20 else None
        return cls(statistics.median(ordered), p99, ordered[0], ordered[-1], len(ordered))

    def scaled(self, factor: float) -> Stat:
        """The same statistics multiplied by `factor` (e.g. seconds to milliseconds)."""
        return Stat(
            self.median * factor,
            self.p99 * factor if self.p99 is not None else None,
            self.low * factor,
            self.high * factor,
            self.n,
        )

    def rate(self, items: int) -> Stat:
        """Samples of seconds-per-run turned into items per second (low/high swap)."""
        return Stat(
            items / self.median,
            None,
            items / self.high if self.high else float("inf"),
            items / self.low if self.low else float("inf"),
            self.n,
        )


@dataclass(frozen=True)
class Target:
    """What the issue asks for: ``ratio >= 0.5``, ``value <= 200`` (in the row's unit), ..."""

    on: Literal["ratio", "value"]
    op: Literal[">=", "<="]
    bound: float

    def met(self, value: float | None) -> bool | None:
        """Whether `value` meets the target (None when there is nothing to judge)."""
        if value is None:
            return None
        return value >= self.bound if self.op == ">=" else value <= self.bound

    def __str__(self) -> str:
        return f"{self.on} {self.op} {self.bound:g}"


@dataclass
class Row:
    """One measured figure, with its same-process baseline and its target.

    `ratio` is always ``ours / baseline`` in the row's unit; `higher_is_better` says how to read it
    (throughput: above 1 means we are faster; latency: below 1 means we are faster).
    """

    bench: str
    metric: str
    unit: str
    ours: Stat
    higher_is_better: bool
    baseline: Stat | None = None
    baseline_name: str = ""
    target: Target | None = None
    layer: str = ""
    note: str = ""
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def ratio(self) -> float | None:
        """``ours / baseline`` on medians."""
        if self.baseline is None or not self.baseline.median:
            return None
        return self.ours.median / self.baseline.median

    @property
    def met(self) -> bool | None:
        """Whether the target is met (None without a target)."""
        if self.target is None:
            return None
        return self.target.met(self.ratio if self.target.on == "ratio" else self.ours.median)

    def to_json(self) -> dict[str, Any]:
        """A JSON-ready dict (derived fields included)."""
        data = asdict(self)
        data["target"] = str(self.target) if self.target else None
        data["ratio"] = self.ratio
        data["met"] = self.met
        return data


@dataclass
class BenchContext:
    """What a benchmark run gets: a scratch directory, the repeat count, a progress printer."""

    workdir: Path
    repeat: int = 3
    log: Callable[[str], None] = print
    cache_dir: Path | None = None

    def path(self, name: str) -> Path:
        """A fresh file path in the scratch directory (any old file of that name is removed)."""
        target = self.workdir / name
        for suffix in ("", "-wal", "-shm", "-journal"):
            Path(f"{target}{suffix}").unlink(missing_ok=True)
        return target


def measure(fn: Callable[[], Any], n: int) -> list[float]:
    """Wall-clock seconds of `n` calls of `fn`."""
    out = []
    for _ in range(n):
        start = time.perf_counter()
        fn()
        out.append(time.perf_counter() - start)
    return out


async def ameasure(fn: Callable[[], Awaitable[Any]], n: int) -> list[float]:
    """Wall-clock seconds of `n` awaited calls of `fn`."""
    out = []
    for _ in range(n):
        start = time.perf_counter()
        await fn()
        out.append(time.perf_counter() - start)
    return out


def interleaved(fns: Sequence[Callable[[Any], Any]], chunks: Sequence[Any], rounds: int = 1) -> list[list[float]]:
    """Seconds per (fn, chunk): each chunk is run by every fn back to back, the order rotating.

    On a box shared with other work, load drifts over seconds; pairing the sides on the same chunk
    within milliseconds keeps the drift out of their ratio.
    """
    out: list[list[float]] = [[] for _ in fns]
    turn = 0
    for _ in range(rounds):
        for chunk in chunks:
            order = list(range(len(fns)))
            order = order[turn % len(order) :] + order[: turn % len(order)]
            turn += 1
            for k in order:
                start = time.perf_counter()
                fns[k](chunk)
                out[k].append(time.perf_counter() - start)
    return out


def run_async(coro: Awaitable[Any]) -> Any:
    """Run a coroutine to completion in a fresh event loop."""

    async def wrapper() -> Any:
        return await coro

    return asyncio.run(wrapper())
