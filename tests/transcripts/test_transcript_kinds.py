"""The custom-entry kinds an import restores: core's, an engine's through its entry point, and life without it."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

import openclaw_ctx.cli.app as cli
from engines.lossless.transcript import LARGE_CONTENT_KIND, LARGE_CONTENT_TYPE
from openclaw_ctx.store.store import Store
from openclaw_ctx.transcripts import (
    core_entry_kinds,
    export_session,
    import_paths,
    load_entry_kinds,
    read_transcript,
)
from openclaw_ctx.transcripts.custom import COMPACTION_TYPE, CONTEXT_TYPE, SUMMARY_TYPE, TURN_TYPE

NOT_INSTALLED = f"{LARGE_CONTENT_TYPE} needs the lossless-claw engine, which is not installed"


def _entry(n: int, parent: int | None, **fields: Any) -> dict[str, Any]:
    stamp = f"2026-01-01T00:00:{n:02d}.000Z"
    return {"id": f"e{n}", "parentId": f"e{parent}" if parent else None, "timestamp": stamp, **fields}


def write_file(path: Path) -> Path:
    """A transcript of two messages, a stub of the first (lossless-claw's) and a runtime turn (core's)."""
    large = {
        "version": 1,
        "fileId": "file_0123456789abcdef",
        "entryId": "e1",
        "kind": "tool_output",
        "byteSize": 12000,
        "tokenCount": 3000,
        "stub": "[large output file_0123456789abcdef]",
        "stubTokenCount": 9,
    }
    turn = {"version": 1, "turn": 1, "assembledTokens": 40, "budget": 1000, "compacted": 0}
    lines = [
        {"type": "session", "version": 3, "id": "sess-kinds", "timestamp": "2026-01-01T00:00:00.000Z", "cwd": "/w"},
        _entry(1, None, type="message", message={"role": "user", "content": "hello", "timestamp": 1767225601000}),
        _entry(2, 1, type="message", message={"role": "user", "content": "again", "timestamp": 1767225602000}),
        _entry(3, 2, type="custom", customType=LARGE_CONTENT_TYPE, data=large),
        _entry(4, 3, type="custom", customType=TURN_TYPE, data=turn),
    ]
    path.write_text("".join(json.dumps(line) + "\n" for line in lines), encoding="utf-8")
    return path


def count(db: Path, table: str) -> int:
    con = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    try:
        return int(con.execute(f"SELECT count(*) FROM {table}").fetchone()[0])
    finally:
        con.close()


def test_core_registers_the_kinds_of_core_tables_and_the_engine_adds_its_own() -> None:
    core = core_entry_kinds()
    assert [k.custom_type for k in core] == [SUMMARY_TYPE, COMPACTION_TYPE, TURN_TYPE, CONTEXT_TYPE]
    assert core.get(LARGE_CONTENT_TYPE) is None and core.missing == {LARGE_CONTENT_TYPE: "lossless-claw"}
    loaded = load_entry_kinds(allow={"legacy", "lossless-claw"})
    assert loaded.get(LARGE_CONTENT_TYPE) is LARGE_CONTENT_KIND and loaded.missing == {}
    assert [k.custom_type for k in loaded.restored_after("messages")] == [LARGE_CONTENT_TYPE]
    assert [k.custom_type for k in loaded.restored_after("summaries")] == [COMPACTION_TYPE, TURN_TYPE]


def test_a_kind_registers_once() -> None:
    kinds = core_entry_kinds()
    kinds.register(LARGE_CONTENT_KIND)
    with pytest.raises(ValueError, match="already registered"):
        kinds.register(LARGE_CONTENT_KIND)


async def test_with_the_engine_its_rows_import(store: Store, db_path: Path, tmp_path: Path) -> None:
    file = write_file(tmp_path / "kinds.jsonl")
    report = await import_paths(store, [file], kinds=load_entry_kinds(allow={"legacy", "lossless-claw"}))
    assert report.skipped == [] and report.total("messages_new") == 2
    assert count(db_path, "large_content") == 1 and count(db_path, "turns") == 1


async def test_without_the_engine_its_entries_are_skipped_lines_and_the_rest_imports(
    store: Store, db_path: Path, tmp_path: Path
) -> None:
    file = write_file(tmp_path / "kinds.jsonl")
    kinds = load_entry_kinds(allow={"legacy"})  # the lossless-claw entry point is not loaded
    assert kinds.get(LARGE_CONTENT_TYPE) is None
    report = await import_paths(store, [file], kinds=kinds)
    assert report.skipped == [f"{file}:4: {NOT_INSTALLED}"]
    assert report.total("messages_new") == 2 and report.total("skipped_lines") == 1
    assert count(db_path, "large_content") == 0 and count(db_path, "turns") == 1
    again = await import_paths(store, [file], kinds=kinds)
    assert again.total("entries_new") == 0 and again.total("messages_new") == 0
    out = tmp_path / "out"
    exported = await export_session(store, session_key="file:sess-kinds", out=out, kinds=kinds)
    back = read_transcript(exported.files[0].path)
    wire = exported.model_dump(by_alias=True)
    assert list(wire) == ["sessionKey", "sessionsJson", "files"]
    assert list(wire["files"][0]) == ["path", "session_id", "parent_session_id", "entries", "messages"]
    assert back.errors == [] and [e.id for e in back.entries] == ["e1", "e2", "e4"]


def test_the_cli_honours_the_engine_allow_list(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    file = write_file(tmp_path / "kinds.jsonl")
    monkeypatch.setenv("OPENCLAW_CTX_ENGINES", "legacy")
    if not any(c.name == "import" for c in cli.app.registered_commands):
        cli._load_commands()
    done = CliRunner().invoke(cli.app, ["--db", str(tmp_path / "cli.db"), "import", str(file), "--json"])
    assert done.exit_code == 2
    report = json.loads(done.stdout)
    assert report["skipped"] == [f"{file}:4: {NOT_INSTALLED}"] and report["messages_new"] == 2
    assert list(report) == [
        "files",
        "failedFiles",
        "entries",
        "entries_new",
        "messages_new",
        "messages_duplicate",
        "summaries_new",
        "skipped_lines",
        "perFile",
        "skipped",
        "notes",
    ]
