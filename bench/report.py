"""Print results as a Rich table, keep them as JSON, and (on request) put the table into bench/README.md.

``bench/results/latest.json`` holds the latest rows of every benchmark (a run of one benchmark
replaces only that benchmark's rows), with the machine they ran on.
"""

from __future__ import annotations

import json
import os
import platform
import sqlite3
import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

from bench.core import Row

__all__ = ["RESULTS", "README", "machine", "markdown_table", "print_table", "save", "write_readme"]

RESULTS = Path(__file__).parent / "results" / "latest.json"
README = Path(__file__).parent / "README.md"
_START = "<!-- bench:table:start -->"
_END = "<!-- bench:table:end -->"


def machine() -> dict[str, Any]:
    """The box the numbers come from."""
    cpu = "unknown"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    try:
        load = [round(x, 2) for x in os.getloadavg()]
    except OSError:
        load = []
    return {
        "load_avg_1_5_15": load,
        "nproc": os.cpu_count(),
        "cpu": cpu,
        "python": platform.python_version(),
        "sqlite": sqlite3.sqlite_version,
        "platform": platform.platform(),
    }


def _num(value: float | None, unit: str = "") -> str:
    if value is None:
        return "—"
    if value == float("inf"):
        return "∞"
    if abs(value) >= 1000:
        text = f"{value:,.0f}"
    elif abs(value) >= 10:
        text = f"{value:.1f}"
    else:
        text = f"{value:.3g}"
    return f"{text} {unit}".strip()


def _cells(row: dict[str, Any]) -> list[str]:
    ours, base = row["ours"], row["baseline"]
    met = {True: "yes", False: "NO", None: "—"}[row["met"]]
    ratio = f"{row['ratio']:.2f}×" if row["ratio"] is not None else "—"
    return [
        row["bench"],
        row["metric"],
        _num(ours["median"], row["unit"]),
        # p99 is a tail latency; for throughput rows it would read as a best case, so it is not shown.
        _num(ours["p99"], row["unit"]) if ours["p99"] is not None and not row["higher_is_better"] else "—",
        f"{row['baseline_name']}: {_num(base['median'], row['unit'])}" if base else "—",
        ratio,
        row["target"] or "—",
        met,
    ]


_HEADERS = ["bench", "metric", "ours (median)", "ours p99", "baseline (median)", "ratio", "target", "met"]


def print_table(rows: list[dict[str, Any]], console: Console | None = None) -> None:
    """Show rows as a Rich table (medians, p99 where there are enough samples, ratio, target)."""
    table = Table(title="openclaw-ctx benchmarks", show_lines=False)
    for header in _HEADERS:
        table.add_column(header, overflow="fold")
    for row in rows:
        table.add_row(*_cells(row))
    (console or Console()).print(table)


def markdown_table(rows: list[dict[str, Any]]) -> str:
    """The same table as GitHub markdown."""
    lines = ["| " + " | ".join(_HEADERS) + " |", "|" + "---|" * len(_HEADERS)]
    for row in rows:
        lines.append("| " + " | ".join(c.replace("|", "\\|") for c in _cells(row)) + " |")
    return "\n".join(lines)


def load(path: Path | None = None) -> dict[str, Any]:
    """The stored results, or an empty document."""
    path = path or RESULTS
    if path.exists():
        try:
            loaded: dict[str, Any] = json.loads(path.read_text())
            return loaded
        except json.JSONDecodeError:
            pass
    return {"machine": machine(), "benches": {}}


def save(results: dict[str, tuple[str, list[Row]]], path: Path | None = None) -> dict[str, Any]:
    """Merge `results` (bench name → (size, rows)) into the JSON file; return the whole document."""
    path = path or RESULTS
    doc = load(path)
    doc["machine"] = machine()
    for name, (size, rows) in results.items():
        doc["benches"][name] = {
            "size": size,
            "at": datetime.now(UTC).isoformat(timespec="seconds"),
            "argv": sys.argv[1:],
            "rows": [r.to_json() for r in rows],
        }
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(doc, indent=2, ensure_ascii=False))
    return doc


def all_rows(doc: dict[str, Any]) -> list[dict[str, Any]]:
    """Every stored row, in benchmark order."""
    return [row for bench in doc["benches"].values() for row in bench["rows"]]


def write_readme(doc: dict[str, Any], readme: Path | None = None) -> None:
    """Replace the table between the README's markers with the stored results."""
    readme = readme or README
    m = doc["machine"]
    sizes = ", ".join(f"{name}={bench['size']} ({bench['at']})" for name, bench in doc["benches"].items())
    block = (
        f"{_START}\n"
        f"Machine: {m['nproc']} × {m['cpu']}, Python {m['python']}, SQLite {m['sqlite']}, {m['platform']}; "
        f"load average at the end of the run (1/5/15 min): {m.get('load_avg_1_5_15', '?')}.  \n"
        f"Runs: {sizes}.\n\n{markdown_table(all_rows(doc))}\n{_END}"
    )
    text = readme.read_text() if readme.exists() else f"# Benchmarks\n\n{_START}\n{_END}\n"
    if _START not in text or _END not in text:
        text = text.rstrip() + f"\n\n{_START}\n{_END}\n"
    head, rest = text.split(_START, 1)
    _, tail = rest.split(_END, 1)
    readme.write_text(head + block + tail)
