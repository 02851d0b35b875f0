"""Lossless-claw histories survive export → import: summaries, DAG edges, context projection, chain.

A lossless history is built by replaying the example transcript through the real CLI at a small
budget (70 leaves, 59 condensed nodes up to depth 6, 72 sessions); it is exported by key and
imported into an empty database, and both databases are compared row by row.
"""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner, Result

import openclaw_ctx.cli.app as cli
from engines.lossless.transcript import LARGE_CONTENT_TYPE
from examples.make_example import OUTPUT as EXAMPLE
from openclaw_ctx.transcripts import CustomEntry, context_message, read_transcript
from openclaw_ctx.transcripts.custom import COMPACTION_TYPE, CONTEXT_TYPE, SUMMARY_TYPE, TURN_TYPE

SUMMARY_COLUMNS = (
    "summary_id, session_key, session_id, kind, depth, content, token_count, earliest_at, latest_at,"
    " descendant_count, descendant_token_count, source_message_token_count, summarizer, model,"
    " fallback_level, details_json, created_at"
)


def invoke(db: Path, *args: str) -> Result:
    if not any(c.name == "import" for c in cli.app.registered_commands):
        cli._load_commands()
    return CliRunner().invoke(cli.app, ["--db", str(db), *args])


@pytest.fixture(scope="module")
def replayed(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    """A database holding the example replayed with lossless-claw at a 16k budget, and its key."""
    folder = tmp_path_factory.mktemp("replayed")
    state = folder / "state"
    state.mkdir()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENCLAW_", "LCM_"))}
    env["OPENCLAW_STATE_DIR"] = str(state)
    db = folder / "replay.db"
    proc = subprocess.run(
        [sys.executable, "-m", "openclaw_ctx", "--db", str(db), "replay", str(EXAMPLE)]
        + ["--engine", "lossless-claw", "--budget", "16000", "--json"],
        capture_output=True,
        text=True,
        timeout=600,
        env=env,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    return db, json.loads(proc.stdout)["session_key"]


@pytest.fixture
def original(replayed: tuple[Path, str], tmp_path: Path) -> tuple[Path, str]:
    db, key = replayed
    copy = tmp_path / "original.db"
    shutil.copy(db, copy)
    return copy, key


def rows(db: Path, sql: str) -> list[tuple[Any, ...]]:
    con = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    try:
        return con.execute(sql).fetchall()
    finally:
        con.close()


def lossless_snapshot(db: Path) -> dict[str, list[tuple[Any, ...]]]:
    """Everything lossless-claw's view depends on, with message rows named by entry id."""
    return {
        "sessions": rows(
            db, "SELECT session_id, session_key, parent_session_id, status, engine_id FROM sessions ORDER BY 1"
        ),
        # parent_entry_id is left out: the runtime writes none, the exported file links each line to the previous.
        "messages": rows(
            db,
            "SELECT session_key, seq, entry_id, session_id, role, message_json, text, token_count, tool_call_id,"
            " tool_name, on_active_branch, is_heartbeat, timestamp_ms FROM messages ORDER BY session_key, seq",
        ),
        "summaries": rows(db, f"SELECT rowid, {SUMMARY_COLUMNS} FROM summaries ORDER BY rowid"),
        "summary_messages": rows(
            db,
            "SELECT sm.summary_id, sm.ordinal, m.entry_id FROM summary_messages sm JOIN messages m USING (message_id)"
            " ORDER BY 1, 2",
        ),
        "summary_parents": rows(db, "SELECT summary_id, source_summary_id, ordinal FROM summary_parents ORDER BY 1, 2"),
        "context_items": rows(
            db,
            "SELECT ci.session_id, ci.ordinal, ci.item_type, m.entry_id, ci.summary_id, ci.token_count"
            " FROM context_items ci LEFT JOIN messages m USING (message_id) ORDER BY 1, 2",
        ),
        "active_context": rows(
            db,
            "SELECT session_key, ordinal, item_type, summary_id, role, summary_depth, text, token_count"
            " FROM active_context ORDER BY 1, 2",
        ),
        "compactions": rows(
            db,
            "SELECT c.session_key, before_session_id, after_session_id, engine_id, trigger, ok, compacted, reason,"
            " tokens_before, tokens_after, summary_id, m.entry_id, first_kept_entry_id, summaries_created, started_at,"
            " duration_ms, details_json FROM compactions c"
            " LEFT JOIN messages m ON m.message_id = c.first_kept_message_id ORDER BY c.compaction_id",
        ),
        "turns": rows(
            db,
            "SELECT session_key, session_id, turn, assembled_tokens, prompt_tokens, budget, compacted, at FROM turns"
            " ORDER BY 1, 3",
        ),
        "summaries_fts": rows(
            db, "SELECT rowid FROM summaries_fts WHERE summaries_fts MATCH 'ledger OR drift' ORDER BY rowid"
        ),
    }


def export_key(db: Path, key: str, out: Path) -> None:
    done = invoke(db, "export", "--key", key, "--out", str(out))
    assert done.exit_code == 0, done.output


def import_json(db: Path, out: Path) -> tuple[int, dict[str, Any]]:
    done = invoke(db, "import", str(out), "--json")
    return done.exit_code, json.loads(done.stdout)


def lcm_entries(out: Path) -> list[tuple[Path, int, dict[str, Any]]]:
    """Every lcm entry of the exported files: (file, line number, entry)."""
    found = []
    for path in sorted(out.glob("*.jsonl")):
        for line_no, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
            entry = json.loads(line)
            if entry.get("customType") in (SUMMARY_TYPE, CONTEXT_TYPE, LARGE_CONTENT_TYPE, TURN_TYPE, COMPACTION_TYPE):
                found.append((path, line_no, entry))
    return found


def test_lossless_history_round_trips_exactly(original: tuple[Path, str], tmp_path: Path) -> None:
    db, key = original
    before = lossless_snapshot(db)
    assert {kind for (kind,) in rows(db, "SELECT DISTINCT kind FROM summaries")} == {"leaf", "condensed"}
    assert max(depth for (depth,) in rows(db, "SELECT depth FROM summaries")) >= 2
    out = tmp_path / "exported"
    export_key(db, key, out)
    second = tmp_path / "second.db"
    code, report = import_json(second, out)
    assert code == 0 and report["skipped"] == [] and report["failedFiles"] == 0
    assert report["summaries_new"] == len(before["summaries"])
    assert report["messages_new"] == len(before["messages"])
    after = lossless_snapshot(second)
    for table, expected in before.items():
        assert after[table] == expected, table
    assert before["summaries_fts"], "the FTS probe matches something"
    assert before["compactions"] and before["turns"]
    stats = [invoke(d, "stats", "--key", key, "--json") for d in (db, second)]
    assert stats[0].exit_code == stats[1].exit_code == 0
    assert json.loads(stats[1].stdout) == json.loads(stats[0].stdout)

    doctor = invoke(second, "doctor", "--deep", "--json")
    assert doctor.exit_code == 0, doctor.output
    checks = {c["name"]: c["status"] for c in json.loads(doctor.stdout)["checks"]}
    assert checks["deep check"] == "ok"

    code, again = import_json(second, out)
    assert code == 0
    assert again["messages_new"] == again["entries_new"] == again["summaries_new"] == 0
    assert lossless_snapshot(second) == after

    # The imported store exports the same files (a fixpoint), up to the folder named in parentSession.
    out2 = tmp_path / "exported-again"
    export_key(second, key, out2)
    for path in sorted(out.glob("*")):
        assert (out2 / path.name).read_text(encoding="utf-8") == path.read_text(encoding="utf-8").replace(
            str(out), str(out2)
        ), path.name


def test_exported_files_stay_valid_openclaw_transcripts(original: tuple[Path, str], tmp_path: Path) -> None:
    db, key = original
    out = tmp_path / "exported"
    export_key(db, key, out)
    listing = json.loads((out / "sessions.json").read_text(encoding="utf-8"))
    files = {json.loads(p.read_text(encoding="utf-8").split("\n", 1)[0])["id"]: p for p in out.glob("*.jsonl")}
    assert len(files) == len(rows(db, "SELECT 1 FROM sessions"))
    seen_entries: set[str] = set()
    seen_summaries: set[str] = set()
    order = [s for (s,) in rows(db, "SELECT session_id FROM sessions ORDER BY created_at, rowid")]
    for session_id in order:
        t = read_transcript(files[session_id])
        assert t.errors == [] and t.header is not None and t.header.version == 3
        ids = [e.id for e in t.entries]
        assert len(set(ids)) == len(ids)
        for index, entry in enumerate(t.entries):
            # One linear branch: every entry hangs off the one before it, so the leaf reaches every line.
            assert entry.parent_id == (ids[index - 1] if index else None)
        lcm = [e for e in t.entries if isinstance(e, CustomEntry) and e.custom_type in (SUMMARY_TYPE, CONTEXT_TYPE)]
        assert all(e.type == "custom" and context_message(e) is None for e in lcm)
        # OpenClaw's own view of the file is its messages only: the lcm entries are never model context.
        messages = [e for e in t.entries if e.type == "message"]
        assert t.context_messages() == [context_message(m) for m in messages]
        for entry in t.entries:
            if entry.type == "message":
                seen_entries.add(entry.id)
            elif isinstance(entry, CustomEntry) and entry.custom_type == SUMMARY_TYPE:
                data = entry.data
                # Parents before children: whatever a node was built from is already written.
                assert set(data["sourceEntryIds"]) <= seen_entries
                assert set(data["sourceSummaryIds"]) <= seen_summaries
                seen_summaries.add(data["summaryId"])
        contexts = [e for e in lcm if e.custom_type == CONTEXT_TYPE]
        assert len(contexts) == 1 and contexts[0] is t.entries[-1]
    assert seen_summaries == {s for (s,) in rows(db, "SELECT summary_id FROM summaries")}
    active = rows(db, f"SELECT session_id FROM sessions WHERE session_key = '{key}' AND status = 'active'")
    assert listing[key]["sessionId"] == active[0][0]


def _dependents(db: Path, summary_id: str) -> set[str]:
    """`summary_id` and every node built on it, transitively."""
    found = {summary_id}
    edges = rows(db, "SELECT summary_id, source_summary_id FROM summary_parents")
    grew = True
    while grew:
        more = {child for child, source in edges if source in found} - found
        found |= more
        grew = bool(more)
    return found


def test_a_corrupted_summary_entry_is_reported_kept_verbatim_and_the_rest_imports(
    original: tuple[Path, str], tmp_path: Path
) -> None:
    db, key = original
    out = tmp_path / "exported"
    export_key(db, key, out)
    entries = lcm_entries(out)
    # The first leaf that a condensed node was built from: its loss cascades to the nodes above it.
    sources = {s for (s,) in rows(db, "SELECT source_summary_id FROM summary_parents")}
    path, line_no, victim = next(
        (p, n, e)
        for p, n, e in entries
        if e["customType"] == SUMMARY_TYPE and e["data"]["kind"] == "leaf" and e["data"]["summaryId"] in sources
    )
    lines = path.read_text(encoding="utf-8").splitlines()
    victim["data"]["tokenCount"] = "many"
    lines[line_no - 1] = json.dumps(victim)
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    lost = _dependents(db, victim["data"]["summaryId"])
    assert len(lost) > 1

    second = tmp_path / "second.db"
    code, report = import_json(second, out)
    assert code == 2
    assert f"{path}:{line_no}: {SUMMARY_TYPE} data.tokenCount: Input should be a valid integer" in report["skipped"]
    # Every node built on the lost one is reported too, each at its own line, as is every context or
    # compaction record naming one.
    naming_lost = {
        f"{p}:{n}"
        for p, n, e in entries
        if ({e["data"].get("summaryId")} | {i.get("summaryId") for i in e["data"].get("items", [])}) & lost
    }
    assert len(report["skipped"]) == len(naming_lost)
    assert {s.split(": ", 1)[0] for s in report["skipped"]} == naming_lost
    stored = {s for (s,) in rows(second, "SELECT summary_id FROM summaries")}
    assert stored == {s for (s,) in rows(db, "SELECT summary_id FROM summaries")} - lost
    assert rows(second, "SELECT count(*) FROM messages") == rows(db, "SELECT count(*) FROM messages")
    malformed = rows(
        second, "SELECT source_file, line_no, raw_json, error FROM transcript_entries WHERE entry_type = 'malformed'"
    )
    assert (str(path), line_no, lines[line_no - 1]) in {(f, n, raw) for f, n, raw, _ in malformed}
    assert all(error for *_, error in malformed)
    # A session whose lcm-context named a lost node falls back to the file's own (messages-only) view.
    doctor = invoke(second, "doctor", "--json")
    assert doctor.exit_code == 0, doctor.output

    code, again = import_json(second, out)
    assert code == 2 and again["entries_new"] == again["summaries_new"] == again["messages_new"] == 0


@pytest.mark.parametrize(
    ("custom_type", "data", "reason"),
    [
        (SUMMARY_TYPE, "text", f"{SUMMARY_TYPE} data: expected an object"),
        (SUMMARY_TYPE, {"summaryId": "sum_x", "kind": "root"}, f"{SUMMARY_TYPE} data.kind: "),
        (
            SUMMARY_TYPE,
            {"summaryId": "sum_x", "kind": "leaf", "content": "c", "tokenCount": 3, "summarizer": "s"}
            | {"sourceEntryIds": ["nope"]},
            f"{SUMMARY_TYPE}: source message entry 'nope' is not stored under this key",
        ),
        (
            SUMMARY_TYPE,
            {"summaryId": "sum_x", "kind": "leaf", "content": "c", "tokenCount": 3, "summarizer": "s"}
            | {"sourceEntryIds": ["e1", "e1"]},
            f"{SUMMARY_TYPE} data: Value error, sourceEntryIds lists an id twice",
        ),
        (CONTEXT_TYPE, {"items": [{"ordinal": 0, "tokenCount": 1}]}, f"{CONTEXT_TYPE} data.items.0: Value error"),
        (
            LARGE_CONTENT_TYPE,
            {"fileId": "file_1", "entryId": "gone", "kind": "tool_output", "byteSize": 9, "tokenCount": 9}
            | {"stub": "[LCM]", "stubTokenCount": 2},
            f"{LARGE_CONTENT_TYPE}: message entry 'gone' is not stored under this key",
        ),
        (LARGE_CONTENT_TYPE, {"fileId": "file_1", "entryId": "e1"}, f"{LARGE_CONTENT_TYPE} data.kind: Field required"),
        (
            CONTEXT_TYPE,
            {"items": [{"ordinal": 0, "summaryId": "sum_gone", "tokenCount": 1}]},
            f"{CONTEXT_TYPE}: item summary 'sum_gone' is not stored under this key",
        ),
        (TURN_TYPE, {"turn": 0, "assembledTokens": 5, "budget": 9}, f"{TURN_TYPE} data.turn: "),
        (
            COMPACTION_TYPE,
            {"beforeSessionId": "s-0", "engineId": "legacy", "trigger": "manual", "ok": 1, "compacted": 1}
            | {"tokensBefore": 10, "startedAt": "2026-01-01T00:00:02.000Z"},
            f"{COMPACTION_TYPE}: session 's-0' is not stored under this key",
        ),
    ],
)
def test_bad_lcm_entries_are_malformed_lines(tmp_path: Path, custom_type: str, data: Any, reason: str) -> None:
    header = {"type": "session", "version": 3, "id": "s-1", "timestamp": "2026-01-01T00:00:00.000Z", "cwd": "/"}
    message = {"type": "message", "id": "e1", "parentId": None, "timestamp": "2026-01-01T00:00:01.000Z"}
    message["message"] = {"role": "user", "content": "hello", "timestamp": 1}
    bad = {"type": "custom", "id": "c1", "parentId": "e1", "timestamp": "2026-01-01T00:00:02.000Z"}
    bad |= {"customType": custom_type, "data": data}
    after = {"type": "message", "id": "e2", "parentId": "c1", "timestamp": "2026-01-01T00:00:03.000Z"}
    after["message"] = {"role": "user", "content": "again", "timestamp": 2}
    source = tmp_path / "s-1.jsonl"
    source.write_text("".join(json.dumps(x) + "\n" for x in (header, message, bad, after)), encoding="utf-8")
    db = tmp_path / "bad.db"
    code, report = import_json(db, source)
    assert code == 2
    assert len(report["skipped"]) == 1 and report["skipped"][0].startswith(f"{source}:3: {reason}")
    assert rows(db, "SELECT count(*) FROM summaries") == [(0,)]
    # The tree walks through the bad line: both messages are on the active branch and in context.
    assert rows(db, "SELECT entry_id, on_active_branch FROM messages ORDER BY seq") == [("e1", 1), ("e2", 1)]
    assert rows(db, "SELECT count(*) FROM context_items") == [(2,)]
    assert rows(db, "SELECT raw_json FROM transcript_entries WHERE entry_type = 'malformed'") == [(json.dumps(bad),)]


def replay(db: Path, engine: str) -> str:
    done = invoke(db, "replay", str(EXAMPLE), "--engine", engine, "--budget", "16000", "--json")
    assert done.exit_code == 0, done.output
    return str(json.loads(done.stdout)["session_key"])


@pytest.mark.parametrize(("engine", "target"), [("legacy", "lossless-claw"), ("lossless-claw", "legacy")])
def test_a_migrated_history_keeps_its_mixed_dag(tmp_path: Path, engine: str, target: str) -> None:
    """Legacy nodes the runtime wrote sit in the DAG after a migration: they keep their ids and edges too."""
    db = tmp_path / "first.db"
    key = replay(db, engine)
    done = invoke(db, "migrate", "--key", key, "--to", target, "--budget", "16000")
    assert done.exit_code == 0, done.output
    assert rows(db, "SELECT count(*) FROM summaries WHERE kind = 'legacy'")[0][0] > 0
    out = tmp_path / "exported"
    export_key(db, key, out)
    # OpenClaw still sees each runtime compaction as a `compaction` entry, announced by its lcm-summary.
    legacy = {e["data"]["compactionEntryId"] for _, _, e in lcm_entries(out) if e["data"].get("kind") == "legacy"}
    compactions = {e.id for p in out.glob("*.jsonl") for e in read_transcript(p).entries if e.type == "compaction"}
    assert compactions and compactions <= legacy
    second = tmp_path / "second.db"
    code, report = import_json(second, out)
    assert code == 0 and report["skipped"] == []
    before, after = lossless_snapshot(db), lossless_snapshot(second)
    for table in (
        "sessions",
        "messages",
        "summaries",
        "summary_messages",
        "summary_parents",
        "active_context",
        "compactions",
        "turns",
    ):
        assert after[table] == before[table], table
    lossless_context = (
        "SELECT ci.session_id, ci.ordinal, ci.item_type, m.entry_id, ci.summary_id, ci.token_count"
        " FROM context_items ci JOIN sessions s USING (session_id) LEFT JOIN messages m USING (message_id)"
        " WHERE s.engine_id = 'lossless-claw' ORDER BY 1, 2"
    )
    assert rows(second, lossless_context) == rows(db, lossless_context)
    doctor = invoke(second, "doctor", "--deep", "--json")
    assert doctor.exit_code == 0, doctor.output
    code, again = import_json(second, out)
    assert code == 0 and again["summaries_new"] == again["entries_new"] == 0
    assert lossless_snapshot(second) == after


def test_externalised_large_content_round_trips(isolated_env: Path, tmp_path: Path) -> None:
    """Messages lossless-claw shows as stubs stay stubs: their `large_content` rows travel too."""
    config = {"plugins": {"entries": {"lossless-claw": {"enabled": True, "config": {"largeFileTokenThreshold": 1000}}}}}
    (isolated_env / "openclaw.json").write_text(json.dumps(config), encoding="utf-8")
    db = tmp_path / "first.db"
    key = replay(db, "lossless-claw")
    large = (
        "SELECT lc.file_id, lc.session_key, m.entry_id, lc.kind, lc.name, lc.mime_type, lc.byte_size, lc.token_count,"
        " lc.stub, lc.stub_token_count, lc.created_at FROM large_content lc JOIN messages m USING (message_id)"
        " ORDER BY lc.rowid"
    )
    assert len(rows(db, large)) > 10
    out = tmp_path / "exported"
    export_key(db, key, out)
    assert len([e for _, _, e in lcm_entries(out) if e["customType"] == LARGE_CONTENT_TYPE]) == len(rows(db, large))
    second = tmp_path / "second.db"
    code, report = import_json(second, out)
    assert code == 0 and report["skipped"] == []
    assert rows(second, large) == rows(db, large)
    assert lossless_snapshot(second) == lossless_snapshot(db)
    file_id = rows(second, large)[0][0]
    described = invoke(second, "describe", file_id, "--json")
    assert described.exit_code == 0 and file_id in described.stdout
    code, again = import_json(second, out)
    assert code == 0 and again["entries_new"] == 0 and rows(second, large) == rows(db, large)


def one_file_with_a_compaction(path: Path) -> Path:
    """The example's first 40 messages as one transcript, with an OpenClaw `compaction` entry after the 20th."""
    header, *lines = EXAMPLE.read_text(encoding="utf-8").splitlines()[:41]
    entries = [json.loads(line) for line in lines]
    compaction = {
        "type": "compaction",
        "id": "c0mpact1",
        "parentId": entries[19]["id"],
        "timestamp": entries[19]["timestamp"],
        "summary": "## Goal\nMigrate billing to the ledger.\n## Progress\n- read the module and the config",
        "firstKeptEntryId": entries[14]["id"],
        "tokensBefore": 9000,
    }
    entries[20]["parentId"] = compaction["id"]
    out = [
        header,
        *(json.dumps(e) for e in entries[:20]),
        json.dumps(compaction),
        *(json.dumps(e) for e in entries[20:]),
    ]
    path.write_text("\n".join(out) + "\n", encoding="utf-8")
    return path


def test_an_imported_transcript_migrated_to_lossless_round_trips(tmp_path: Path) -> None:
    """A DAG node built on a legacy summary that the import rebuilds from a `compaction` entry keeps it."""
    db = tmp_path / "first.db"
    assert invoke(db, "import", str(one_file_with_a_compaction(tmp_path / "one.jsonl"))).exit_code == 0
    key = rows(db, "SELECT DISTINCT session_key FROM sessions")[0][0]
    done = invoke(db, "migrate", "--key", key, "--to", "lossless-claw", "--budget", "2000", "--batch", "5")
    assert done.exit_code == 0, done.output
    built_on_import = rows(
        db,
        "SELECT count(*) FROM summary_parents sp JOIN summaries s ON s.summary_id = sp.source_summary_id "
        "WHERE s.summarizer = 'openclaw-import'",
    )[0][0]
    assert built_on_import, "the migration condensed the legacy summary the import made"
    out = tmp_path / "exported"
    export_key(db, key, out)
    second = tmp_path / "second.db"
    code, report = import_json(second, out)
    assert code == 0 and report["skipped"] == []
    before, after = lossless_snapshot(db), lossless_snapshot(second)
    # created_at differs: the legacy summary is rebuilt from its compaction entry, not restored.
    assert [r[:-1] for r in after["summaries"]] == [r[:-1] for r in before["summaries"]]
    for table in ("summary_messages", "summary_parents", "active_context"):
        assert after[table] == before[table], table
    assert invoke(second, "doctor", "--deep", "--json").exit_code == 0
