"""Core works without the lossless-claw plugin: with its entry points disabled nothing of it is imported.

`OPENCLAW_CTX_ENGINES=legacy` limits the `openclaw_ctx.engines` and `openclaw_ctx.transcript_entries`
entry points to legacy, as an operator does to take a broken plugin out of service. Each command runs in
a real process through the real CLI; the process then checks that no `engines.lossless` module was ever
imported, so core reached the plugin through nothing but its (now absent) entry points.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from fixtures.make_agent_dir import build_agent_dir

pytestmark = pytest.mark.slow

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "coding-session.jsonl"

# Runs the CLI in-process, then fails the process if any module of the plugin was loaded.
RUNNER = textwrap.dedent(
    """
    import sys
    from openclaw_ctx.cli.app import main
    sys.argv = ["openclaw-ctx", *sys.argv[1:]]
    try:
        main()
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    else:
        code = 0
    loaded = sorted(m for m in sys.modules if m == "engines.lossless" or m.startswith("engines.lossless."))
    if loaded:
        print("PLUGIN IMPORTED: " + ", ".join(loaded), file=sys.stderr)
        code = 99
    sys.exit(code)
    """
)


def _core(*args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "OPENCLAW_CTX_ENGINES": "legacy"}
    return subprocess.run(
        [sys.executable, "-c", RUNNER, *args], capture_output=True, text=True, timeout=600, env=env, check=False
    )


def test_import_export_replay_migrate_and_doctor_without_the_plugin(tmp_path: Path) -> None:
    db = tmp_path / "core.db"
    agent = build_agent_dir(tmp_path / "agent")
    imported = _core("--db", str(db), "import", str(agent.root), "--json")
    assert imported.returncode in (0, 2), imported.stderr  # 2: the fixture's deliberately malformed lines
    assert "PLUGIN IMPORTED" not in imported.stderr

    head = tmp_path / "head.jsonl"
    head.write_text("".join(EXAMPLE.read_text(encoding="utf-8").splitlines(keepends=True)[:120]), encoding="utf-8")
    replay = _core("--db", str(db), "replay", str(head), "--budget", "8000", "--key", "core:replay", "--json")
    assert replay.returncode == 0, replay.stderr
    assert json.loads(replay.stdout)["compactions"] >= 1

    exported = _core("--db", str(db), "export", "--key", "core:replay", "--out", str(tmp_path / "out"))
    assert exported.returncode == 0, exported.stderr
    assert any((tmp_path / "out").glob("*.jsonl"))

    dry = _core("--db", str(db), "migrate", "--all", "--to", "legacy", "--dry-run", "--json")
    assert dry.returncode == 0, dry.stderr
    assert json.loads(dry.stdout)["keys"], "every key is planned"

    to_lossless = _core("--db", str(db), "migrate", "--key", "core:replay", "--to", "lossless-claw", "--dry-run")
    assert to_lossless.returncode == 1
    assert "lossless-claw is not installed" in to_lossless.stderr
    assert "PLUGIN IMPORTED" not in to_lossless.stderr

    backfill = _core("--db", str(db), "backfill", "--key", "core:replay")
    assert backfill.returncode == 1 and "lossless-claw is not installed" in backfill.stderr

    doctor = _core("--db", str(db), "doctor", "--json")
    assert doctor.returncode == 0, doctor.stdout + doctor.stderr
    report = json.loads(doctor.stdout)
    assert "lossless-claw" in json.dumps(report)
    assert [e["id"] for e in report.get("engines", [])] in ([], ["legacy"])
