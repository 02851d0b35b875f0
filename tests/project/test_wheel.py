"""A built wheel, installed into a clean venv, works on its own: migrations ship inside it."""

from __future__ import annotations

import sqlite3
import subprocess
import sys
import venv
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
NAMED = {"sessions", "messages", "summaries", "summary_messages", "summary_parents", "context_items", "compactions"}


def _run(*args: str | Path, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(a) for a in args], cwd=cwd, capture_output=True, text=True, timeout=600, check=False)


def test_wheel_in_a_clean_venv_upgrades_and_passes_doctor(tmp_path: Path) -> None:
    built = _run(sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w", tmp_path / "dist", ROOT, cwd=tmp_path)
    assert built.returncode == 0, built.stderr
    (wheel,) = (tmp_path / "dist").glob("openclaw_ctx-*.whl")
    env_dir = tmp_path / "venv"
    venv.create(env_dir, with_pip=True)
    installed = _run(env_dir / "bin" / "python", "-m", "pip", "install", "-q", wheel, cwd=tmp_path)
    assert installed.returncode == 0, installed.stderr
    db = tmp_path / "fresh.db"
    cli = env_dir / "bin" / "openclaw-ctx"
    # Run from an empty directory so nothing of the checkout can be imported by accident.
    upgraded = _run(cli, "--db", db, "db", "upgrade", cwd=tmp_path)
    assert upgraded.returncode == 0, upgraded.stderr
    doctor = _run(cli, "--db", db, "doctor", "--json", cwd=tmp_path)
    assert doctor.returncode == 0, doctor.stdout + doctor.stderr
    with sqlite3.connect(db) as conn:
        tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    conn.close()
    assert NAMED <= tables and {"messages_fts", "summaries_fts"} <= tables
