"""The README's shell blocks, run in order as a new user would, and their figures checked against SQL.

The install and test lines of the first block are this very environment and this very run; every other
command of the first two ``bash`` blocks runs through a real shell, in a scratch directory that holds
only a link to ``examples/``.
"""

from __future__ import annotations

import os
import re
import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(shutil.which("sqlite3") is None, reason="the README's blocks use the sqlite3 command line"),
]


def _bash_blocks() -> list[list[str]]:
    blocks = re.findall(r"```bash\n(.*?)```", README.read_text(encoding="utf-8"), re.S)
    return [[line for line in block.splitlines() if line.strip()] for block in blocks[:2]]


def _walk(tmp_path: Path) -> tuple[str, Path]:
    first, second = _bash_blocks()
    main_job = [line for line in first if " replay " in line]
    assert len(main_job) == 1 and not any("pip install" in line for line in second)
    (tmp_path / "examples").symlink_to(ROOT / "examples")
    script = "set -euo pipefail\n" + "\n".join(f"echo '>>> {n}'\n{line}" for n, line in enumerate([*main_job, *second]))
    env = {k: v for k, v in os.environ.items() if k not in ("OPENCLAW_CONFIG_PATH", "OPENCLAW_CTX_DB", "COLUMNS")}
    env.update(PATH=f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}", HOME=str(tmp_path),
               OPENCLAW_STATE_DIR=str(tmp_path / "state"))  # fmt: skip
    done = subprocess.run(
        ["bash", "-c", script], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600, check=False
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    return done.stdout, tmp_path / "demo.db"


def _figure(out: str, label: str) -> int:
    match = re.search(rf"{re.escape(label)}\s*│\s*([\d,]+)", out)
    assert match, f"{label!r} not in the output"
    return int(match.group(1).replace(",", ""))


def test_the_readme_walk_runs_and_its_figures_match_sql(tmp_path: Path) -> None:
    out, db = _walk(tmp_path)
    sections = re.split(r"^>>> \d+$", out, flags=re.M)[1:]
    replay, chain, by_role, active, doctor, _key, compact = sections
    with sqlite3.connect(db) as conn:
        messages = conn.execute("SELECT count(*) FROM messages").fetchone()[0]
        sessions = conn.execute("SELECT count(*) FROM sessions").fetchone()[0]
        compactions = conn.execute("SELECT count(*) FROM compactions").fetchone()[0]
        roles = dict(conn.execute("SELECT role, count(*) FROM transcript GROUP BY role").fetchall())
        first_items = conn.execute("SELECT ordinal, role, token_count FROM active_context LIMIT 5").fetchall()
    assert _figure(replay, "messages stored") == messages == _figure(replay, "messages in transcript")
    assert _figure(replay, "sessions in chain") == sessions
    assert _figure(replay, "compactions") == compactions == sessions - 1
    assert f"sessions ({sessions})" in chain
    for role, count in roles.items():
        assert re.search(rf"\b{role}\b.*\b{count}\b", by_role), (role, count, by_role)
    assert active.split() == [str(v) for row in first_items for v in "|".join(map(str, row)).split()]
    assert "deep check" in doctor and "consistent" in doctor
    assert "nothing to compact" in compact or "compacted" in compact


def test_the_agent_framework_block_runs_and_remembers(tmp_path: Path) -> None:
    pytest.importorskip("agents")
    pytest.importorskip("google.adk")
    section = README.read_text(encoding="utf-8").split("## Use it from an agent framework", 1)[1].split("\n## ", 1)[0]
    (block,) = re.findall(r"```bash\n(.*?)```", section, re.S)
    lines = [line for line in block.splitlines() if line.strip()]
    (tmp_path / "examples").symlink_to(ROOT / "examples")
    env = {k: v for k, v in os.environ.items() if k not in ("OPENCLAW_CONFIG_PATH", "OPENCLAW_CTX_DB", "COLUMNS")}
    env.update(PATH=f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}", COLUMNS="200",
               OPENCLAW_STATE_DIR=str(tmp_path / "state"))  # fmt: skip
    done = subprocess.run(
        ["bash", "-c", "set -euo pipefail\n" + "\n".join(lines)],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert "the model was sent 3 items" in done.stdout and "user: My locker code is 4417." in done.stdout
    assert "1 hit(s) for '4417'" in done.stdout or "2 hit(s) for '4417'" in done.stdout
    with sqlite3.connect(tmp_path / "adk.db") as conn:
        assert conn.execute("SELECT count(*) FROM messages WHERE text LIKE '%4417%'").fetchone()[0] >= 1
