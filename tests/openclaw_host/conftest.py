"""Fixtures for the tests against the real OpenClaw host: the install, the serve check, the figures."""

from __future__ import annotations

import shutil
import subprocess
from functools import cache
from typing import Any

import pytest
from openclaw_host.gateway import FIGURES, PYTHON_COMMAND, HostInstall, find_host


@cache
def serve_missing() -> str:
    """Why `openclaw-ctx serve` is not available, or ``""``."""
    try:
        res = subprocess.run(
            [*PYTHON_COMMAND, "serve", "--help"], capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"`openclaw-ctx serve --help` failed: {exc}"
    if res.returncode != 0:
        lines = [line.strip("│╭╮╰╯─ ") for line in (res.stderr or res.stdout).splitlines()]
        said = next((line for line in lines if "No such command" in line), None) or next(
            (line for line in reversed(lines) if line), ""
        )
        return f"`openclaw-ctx serve` is not available (`serve --help` exited {res.returncode}: {said[:200]})"
    return ""


@pytest.fixture(scope="session")
def host_install() -> HostInstall:
    host, why = find_host()
    if host is None:
        pytest.skip(why)
    return host


@pytest.fixture(scope="session")
def node_bin() -> str:
    """A Node for the plugin's own tests: the host's Node 24 if installed, else the machine's."""
    host, _ = find_host()
    if host is not None:
        return str(host.node)
    node = shutil.which("node")
    if node is None:
        pytest.skip("no node on PATH and the OpenClaw host (with its Node) is not installed")
    return node


def pytest_terminal_summary(terminalreporter: Any) -> None:
    if FIGURES:
        terminalreporter.write_sep("-", "OpenClaw host figures")
        for name, value in FIGURES:
            terminalreporter.write_line(f"{name}: {value}")
