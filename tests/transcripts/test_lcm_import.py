"""`import --lcm-db`: lossless-claw's own database onto the OpenClaw history it was built from.

The fixture (`tests/fixtures/lcm/`) was written by lossless-claw 0.15.3's own code
(`build_lcm_fixture.ts`: its `runSessionMigration` over two OpenClaw transcripts, then its
CompactionEngine's full sweeps): 89 messages, 6 leaf summaries and one condensed node over 4 of
them, the context they leave, and one message only lcm.db has (a live ingest without a transcript
entry), which must be reported and left out.
"""

from __future__ import annotations

import json
import shutil
import sqlite3
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from test_import_export import snapshot
from typer.testing import Result

from openclaw_ctx.tokens import get_counter

FIXTURE = Path(__file__).parents[1] / "fixtures" / "lcm"
LCM, STATE = FIXTURE / "lcm.db", FIXTURE / "state"
LCM_1_0 = FIXTURE / "lcm-1.0.0-beta.4.db"  # the same transcripts through lossless-claw 1.0.0-beta.4's code
STRAY = "1 of 65 lcm messages match no stored message (first: lcm message 89, user, no entry id); they are left out"


def rows(db: Path, query: str, *args: Any) -> list[tuple[Any, ...]]:
    con = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    try:
        return con.execute(query, args).fetchall()
    finally:
        con.close()


def lcm_dag(lcm: Path) -> dict[str, Any]:
    """lossless-claw's DAG and context with messages named by transcript entry id."""
    entry = dict(rows(lcm, "SELECT message_id, coalesce(transcript_entry_id, stable_event_key) FROM messages"))
    return {
        "summaries": sorted(rows(lcm, "SELECT summary_id, kind, depth, content FROM summaries")),
        "covers": sorted((s, entry[m]) for s, m in rows(lcm, "SELECT summary_id, message_id FROM summary_messages")),
        "parents": sorted(rows(lcm, "SELECT summary_id, parent_summary_id FROM summary_parents")),
        "context": [
            (c, entry.get(m) if t == "message" else s)
            for c, t, m, s in rows(
                lcm, "SELECT conversation_id, item_type, message_id, summary_id FROM context_items ORDER BY 1, ordinal"
            )
            if t == "summary" or entry.get(m) is not None
        ],
    }


def our_dag(db: Path) -> dict[str, Any]:
    entry = dict(rows(db, "SELECT message_id, entry_id FROM messages"))
    conversation = {"5e55a001-0000-4000-8000-000000000001": 1, "5e55a002-0000-4000-8000-000000000002": 2}
    return {
        "summaries": sorted(rows(db, "SELECT summary_id, kind, depth, content FROM summaries")),
        "covers": sorted((s, entry[m]) for s, m in rows(db, "SELECT summary_id, message_id FROM summary_messages")),
        "parents": sorted(rows(db, "SELECT summary_id, source_summary_id FROM summary_parents")),
        "context": [
            (conversation[sid], entry[m] if t == "message" else s)
            for sid, t, m, s in rows(
                db,
                "SELECT session_id, item_type, message_id, summary_id FROM context_items ORDER BY session_id, ordinal",
            )
        ],
    }


@pytest.fixture
def imported(tmp_path: Path, cli_invoke: Callable[..., Result]) -> tuple[Path, Result]:
    db = tmp_path / "ctx.db"
    result = cli_invoke("--db", str(db), "import", str(STATE), "--lcm-db", str(LCM), "--json")
    return db, result


def test_the_dag_and_context_lossless_claw_built_land_whole(imported: tuple[Path, Result]) -> None:
    db, result = imported
    assert result.exit_code == 2, result.output  # the stray lcm-only message is reported
    lcm = json.loads(result.stdout)["lcm"]
    assert [c["problems"] for c in lcm["conversations"]] == [
        [STRAY, "1 context items are messages only lcm.db holds; they are dropped"],
        [],
    ]
    assert [(c["summaries"], c["summaries_new"]) for c in lcm["conversations"]] == [(5, 5), (2, 2)]
    theirs, ours = lcm_dag(LCM), our_dag(db)
    assert ours == theirs
    assert {k: len(v) for k, v in ours.items()} == {"summaries": 7, "covers": 80, "parents": 4, "context": 11}
    assert {e for (e,) in rows(db, "SELECT DISTINCT engine_id FROM sessions")} == {"lossless-claw"}


def test_token_counts_are_counted_again_here(imported: tuple[Path, Result]) -> None:
    db, _ = imported
    counter = get_counter()
    stored = rows(db, "SELECT content, token_count, summarizer FROM summaries")
    assert all(tokens == counter.count(content) and who == "lossless-claw-import" for content, tokens, who in stored)
    heuristic = dict(rows(LCM, "SELECT content, token_count FROM summaries"))
    assert any(heuristic[content] != tokens for content, tokens, _ in stored)  # lossless-claw estimates, we count
    [(condensed, below)] = rows(
        db,
        "SELECT descendant_token_count, (SELECT sum(token_count) FROM summaries WHERE kind = 'leaf' AND summary_id"
        " IN (SELECT source_summary_id FROM summary_parents)) FROM summaries WHERE kind = 'condensed'",
    )
    assert condensed == below


def test_the_result_passes_the_deep_check_and_a_second_import_adds_nothing(
    imported: tuple[Path, Result], cli_invoke: Callable[..., Result]
) -> None:
    db, _ = imported
    deep = json.loads(cli_invoke("--db", str(db), "doctor", "--deep", "--json").stdout)
    checks = {c["name"]: c for c in deep["checks"]}
    assert checks["deep check"]["status"] == "ok", checks["deep check"]
    before = snapshot(db)
    again = cli_invoke("--db", str(db), "import", "--lcm-db", str(LCM), "--json")
    assert [c["summaries_new"] for c in json.loads(again.stdout)["lcm"]["conversations"]] == [0, 0]
    assert snapshot(db) == before


def test_rows_the_plugin_ingested_live_match_by_stable_event_key(
    tmp_path: Path, cli_invoke: Callable[..., Result]
) -> None:
    # Live ingests carry the reply's responseId or the tool call's id, not always the entry id.
    lcm = tmp_path / "lcm.db"
    shutil.copy(LCM, lcm)
    files = sorted((STATE / "agents/main/sessions").glob("*.jsonl"))
    lines = [json.loads(line) for f in files for line in f.read_text(encoding="utf-8").splitlines()]
    keys = {
        e["id"]: e["message"].get("responseId") or e["message"].get("toolCallId")
        for e in lines
        if e["type"] == "message" and e["message"]["role"] in ("assistant", "toolResult")
    }
    con = sqlite3.connect(lcm)
    for entry_id, key in keys.items():
        con.execute(
            "UPDATE messages SET transcript_entry_id = NULL, stable_event_key = ? WHERE transcript_entry_id = ?",
            (key, entry_id),
        )
    con.commit()
    con.close()
    db = tmp_path / "ctx.db"
    result = cli_invoke("--db", str(db), "import", str(STATE), "--lcm-db", str(lcm), "--json")
    assert [c["messages_matched"] for c in json.loads(result.stdout)["lcm"]["conversations"]] == [64, 24]
    assert our_dag(db) == lcm_dag(LCM)


def test_before_the_transcripts_nothing_is_guessed_or_written(
    tmp_path: Path, cli_invoke: Callable[..., Result]
) -> None:
    db = tmp_path / "ctx.db"
    result = cli_invoke("--db", str(db), "import", "--lcm-db", str(LCM), "--json")
    assert result.exit_code == 2
    problems = [c["problems"] for c in json.loads(result.stdout)["lcm"]["conversations"]]
    assert problems == [["no stored session has this id: import its OpenClaw transcripts first; left out"]] * 2
    assert rows(db, "SELECT count(*) FROM summaries") == [(0,)]


def test_a_file_that_is_not_an_lcm_db_is_a_clear_error(tmp_path: Path, cli_invoke: Callable[..., Result]) -> None:
    other = tmp_path / "notes.db"
    with sqlite3.connect(other) as con:
        con.execute("CREATE TABLE notes (t TEXT)")
    con.close()
    result = cli_invoke("--db", str(tmp_path / "ctx.db"), "import", "--lcm-db", str(other))
    assert result.exit_code == 1 and "Traceback" not in result.output
    assert "not lossless-claw's lcm.db" in result.stderr


def test_a_later_transcript_import_keeps_the_dag_context_and_adds_the_new_turn(
    tmp_path: Path, cli_invoke: Callable[..., Result]
) -> None:
    state = tmp_path / "copy" / "state"
    shutil.copytree(STATE, state)
    db = tmp_path / "ctx.db"
    cli_invoke("--db", str(db), "import", str(state), "--lcm-db", str(LCM))
    before = our_dag(db)["context"]
    transcript = state / "agents/main/sessions/5e55a001-0000-4000-8000-000000000001.jsonl"
    last = json.loads(transcript.read_text(encoding="utf-8").splitlines()[-1])
    turn = {"role": "user", "content": "one more question", "timestamp": 1796000000000}
    line = {"type": "message", "id": "later-1", "parentId": last["id"], "timestamp": "2026-12-01T00:00Z"}
    with transcript.open("a", encoding="utf-8") as f:
        f.write(json.dumps(line | {"message": turn}) + "\n")
    result = cli_invoke("--db", str(db), "import", str(state), "--json")
    assert json.loads(result.stdout)["messages_new"] == 1
    assert our_dag(db)["context"] == [*before[:5], (1, "later-1"), *before[5:]]
    deep = json.loads(cli_invoke("--db", str(db), "doctor", "--deep", "--json").stdout)
    assert {c["name"]: c for c in deep["checks"]}["deep check"]["status"] == "ok"


def _altered(tmp_path: Path, *statements: str) -> Path:
    lcm = tmp_path / "lcm.db"
    shutil.copy(LCM, lcm)
    con = sqlite3.connect(lcm)
    con.execute("PRAGMA foreign_keys = OFF")
    for statement in statements:
        con.execute(statement)
    con.commit()
    con.close()
    return lcm


def test_an_older_lcm_db_without_later_columns_imports(tmp_path: Path, cli_invoke: Callable[..., Result]) -> None:
    lcm = _altered(
        tmp_path,
        "DROP INDEX messages_stable_event_key_unique",
        "ALTER TABLE messages DROP COLUMN stable_event_key",
    )
    db = tmp_path / "ctx.db"
    result = cli_invoke("--db", str(db), "import", str(STATE), "--lcm-db", str(lcm), "--json")
    assert [c["summaries_new"] for c in json.loads(result.stdout)["lcm"]["conversations"]] == [5, 2]


def test_rows_naming_what_is_not_there_are_reported_not_a_traceback(
    tmp_path: Path, cli_invoke: Callable[..., Result]
) -> None:
    lcm = _altered(
        tmp_path,
        "INSERT INTO summary_messages VALUES ('sum_nope', 1, 0)",
        "INSERT INTO context_items (conversation_id, ordinal, item_type, message_id) VALUES (99, 0, 'message', 1)",
        "UPDATE summaries SET file_ids = '{broken' WHERE kind = 'condensed'",
        # A live ingest whose tool call id is also another message's: never matched twice.
        "UPDATE messages SET transcript_entry_id = NULL, stable_event_key = 'call_5e55_1' WHERE message_id = 13",
    )
    db = tmp_path / "ctx.db"
    result = cli_invoke("--db", str(db), "import", str(STATE), "--lcm-db", str(lcm), "--json")
    assert result.exit_code == 2 and "Traceback" not in result.output
    problems = "\n".join(
        [*json.loads(result.stdout)["lcm"]["orphans"]]
        + [p for c in json.loads(result.stdout)["lcm"]["conversations"] for p in c["problems"]]
    )
    assert "an edge of summary 'sum_nope', which does not exist" in problems
    assert "a context item of conversation 99, which does not exist" in problems
    assert "2 of 65 lcm messages match no stored message" in problems
    assert "context not imported: it holds summary" in problems  # its node lost a source
    deep = json.loads(cli_invoke("--db", str(db), "doctor", "--deep", "--json").stdout)
    assert {c["name"]: c for c in deep["checks"]}["deep check"]["status"] == "ok"


def test_a_summary_built_on_another_conversations_node_lands(tmp_path: Path, cli_invoke: Callable[..., Result]) -> None:
    # One key's two sessions (the second continues the first): a node of the second condenses the first's.
    state = tmp_path / "copy" / "state"
    shutil.copytree(STATE, state)
    sessions = state / "agents/main/sessions"
    listing = json.loads((sessions / "sessions.json").read_text(encoding="utf-8"))
    listing.pop("agent:main:telegram:direct:42")
    (sessions / "sessions.json").write_text(json.dumps(listing), encoding="utf-8")
    second = sessions / "5e55a002-0000-4000-8000-000000000002.jsonl"
    lines = second.read_text(encoding="utf-8").splitlines()
    header = json.loads(lines[0]) | {"parentSession": "5e55a001-0000-4000-8000-000000000001.jsonl"}
    second.write_text("\n".join([json.dumps(header), *lines[1:]]) + "\n", encoding="utf-8")
    lcm = _altered(
        tmp_path,
        "UPDATE conversations SET active = 0 WHERE conversation_id = 1",  # lossless-claw archives on rotation
        "UPDATE conversations SET session_key = 'agent:main:main' WHERE conversation_id = 2",
        "INSERT INTO summaries (summary_id, conversation_id, kind, depth, content, token_count, created_at)"
        " VALUES ('sum_cross', 2, 'condensed', 2, 'both sessions in one node', 9, '2026-12-07 01:59:00')",
        "INSERT INTO summary_parents SELECT 'sum_cross', summary_id, 0 FROM summaries WHERE kind = 'condensed'"
        " AND conversation_id = 1",
    )
    db = tmp_path / "ctx.db"
    result = cli_invoke("--db", str(db), "import", str(state), "--lcm-db", str(lcm), "--json")
    conversations = json.loads(result.stdout)["lcm"]["conversations"]
    assert [c["summaries_new"] for c in conversations] == [5, 3], conversations
    [(created, descendants)] = rows(
        db, "SELECT created_at, descendant_count FROM summaries WHERE summary_id = 'sum_cross'"
    )
    assert created == "2026-12-07T01:59:00.000Z" and descendants == 5  # the condensed node and its 4 leaves


def test_lossless_claw_1_0_beta_writes_the_same_tables_and_they_land_the_same(
    tmp_path: Path, cli_invoke: Callable[..., Result]
) -> None:
    db = tmp_path / "ctx.db"
    result = cli_invoke("--db", str(db), "import", str(STATE), "--lcm-db", str(LCM_1_0), "--json")
    assert [c["problems"] for c in json.loads(result.stdout)["lcm"]["conversations"]] == [
        [STRAY, "1 context items are messages only lcm.db holds; they are dropped"],
        [],
    ]
    assert our_dag(db) == lcm_dag(LCM_1_0)
    shape = {k: len(v) for k, v in our_dag(db).items()}
    assert shape == {"summaries": 7, "covers": 80, "parents": 4, "context": 11}
    deep = json.loads(cli_invoke("--db", str(db), "doctor", "--deep", "--json").stdout)
    assert {c["name"]: c for c in deep["checks"]}["deep check"]["status"] == "ok"
