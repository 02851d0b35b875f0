"""``python -m bench [NAME ...] [--size tiny|small|full] [--repeat N] [--write-readme]``."""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
import time
from pathlib import Path

from rich.console import Console

from bench import BENCHMARKS, BenchContext, PeerMissing, Row, report, run_one

console = Console(stderr=True)


def main(argv: list[str] | None = None) -> int:
    """Run the chosen benchmarks, print the table, write bench/results/latest.json."""
    parser = argparse.ArgumentParser(prog="python -m bench", description=__doc__)
    parser.add_argument("names", nargs="*", help=f"benchmarks to run (default: all of {', '.join(BENCHMARKS)})")
    parser.add_argument("--size", choices=["tiny", "small", "full"], default="small")
    parser.add_argument("--repeat", type=int, default=3, help="runs per measurement; medians are reported")
    parser.add_argument("--workdir", type=Path, default=None, help="scratch dir (default: a temp dir on disk)")
    parser.add_argument("--write-readme", action="store_true", help="also put the table into bench/README.md")
    parser.add_argument("--no-save", action="store_true", help="do not write bench/results/latest.json")
    args = parser.parse_args(argv)
    names = args.names or list(BENCHMARKS)
    unknown = [n for n in names if n not in BENCHMARKS]
    if unknown:
        parser.error(f"unknown benchmark(s): {', '.join(unknown)}; choose from: {', '.join(BENCHMARKS)}")
    # Scratch files live on the real disk (not tmpfs) so fsync and page cache behave as in use.
    report.RESULTS.parent.mkdir(parents=True, exist_ok=True)
    workdir = args.workdir or Path(tempfile.mkdtemp(prefix="bench-", dir=report.RESULTS.parent))
    workdir.mkdir(parents=True, exist_ok=True)
    cache = report.RESULTS.parent / "cache"
    cache.mkdir(parents=True, exist_ok=True)
    ctx = BenchContext(
        workdir, repeat=max(1, args.repeat), log=lambda m: console.print(f"[dim]{m}[/dim]"), cache_dir=cache
    )
    results: dict[str, tuple[str, list[Row]]] = {}
    try:
        for name in names:
            start = time.perf_counter()
            try:
                rows = run_one(name, args.size, ctx)
            except PeerMissing as exc:
                console.print(f"[yellow]{name}: skipped ({exc})[/yellow]")
                continue
            console.print(f"[green]{name}[/green] done in {time.perf_counter() - start:.1f} s")
            results[name] = (args.size, rows)
    finally:
        if args.workdir is None:
            shutil.rmtree(workdir, ignore_errors=True)
    rows_json = [r.to_json() for _, rows in results.values() for r in rows]
    report.print_table(rows_json, Console(width=max(Console().width, 180)))
    if not args.no_save:
        doc = report.save(results)
        if args.write_readme:
            report.write_readme(doc)
    return 0


if __name__ == "__main__":
    sys.exit(main())
