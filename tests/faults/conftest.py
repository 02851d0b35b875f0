"""Prints the fault suite's figures (kills, consistent, recovered, lost, duplicated) at the end of the run."""

from __future__ import annotations

import pytest
from fault_kit import COLUMNS, FIGURES


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    if not FIGURES:
        return
    extra = sorted({k for row in FIGURES.values() for k in row} - set(COLUMNS))
    columns = [*COLUMNS, *extra]
    terminalreporter.section("fault suite figures")
    terminalreporter.write_line(f"{'category':<28}" + "".join(f"{c:>12}" for c in columns))
    for category in sorted(FIGURES):
        row = FIGURES[category]
        terminalreporter.write_line(f"{category:<28}" + "".join(f"{row.get(c, 0):>12}" for c in columns))
