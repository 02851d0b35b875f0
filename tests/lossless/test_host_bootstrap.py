"""Bootstrap of a session the store has never seen imports the host's history from its SQLite agent store."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from host_agent_store import add_session, create_store, fixture_lines
from lcm_helpers import host_persist, make_engine, user
from sqlalchemy import text

from openclaw_ctx.contract import AssembleParams, BootstrapParams, CommitTurnParams, SessionTarget
from openclaw_ctx.messages import flatten_text
from openclaw_ctx.store.store import Store

SID = "1a463602-7461-4619-828f-b507d3daeb44"
KEY = "agent:main:main"
LAST = "30061b10-4efb-4cf9-bf27-e2c7196f0e72"
HOST_MESSAGE_IDS = [
    "4efd9753-7cdf-427b-8685-b97b9315c164",
    "257a68c0-5fdf-4f85-815e-d63adcdd3996",
    "8c133a1e-3ea3-4c2f-a05c-121c9e6ccf8b",
    "beaed616-14ef-4417-b2a6-896f4ad55bec",
]


def entry(entry_id: str, parent: str, role: str, content: Any) -> dict[str, Any]:
    message = {"role": role, "content": content, "timestamp": 1796417890000}
    at = "2026-12-04T21:00:00Z"
    return {"type": "message", "id": entry_id, "parentId": parent, "timestamp": at, "message": message}


def bootstrap_params(path: Path, how: str = "target") -> BootstrapParams:
    if how == "marker":
        return BootstrapParams(session_id=SID, session_key=KEY, session_file=f"sqlite:main:{SID}:{path}")
    target = SessionTarget(agent_id="main", session_id=SID, session_key=KEY, store_path=str(path))
    return BootstrapParams(session_id=SID, session_key=KEY, session_target=target, session_file=KEY)


def commit(user_entry: str, text_: str) -> CommitTurnParams:
    def anchor(entry_id: str, seq: int) -> dict[str, Any]:
        return {"agentId": "main", "sessionId": SID, "sessionKey": KEY, "entryId": entry_id, "rawSeq": seq}

    return CommitTurnParams.model_validate(
        {
            "advancementKey": f"adv-{user_entry}",
            "admission": {**anchor(user_entry, 10), "role": "user"},
            "terminal": anchor(f"{user_entry}-reply", 11),
            "sessionId": SID,
            "sessionKey": KEY,
            "messages": [
                {"role": "user", "content": text_, "timestamp": 1796417890000},
                {"role": "assistant", "content": [{"type": "text", "text": "ok"}], "stopReason": "stop"},
            ],
        }
    )


async def stored(store: Store, sql: str) -> list[tuple[Any, ...]]:
    async with store.read() as conn:
        return [tuple(r) for r in (await conn.execute(text(sql), {"k": KEY})).all()]


async def assembled_text(store: Store) -> str:
    result = await make_engine(store).assemble(
        AssembleParams(session_id=SID, session_key=KEY, messages=[], token_budget=100_000)
    )
    return "\n".join(flatten_text(m) for m in result.messages)


@pytest.mark.parametrize("how", ["target", "marker"])
async def test_bootstrap_imports_the_hosts_history_and_later_turns_store_nothing_twice(
    store: Store, tmp_path: Path, how: str
) -> None:
    host = create_store(tmp_path / "openclaw-agent.sqlite")
    # The current turn's user entry is already in the host's transcript when it bootstraps the engine.
    add_session(host, SID, KEY, [*fixture_lines(), json.dumps(entry("u2", LAST, "user", "second question"))])
    engine = make_engine(store)

    boot = await engine.bootstrap(bootstrap_params(host, how))

    assert boot.bootstrapped and boot.imported_messages == 5, boot
    assert "imported 5 messages" in (boot.reason or "")
    rows = await stored(store, "SELECT entry_id, role FROM messages WHERE session_key = :k ORDER BY seq")
    assert [r[0] for r in rows] == [*HOST_MESSAGE_IDS, "u2"]
    assert [r[1] for r in rows] == ["user", "assistant", "toolResult", "assistant", "user"]
    context = await assembled_text(store)
    assert "please look around" in context and "A file the fake model's tool call reads" in context

    done = await engine.commit_turn(commit("u2", "second question"))
    assert done.status == "committed"
    again = await engine.bootstrap(bootstrap_params(host, how))
    assert not again.bootstrapped and again.reason == "already bootstrapped"
    counts = await stored(store, "SELECT entry_id, count(*) FROM messages WHERE session_key = :k GROUP BY entry_id")
    assert dict(counts)["u2"] == 1 and sum(n for _, n in counts) == 6


async def test_the_hosts_own_compaction_becomes_a_summary_the_engine_assembles(store: Store, tmp_path: Path) -> None:
    host = create_store(tmp_path / "openclaw-agent.sqlite")
    compaction = {
        "type": "compaction",
        "id": "c1",
        "parentId": LAST,
        "timestamp": "2026-12-04T20:59:00Z",
        "summary": "SUMMARY-OF-TURN-ONE: the user asked to look around; AGENTS.md was read.",
        "firstKeptEntryId": HOST_MESSAGE_IDS[3],
        "tokensBefore": 120,
    }
    later = [compaction, entry("u2", "c1", "user", "after the host compacted"), entry("a2", "u2", "assistant", [])]
    add_session(host, SID, KEY, [*fixture_lines(), *(json.dumps(e) for e in later)])

    boot = await make_engine(store).bootstrap(bootstrap_params(host))

    assert boot.bootstrapped and boot.imported_messages == 6
    context = await assembled_text(store)
    assert "SUMMARY-OF-TURN-ONE" in context and "after the host compacted" in context
    assert "please look around" not in context  # replaced by the host's summary, as OpenClaw shows it
    summaries = await stored(store, "SELECT kind FROM summaries WHERE session_key = :k")
    assert summaries == [("legacy",)]
    # Nothing is lost: the compacted message is stored, under the summary.
    assert len(await stored(store, "SELECT 1 FROM messages WHERE session_key = :k")) == 6


async def test_an_unreadable_host_store_imports_nothing_and_the_turn_goes_on(store: Store, tmp_path: Path) -> None:
    broken = tmp_path / "openclaw-agent.sqlite"
    broken.write_text("this is not SQLite\n" * 50)
    engine = make_engine(store)

    boot = await engine.bootstrap(bootstrap_params(broken))

    assert not boot.bootstrapped
    assert "host history not imported" in (boot.reason or "") and str(broken) in (boot.reason or "")
    assert await stored(store, "SELECT session_id FROM sessions WHERE session_key = :k") == []
    assert (await engine.commit_turn(commit("u9", "still works"))).status == "committed"


async def test_a_session_the_store_already_holds_is_not_imported_from_the_host(store: Store, tmp_path: Path) -> None:
    host = create_store(tmp_path / "openclaw-agent.sqlite")
    add_session(host, SID, KEY, fixture_lines())
    await host_persist(store, KEY, [(user("ours already"), "ours-1")])

    boot = await make_engine(store).bootstrap(bootstrap_params(host))

    assert boot.imported_messages == 0
    assert await stored(store, "SELECT entry_id FROM messages WHERE session_key = :k") == [("ours-1",)]


def fixture_turn(host: Path, *, last_position: int = 3) -> CommitTurnParams:
    """The fixture's own turn (user, tool call, tool result, reply) as the host commits it: only the
    anchors name entries, by id and by active message position."""
    events = [json.loads(line) for line in fixture_lines()]
    messages = [e["message"] for e in events if e.get("type") == "message"]

    def anchor(entry_id: str, position: int) -> dict[str, Any]:
        where = {"agentId": "main", "sessionId": SID, "sessionKey": KEY, "storePath": str(host)}
        return {**where, "entryId": entry_id, "activeMessagePosition": position}

    return CommitTurnParams.model_validate(
        {
            "advancementKey": "adv-fixture",
            "admission": {**anchor(HOST_MESSAGE_IDS[0], 0), "role": "user"},
            "terminal": anchor(HOST_MESSAGE_IDS[-1], last_position),
            "sessionId": SID,
            "sessionKey": KEY,
            "messages": messages,
        }
    )


@pytest.mark.parametrize("engine_id", ["legacy", "lossless-claw"])
async def test_a_committed_turns_tool_calls_and_results_get_their_host_entry_ids(
    store: Store, tmp_path: Path, engine_id: str
) -> None:
    from engines.legacy import LegacyContextEngine
    from openclaw_ctx.contract import EngineContext

    host = create_store(tmp_path / "openclaw-agent.sqlite")
    add_session(host, SID, KEY, fixture_lines())
    engine = make_engine(store) if engine_id == "lossless-claw" else LegacyContextEngine(EngineContext(store=store))

    assert (await engine.commit_turn(fixture_turn(host))).status == "committed"

    rows = await stored(store, "SELECT entry_id, role FROM messages WHERE session_key = :k ORDER BY seq")
    assert rows == list(zip(HOST_MESSAGE_IDS, ["user", "assistant", "toolResult", "assistant"], strict=True))


async def test_a_turn_the_host_store_does_not_match_keeps_only_the_anchors_ids(store: Store, tmp_path: Path) -> None:
    host = create_store(tmp_path / "openclaw-agent.sqlite")
    add_session(host, SID, KEY, fixture_lines())
    # The anchors span two message positions but the turn has four messages: no guessing.
    await make_engine(store).commit_turn(fixture_turn(host, last_position=1))
    rows = await stored(store, "SELECT entry_id FROM messages WHERE session_key = :k ORDER BY seq")
    assert rows == [(HOST_MESSAGE_IDS[0],), (None,), (None,), (HOST_MESSAGE_IDS[-1],)]
