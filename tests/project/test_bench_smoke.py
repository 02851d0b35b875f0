"""Smoke runs of every benchmark at the tiny size, so the harness never rots.

These check that each benchmark runs end to end on real files and returns well-formed rows; they
never assert how fast anything is. Peer benchmarks skip when the peer library is not installed.
"""

from __future__ import annotations

import importlib.util
import json
import math
import statistics
from pathlib import Path

import pytest

import bench
from bench import data, report
from bench.__main__ import main as bench_main
from bench.core import BenchContext, PeerMissing, Row, Stat, Target
from openclaw_ctx.messages import flatten_text, message_to_json, parse_message

pytestmark = pytest.mark.slow

# A benchmark whose peer is missing raises PeerMissing; that is a clean skip, not a failure.
_PEER_MODULES = {"peers": ("agents", "google.adk")}


def _installed(module: str) -> bool:
    # find_spec of a dotted name imports its parent, which raises when the parent is missing.
    try:
        return importlib.util.find_spec(module) is not None
    except ModuleNotFoundError:
        return False


def _ctx(tmp_path: Path) -> BenchContext:
    cache = tmp_path / "cache"
    cache.mkdir()
    return BenchContext(tmp_path, repeat=1, log=lambda _m: None, cache_dir=cache)


def _check_rows(name: str, rows: list[Row]) -> None:
    assert rows, f"{name} returned no rows"
    for row in rows:
        assert row.bench == name
        assert row.metric and row.unit
        assert math.isfinite(row.ours.median) and row.ours.median >= 0, row
        if row.baseline is not None:
            assert math.isfinite(row.baseline.median) and row.baseline.median > 0, row
            assert row.ratio is not None and row.ratio >= 0
        json.dumps(row.to_json())  # the report must be able to write it


@pytest.mark.parametrize("name", bench.BENCHMARKS)
def test_benchmark_runs_at_tiny_size(name: str, tmp_path: Path) -> None:
    for module in _PEER_MODULES.get(name, ()):
        if not _installed(module):
            pytest.skip(f"peer library {module!r} not installed (pip install -e .[bench])")
    try:
        rows = bench.run_one(name, "tiny", _ctx(tmp_path))
    except PeerMissing as exc:
        pytest.skip(str(exc))
    _check_rows(name, rows)


def test_unknown_benchmark_is_named_in_the_error() -> None:
    with pytest.raises(KeyError, match="nosuch"):
        bench.load("nosuch")


def test_generator_is_deterministic_and_realistic() -> None:
    first = data.conversation(3000, seed=5)
    assert first == data.conversation(3000, seed=5)
    assert first != data.conversation(3000, seed=6)
    parsed = [parse_message(m) for m in first]
    # The wire dicts are exactly what the store would write back.
    assert all(json.loads(message_to_json(p)) == m for p, m in zip(parsed, first, strict=True))
    assert [data.wire_text(m) for m in first[:200]] == [flatten_text(p) for p in parsed[:200]]
    roles = {m["role"] for m in first}
    assert roles == {"user", "assistant", "toolResult"}
    median = statistics.median(len(data.wire_text(m)) for m in first)
    assert 600 <= median <= 1600, median
    # Every tool call is answered by a result with its id, in order.
    calls = [b["id"] for m in first if m["role"] == "assistant" for b in m["content"] if b["type"] == "toolCall"]
    results = [m["toolCallId"] for m in first if m["role"] == "toolResult"]
    assert results == calls[: len(results)]
    assert data.needle(0) in data.wire_text(first[0])
    assert data.needle(2) in data.wire_text(first[2 * data.NEEDLE_EVERY])


def test_row_ratio_and_target() -> None:
    fast, slow = Stat.of([2.0, 2.0, 2.0]), Stat.of([4.0, 4.0, 4.0])
    row = Row("x", "m", "msg/s", fast, True, slow, "raw", Target("ratio", ">=", 0.5))
    assert row.ratio == 0.5 and row.met is True
    row.target = Target("ratio", ">=", 0.6)
    assert row.met is False
    latency = Row("x", "m", "ms", Stat.of([float(i) for i in range(1, 101)]), False, target=Target("value", "<=", 40))
    assert latency.ours.p99 == 99.0 and latency.met is False


def test_report_merges_results_and_rewrites_only_the_readme_table(tmp_path: Path) -> None:
    results = tmp_path / "latest.json"
    readme = tmp_path / "README.md"
    readme.write_text("# Bench\n\nintro\n\n<!-- bench:table:start -->\nold\n<!-- bench:table:end -->\n\noutro\n")
    row_a = Row("a", "metric a", "ms", Stat.of([1.0]), False)
    row_b = Row("b", "metric b", "msg/s", Stat.of([10.0]), True, Stat.of([20.0]), "raw")
    report.save({"a": ("tiny", [row_a])}, results)
    doc = report.save({"b": ("tiny", [row_b])}, results)
    assert set(doc["benches"]) == {"a", "b"}
    report.write_readme(doc, readme)
    text = readme.read_text()
    assert "old" not in text and text.startswith("# Bench\n\nintro") and text.rstrip().endswith("outro")
    assert "| b | metric b |" in text and "0.50×" in text


def test_cli_runs_one_benchmark_and_writes_json(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    results = tmp_path / "results" / "latest.json"
    monkeypatch.setattr(report, "RESULTS", results)
    assert bench_main(["tokens", "--size", "tiny", "--repeat", "1", "--workdir", str(tmp_path / "w")]) == 0
    doc = json.loads(results.read_text())
    assert list(doc["benches"]) == ["tokens"]
    assert doc["machine"]["nproc"] >= 1
