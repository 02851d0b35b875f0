"""Issue #5's "done when", through the real CLI: the agent-directory fixture (several keys, branched
transcripts, compaction entries, rotated successors) imports, exports and re-imports identically,
and still exports every message after `migrate` has switched every key both ways."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest
from fixtures.make_agent_dir import build_agent_dir
from test_import_export import snapshot
from typer.testing import CliRunner, Result

import openclaw_ctx.cli.app as cli
from examples.make_example import OUTPUT as EXAMPLE


def invoke(db: Path, *args: str) -> Result:
    if not any(c.name == "migrate" for c in cli.app.registered_commands):
        cli._load_commands()
    return CliRunner().invoke(cli.app, ["--db", str(db), *args])


@pytest.fixture
def imported(tmp_path: Path) -> Path:
    agents = build_agent_dir(tmp_path / "state").root
    db = tmp_path / "first.db"
    assert invoke(db, "import", str(agents)).exit_code == 0
    assert invoke(db, "import", str(EXAMPLE)).exit_code == 0
    return db


def export_all(db: Path, out: Path) -> list[str]:
    keys = [r[0] for r in sqlite3.connect(db).execute("SELECT DISTINCT session_key FROM sessions ORDER BY 1")]
    for key in keys:
        result = invoke(db, "export", "--key", key, "--out", str(out))
        assert result.exit_code == 0, result.output
    return keys


def messages_by_key(db: Path) -> dict[str, list[tuple[str, str]]]:
    conn = sqlite3.connect(db)
    out: dict[str, list[tuple[str, str]]] = {}
    for key, entry, body in conn.execute("SELECT session_key, entry_id, message_json FROM messages ORDER BY seq"):
        out.setdefault(key, []).append((entry, body))
    return out


def test_import_export_reimport_is_identical(imported: Path, tmp_path: Path) -> None:
    out = tmp_path / "exported"
    keys = export_all(imported, out)
    # Bare transcripts' `file:` keys stay ours: the listing has OpenClaw's keys only, re-import derives the rest.
    listed = set(json.loads((out / "sessions.json").read_text(encoding="utf-8")))
    assert listed == {k for k in keys if not k.startswith("file:")}
    second = tmp_path / "second.db"
    result = invoke(second, "import", str(out))
    assert result.exit_code == 0, result.output
    assert snapshot(second) == snapshot(imported)
    again = invoke(second, "import", str(out), "--json")
    assert again.exit_code == 0 and json.loads(again.stdout)["messages_new"] == 0
    assert snapshot(second) == snapshot(imported)


def test_after_migrating_both_ways_every_message_and_the_chain_still_export(imported: Path, tmp_path: Path) -> None:
    before = messages_by_key(imported)
    for target in ("lossless-claw", "legacy"):
        result = invoke(imported, "migrate", "--all", "--to", target, "--budget", "32000")
        assert result.exit_code == 0, result.output
    assert messages_by_key(imported) == before
    out = tmp_path / "exported"
    export_all(imported, out)
    second = tmp_path / "second.db"
    assert invoke(second, "import", str(out)).exit_code == 0
    assert messages_by_key(second) == before
    chains = "SELECT session_key, count(*) FROM sessions GROUP BY 1 ORDER BY 1"
    assert sqlite3.connect(second).execute(chains).fetchall() == sqlite3.connect(imported).execute(chains).fetchall()


def test_an_imported_agent_directory_passes_the_deep_check(imported: Path) -> None:
    """Abandoned branches are kept off the active path; they are not 'uncovered' messages."""
    conn = sqlite3.connect(imported)
    assert conn.execute("SELECT count(*) FROM messages WHERE on_active_branch = 0").fetchone()[0] > 0
    result = invoke(imported, "doctor", "--deep", "--json")
    checks = {c["name"]: c for c in json.loads(result.stdout)["checks"]}
    assert checks["deep check"]["status"] == "ok", checks["deep check"]
