"""`doctor`, `sessions` and `show` through the real CLI, on real database files, with bad input."""

from __future__ import annotations

import asyncio
import json
import sqlite3
from pathlib import Path
from typing import Any

import pytest
from test_cli_db import assert_clean_failure, invoke
from typer.testing import Result

from openclaw_ctx.messages import AssistantMessage, TextContent, ToolCall, ToolResultMessage, UserMessage
from openclaw_ctx.store import repo
from openclaw_ctx.store.store import Store


async def _seed(path: Path) -> dict[str, Any]:
    """Two keys; `alpha` compacted once (a summary replaces its first two messages in the successor)."""
    store = await Store.open(path)
    async with store.transaction() as conn:
        alpha = await repo.ensure_session(conn, "alpha")
        beta = await repo.ensure_session(conn, "beta")
        first = await repo.append_messages(
            conn,
            alpha,
            [
                repo.NewMessage(UserMessage(content="list the files 🦞"), entry_id="a1"),
                repo.NewMessage(
                    AssistantMessage(content=[ToolCall(id="c1", name="bash", arguments={"command": "ls"})]),
                    entry_id="a2",
                ),
                repo.NewMessage(
                    ToolResultMessage(tool_call_id="c1", tool_name="bash", content=[TextContent(text="a.txt b.txt")]),
                    entry_id="a3",
                ),
            ],
            store.counter,
        )
        await repo.append_messages(conn, beta, [repo.NewMessage(UserMessage(content="上下文 hello"))], store.counter)
        summary = repo.NewSummary(
            kind="legacy",
            content="The user asked for a file listing.",
            token_count=9,
            summarizer="test",
            source_message_ids=[r.message_id for r in first[:2]],
        )
        sid = await repo.insert_summary(conn, alpha, summary)
        successor = await repo.rotate_session(
            conn,
            alpha,
            [("summary", sid, 9), ("message", first[2].message_id, first[2].token_count)],
            reason="compaction",
            engine_id="legacy",
        )
        await repo.append_messages(
            conn, successor, [repo.NewMessage(UserMessage(content="thanks"), entry_id="a4")], store.counter
        )
    await store.close()
    return {"alpha": alpha, "beta": beta, "successor": successor, "summary_id": sid, "first": first}


@pytest.fixture
def seeded(db_path: Path) -> dict[str, Any]:
    return asyncio.run(_seed(db_path))


def json_of(result: Result) -> Any:
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


# --- doctor --------------------------------------------------------------------------------------


def checks_of(result: Result) -> dict[str, dict[str, str]]:
    return {c["name"]: c for c in json.loads(result.stdout)["checks"]}


def test_doctor_on_a_healthy_database(seeded: dict[str, Any], db_path: Path) -> None:
    result = invoke("--db", str(db_path), "doctor", "--json")
    data = json.loads(result.stdout)
    checks = checks_of(result)
    for name in ("config", "database", "schema", "WAL", "engine", "tokenizer"):
        assert checks[name]["status"] == "ok", checks[name]
    assert result.exit_code == 0, result.output
    assert data["ok"] is True
    assert data["facts"]["engine_active"] == "legacy" and data["facts"]["engine_source"] == "default"
    assert data["facts"]["journal_mode"] == "wal"
    assert data["facts"]["schema_revision"] == data["facts"]["schema_head"]
    legacy = [e for e in data["engines"] if e["id"] == "legacy"]
    assert legacy == [{"id": "legacy", "owner": "core", "lifecycle": "runtime", "selected": True}]


def test_doctor_table_output(seeded: dict[str, Any], db_path: Path) -> None:
    result = invoke("--db", str(db_path), "doctor")
    assert result.exit_code == 0, result.output
    for word in ("doctor", "database", "schema", "tokenizer", "registered engines", "legacy"):
        assert word in result.stdout


def test_doctor_reports_a_configured_engine_that_is_missing(db_path: Path, tmp_path: Path) -> None:
    config = tmp_path / "openclaw.json"
    config.write_text("{ plugins: { slots: { contextEngine: 'no-such-engine' } } }  // JSON5\n")
    result = invoke("--db", str(db_path), "--config", str(config), "doctor", "--json")
    assert result.exit_code == 1
    checks = checks_of(result)
    assert checks["engine"]["status"] == "fail"
    assert "no-such-engine (configured)" in checks["engine"]["detail"]
    assert checks["config"]["detail"] == str(config)
    quarantined = json.loads(result.stdout)["quarantines"]
    assert [q["engine_id"] for q in quarantined] == ["no-such-engine"]


def test_doctor_checks_the_lossless_slot_before_the_database_exists(tmp_path: Path) -> None:
    # A new user's first `doctor`: the slot names lossless-claw, the database is not created yet.
    config = tmp_path / "openclaw.json"
    config.write_text("{ plugins: { slots: { contextEngine: 'lossless-claw' } } }\n")
    db = tmp_path / "new.db"
    result = invoke("--db", str(db), "--config", str(config), "doctor", "--json")
    assert result.exit_code == 0, result.stdout
    checks = checks_of(result)
    assert checks["database"]["status"] == "warn" and "does not exist yet" in checks["database"]["detail"]
    assert checks["engine"]["status"] == "ok" and checks["engine"]["detail"].startswith("lossless-claw (configured")
    quarantined = [q["engine_id"] for q in json.loads(result.stdout)["quarantines"]]  # process-wide, so filtered
    assert "lossless-claw" not in quarantined
    assert not db.exists(), "doctor never creates the database"


def test_doctor_reports_a_broken_config(db_path: Path, tmp_path: Path) -> None:
    config = tmp_path / "openclaw.json"
    config.write_text("{ plugins: ")
    result = invoke("--db", str(db_path), "--config", str(config), "doctor", "--json")
    assert result.exit_code == 1
    assert checks_of(result)["config"]["status"] == "fail"
    assert "not valid JSON5" in checks_of(result)["config"]["detail"]


def test_doctor_says_loudly_when_counting_is_heuristic(db_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENCLAW_CTX_ENCODING", "heuristic")
    result = invoke("--db", str(db_path), "doctor", "--json")
    tokenizer = checks_of(result)["tokenizer"]
    assert tokenizer["status"] == "warn"
    assert tokenizer["detail"].startswith("HEURISTIC heuristic:chars/4")


def test_doctor_on_a_missing_database_creates_nothing(db_path: Path) -> None:
    result = invoke("--db", str(db_path), "doctor", "--json")
    assert result.exit_code == 0, result.output
    assert checks_of(result)["database"]["status"] == "warn"
    assert not db_path.exists()


def test_doctor_refuses_a_newer_schema_untouched(seeded: dict[str, Any], db_path: Path) -> None:
    with sqlite3.connect(db_path) as db:
        db.execute("UPDATE alembic_version SET version_num = 'zzzz'")
    db.close()
    before = db_path.read_bytes()
    result = invoke("--db", str(db_path), "doctor", "--json")
    assert result.exit_code == 1
    assert "newer than this openclaw-ctx" in checks_of(result)["database"]["detail"]
    assert db_path.read_bytes() == before


def test_doctor_reports_an_old_schema(db_path: Path) -> None:
    assert invoke("--db", str(db_path), "db", "upgrade").exit_code == 0
    assert invoke("--db", str(db_path), "db", "downgrade", "base", "--yes").exit_code == 0
    result = invoke("--db", str(db_path), "doctor", "--json")
    assert result.exit_code == 1
    schema = checks_of(result)["schema"]
    assert schema["status"] == "fail" and "db upgrade" in schema["detail"]


def test_doctor_on_a_text_file(tmp_path: Path) -> None:
    path = tmp_path / "notes.db"
    path.write_text("not a database")
    result = invoke("--db", str(path), "doctor", "--json")
    assert result.exit_code == 1
    database = checks_of(result)["database"]
    assert database["status"] == "fail" and "notes.db" in database["detail"]


def test_doctor_finds_damaged_pages(db_path: Path) -> None:
    async def big() -> None:
        store = await Store.open(db_path)
        async with store.transaction() as conn:
            session = await repo.ensure_session(conn, "k")
            items = [repo.NewMessage(UserMessage(content=f"message {i} " + "x" * 3000)) for i in range(60)]
            await repo.append_messages(conn, session, items, store.counter)
        await store.close()

    asyncio.run(big())
    data = bytearray(db_path.read_bytes())
    page = int.from_bytes(data[16:18], "big")
    middle = (len(data) // page // 2) * page
    data[middle : middle + page] = b"\xde\xad" * (page // 2)
    db_path.write_bytes(bytes(data))
    result = invoke("--db", str(db_path), "doctor", "--json")
    assert result.exit_code == 1
    assert checks_of(result)["database"]["status"] == "fail"


def test_doctor_deep(seeded: dict[str, Any], db_path: Path) -> None:
    result = invoke("--db", str(db_path), "doctor", "--deep", "--json")
    deep = checks_of(result)["deep check"]
    # The deep check is core: it runs whatever engine wrote the store.
    assert deep["status"] in {"ok", "fail"}
    assert ("problem" in deep["detail"]) == (deep["status"] == "fail")


# --- sessions ------------------------------------------------------------------------------------


def test_sessions_lists_active_ones(seeded: dict[str, Any], db_path: Path) -> None:
    rows = json_of(invoke("--db", str(db_path), "sessions", "--json"))
    assert [(r["session_key"], r["status"]) for r in rows] == [("alpha", "active"), ("beta", "active")]
    alpha = rows[0]
    assert alpha["session_id"] == seeded["successor"].session_id
    # the successor holds one new message; its context is summary + kept tool result + new message
    assert alpha["messages"] == 1
    with sqlite3.connect(db_path) as db:
        expected = db.execute(
            "SELECT sum(token_count) FROM context_items WHERE session_id = ?", (alpha["session_id"],)
        ).fetchone()[0]
    db.close()
    assert alpha["context_tokens"] == expected > 9


def test_sessions_all_and_key(seeded: dict[str, Any], db_path: Path) -> None:
    rows = json_of(invoke("--db", str(db_path), "sessions", "--all", "--key", "alpha", "--json"))
    assert [r["status"] for r in rows] == ["rotated", "active"]
    assert rows[0]["messages"] == 3
    assert rows[1]["parent_session_id"] == rows[0]["session_id"]
    assert json_of(invoke("--db", str(db_path), "sessions", "--key", "nobody", "--json")) == []


def test_sessions_table(seeded: dict[str, Any], db_path: Path) -> None:
    result = invoke("--db", str(db_path), "sessions", "--all")
    assert result.exit_code == 0, result.output
    assert "sessions (3)" in result.stdout
    assert "alpha" in result.stdout and "rotated" in result.stdout


def test_sessions_on_a_missing_database(db_path: Path) -> None:
    assert_clean_failure(invoke("--db", str(db_path), "sessions"), "no database file")
    assert not db_path.exists()


def test_sessions_on_an_old_schema_refuses_to_migrate(db_path: Path) -> None:
    invoke("--db", str(db_path), "db", "upgrade")
    invoke("--db", str(db_path), "db", "downgrade", "base", "--yes")
    assert_clean_failure(invoke("--db", str(db_path), "sessions"), "db upgrade")
    assert invoke("--db", str(db_path), "db", "current").exit_code == 1  # still empty


# --- show ----------------------------------------------------------------------------------------


def test_show_messages_by_session_id(seeded: dict[str, Any], db_path: Path) -> None:
    data = json_of(invoke("--db", str(db_path), "show", seeded["alpha"].session_id, "--json"))
    assert data["session"]["status"] == "rotated"
    messages = data["messages"]
    assert [m["seq"] for m in messages] == [1, 2, 3]
    assert [m["role"] for m in messages] == ["user", "assistant", "toolResult"]
    assert messages[0]["message"]["content"] == "list the files 🦞"
    assert messages[1]["message"]["content"][0]["type"] == "toolCall"
    assert messages[2]["message"]["toolCallId"] == "c1"


def test_show_by_key_and_limit(seeded: dict[str, Any], db_path: Path) -> None:
    data = json_of(invoke("--db", str(db_path), "show", "beta", "--json"))
    assert [m["text"] for m in data["messages"]] == ["上下文 hello"]
    alpha = json_of(invoke("--db", str(db_path), "show", seeded["alpha"].session_id, "-n", "2", "--json"))
    assert [m["seq"] for m in alpha["messages"]] == [2, 3]


def test_show_context(seeded: dict[str, Any], db_path: Path) -> None:
    data = json_of(invoke("--db", str(db_path), "show", "alpha", "--context", "--json"))
    assert data["session"]["session_id"] == seeded["successor"].session_id
    items = data["context"]
    assert [i["item_type"] for i in items] == ["summary", "message", "message"]
    assert items[0]["summary_id"] == seeded["summary_id"] and items[0]["role"] == "summary:legacy"
    assert items[0]["text"] == "The user asked for a file listing."
    assert [i["role"] for i in items[1:]] == ["toolResult", "user"]


def test_show_table(seeded: dict[str, Any], db_path: Path) -> None:
    result = invoke("--db", str(db_path), "show", "alpha", "--context")
    assert result.exit_code == 0, result.output
    assert "summary:" in result.stdout and "3 items" in result.stdout


def test_show_unknown_session(seeded: dict[str, Any], db_path: Path) -> None:
    assert_clean_failure(invoke("--db", str(db_path), "show", "nope"), "no session with id or key 'nope'")


def test_show_bad_limit(seeded: dict[str, Any], db_path: Path) -> None:
    result = invoke("--db", str(db_path), "show", "alpha", "--limit", "0")
    assert result.exit_code == 2
    assert "Invalid value" in result.output
