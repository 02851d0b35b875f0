"""The built-in compaction on a real store: rotation, edges, iterative update, failures, the bridge."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from sqlalchemy import text

from engines.legacy import LegacyContextEngine
from openclaw_ctx.compaction import compact_session, delegate_compaction_to_runtime
from openclaw_ctx.config import CompactionSettings, OpenClawConfig
from openclaw_ctx.contract import AbortSignal, CompactParams, EngineContext
from openclaw_ctx.errors import AbortError, SummarizerAuthError, SummarizerError
from openclaw_ctx.messages import (
    AgentMessage,
    AssistantMessage,
    TextContent,
    ToolCall,
    ToolResultMessage,
    UserMessage,
)
from openclaw_ctx.store import repo
from openclaw_ctx.store.store import Store
from openclaw_ctx.summarize.base import SummaryOutput, SummaryRequest
from openclaw_ctx.summarize.extractive import ExtractiveSummarizer

KEY = "agent:main:test"
SETTINGS = CompactionSettings(keep_recent_tokens=300, reserve_tokens=1000, reserve_tokens_floor=0)
PLANTED = [
    "/srv/app/config/settings.toml",
    "7c9e6679-7425-40de-944b-e07fc1f90ae7",
    "deploy.internal:8443",
    "MAX_RETRY_BUDGET",
]


def turn(i: int) -> list[AgentMessage]:
    fact = PLANTED[i % len(PLANTED)]
    return [
        UserMessage(
            content=f"Step {i}: please check {fact} and report back. " + "context " * 30,
            timestamp=1_700_000_000_000 + i,
        ),
        AssistantMessage(
            content=[
                TextContent(text=f"Reading the file for step {i}."),
                ToolCall(id=f"call{i}", name="read", arguments={"path": f"src/mod{i}.py"}),
            ]
        ),
        ToolResultMessage(
            tool_call_id=f"call{i}", tool_name="read", content=[TextContent(text=f"def f{i}(): pass\n" * 20)]
        ),
        AssistantMessage(content=[TextContent(text=f"Done with step {i}; I decided to use approach {i}.")]),
    ]


async def seed(store: Store, turns: int, start: int = 0) -> repo.SessionRow:
    async with store.transaction() as conn:
        session = await repo.ensure_session(conn, KEY, engine_id="legacy")
        items = [
            repo.NewMessage(m, entry_id=f"e{t}-{j}") for t in range(start, start + turns) for j, m in enumerate(turn(t))
        ]
        await repo.append_messages(conn, session, items, store.counter)
    return session


async def active(store: Store) -> repo.SessionRow:
    async with store.read() as conn:
        row = await repo.active_session(conn, KEY)
    assert row is not None
    return row


async def scalar(store: Store, sql: str, **params: Any) -> Any:
    async with store.read() as conn:
        return await conn.scalar(text(sql), params)


async def counts(store: Store) -> tuple[int, int, int, int]:
    return (
        await scalar(store, "SELECT count(*) FROM summaries"),
        await scalar(store, "SELECT count(*) FROM sessions"),
        await scalar(store, "SELECT count(*) FROM compactions"),
        await scalar(store, "SELECT count(*) FROM context_items"),
    )


async def run(store: Store, session_id: str, summarizer: Any = None, **kw: Any) -> Any:
    args: dict[str, Any] = {
        "settings": SETTINGS,
        "summarizer": summarizer or ExtractiveSummarizer(),
        "token_budget": 2000,
        "custom_instructions": None,
        "force": True,
        "trigger": "manual",
    }
    args.update(kw)
    return await compact_session(store, session_id, **args)


class Failing:
    name = "failing"

    def __init__(self, exc: Exception) -> None:
        self.exc = exc

    async def summarize(self, request: SummaryRequest) -> SummaryOutput:
        raise self.exc


class Slow:
    name = "slow"

    def __init__(self) -> None:
        self.started = asyncio.Event()

    async def summarize(self, request: SummaryRequest) -> SummaryOutput:
        self.started.set()
        await asyncio.sleep(3600)
        raise AssertionError("unreachable")


async def test_compaction_rotates_and_writes_edges(store: Store) -> None:
    session = await seed(store, 8)
    result = await run(store, session.session_id)
    assert result.ok and result.compacted, result.reason
    detail = result.result
    successor = await active(store)
    assert detail.session_id == successor.session_id != session.session_id
    assert detail.session_file == successor.session_file
    assert successor.parent_session_id == session.session_id
    async with store.read() as conn:
        old = await repo.get_session(conn, session.session_id)
        old_context = await repo.load_context(conn, session.session_id)
        new_context = await repo.load_context(conn, successor.session_id)
    assert old.status == "rotated" and len(old_context) == 32  # old session stays readable
    head = new_context[0]
    assert isinstance(head, repo.SummaryItem)
    assert head.summary.kind == "legacy" and head.summary.summarizer == "extractive-v2"
    kept_ids = [e.message_id for e in new_context[1:]]
    covered = [e.message_id for e in old_context if e.message_id not in kept_ids]
    edges = await scalar(
        store,
        "SELECT group_concat(message_id) FROM "
        "(SELECT message_id FROM summary_messages WHERE summary_id=:s ORDER BY ordinal)",
        s=head.summary_id,
    )
    assert [int(x) for x in edges.split(",")] == covered
    assert kept_ids == [e.message_id for e in old_context[len(covered) :]]
    assert detail.tokens_after == sum(e.token_count for e in new_context)
    assert detail.tokens_before == sum(e.token_count for e in old_context) > detail.tokens_after
    assert detail.first_kept_entry_id == new_context[1].entry_id
    assert set(detail.details["readFiles"]) >= {"src/mod0.py", "src/mod1.py"}
    assert "<read-files>" in detail.summary and "src/mod0.py" in detail.summary
    for fact in PLANTED:
        assert fact in detail.summary
    row = await scalar(
        store, "SELECT trigger || '|' || engine_id || '|' || summary_id || '|' || first_kept_entry_id FROM compactions"
    )
    assert row == f"manual|legacy|{head.summary_id}|{detail.first_kept_entry_id}"


async def test_second_compaction_updates_previous_summary(store: Store) -> None:
    session = await seed(store, 6)
    first = await run(store, session.session_id)
    successor = await active(store)
    await seed(store, 6, start=6)
    second = await run(store, successor.session_id)
    assert second.ok and second.compacted
    async with store.read() as conn:
        chain = await repo.session_chain(conn, KEY)
        context = await repo.load_context(conn, (await repo.active_session(conn, KEY)).session_id)  # type: ignore[union-attr]
    assert len(chain) == 3 and [s.status for s in chain] == ["rotated", "rotated", "active"]
    assert chain[2].parent_session_id == chain[1].session_id
    first_id = await scalar(store, "SELECT summary_id FROM compactions ORDER BY compaction_id LIMIT 1")
    new_id = context[0].summary_id
    assert (
        await scalar(store, "SELECT source_summary_id FROM summary_parents WHERE summary_id=:s", s=new_id) == first_id
    )
    assert sum(1 for e in context if e.kind == "summary") == 1
    # Iterative update keeps what the first summary knew.
    assert first.result.summary.split("\n")[1] in second.result.summary
    assert "src/mod0.py" in second.result.details["readFiles"]
    # Every message of the key is reachable: in the active context, or through summary edges.
    unreachable = await scalar(
        store,
        """
        WITH RECURSIVE reach(sid) AS (
          SELECT summary_id FROM context_items WHERE session_id=:a AND summary_id IS NOT NULL
          UNION SELECT source_summary_id FROM summary_parents JOIN reach ON summary_parents.summary_id = reach.sid)
        SELECT count(*) FROM messages m WHERE m.message_id NOT IN (
          SELECT message_id FROM summary_messages WHERE summary_id IN (SELECT sid FROM reach)
          UNION SELECT message_id FROM context_items WHERE session_id=:a AND message_id IS NOT NULL)
        """,
        a=chain[2].session_id,
    )
    assert unreachable == 0


async def test_auth_failure_writes_nothing(store: Store) -> None:
    session = await seed(store, 6)
    before = await counts(store)
    result = await run(store, session.session_id, Failing(SummarizerAuthError("401 invalid api key")))
    assert not result.ok and not result.compacted and "auth" in (result.reason or "")
    assert await counts(store) == before
    assert (await active(store)).session_id == session.session_id


@pytest.mark.parametrize("exc", [SummarizerError("provider exploded"), RuntimeError("bug in provider")])
async def test_failing_summarizer_falls_back_deterministically(store: Store, exc: Exception) -> None:
    session = await seed(store, 6)
    result = await run(store, session.session_id, Failing(exc))
    assert result.ok and result.compacted
    level, name = (await scalar(store, "SELECT fallback_level || '|' || summarizer FROM summaries")).split("|")
    assert (level, name) == ("deterministic", "deterministic-fallback")
    assert "[Truncated from" in result.result.summary


async def test_summarizer_timeout_falls_back(store: Store) -> None:
    session = await seed(store, 6)
    result = await run(store, session.session_id, Slow(), timeout_s=0.05)
    assert result.ok and result.compacted
    assert await scalar(store, "SELECT fallback_level FROM summaries") == "deterministic"
    assert "timed out" in await scalar(store, "SELECT details_json FROM summaries")


async def test_abort_during_summarization_writes_nothing(store: Store) -> None:
    session = await seed(store, 6)
    before = await counts(store)
    signal = AbortSignal()
    slow = Slow()

    async def abort_when_started() -> None:
        await slow.started.wait()
        signal.abort("user pressed stop")

    aborter = asyncio.ensure_future(abort_when_started())
    with pytest.raises(AbortError, match="user pressed stop"):
        await run(store, session.session_id, slow, abort_signal=signal)
    await aborter
    assert await counts(store) == before


async def test_nothing_to_compact_and_below_threshold(store: Store) -> None:
    session = await seed(store, 1)
    result = await run(store, session.session_id, token_budget=None)
    assert result.ok and not result.compacted and (result.reason or "").startswith("nothing to compact: the context's")
    below = await run(store, session.session_id, force=False, token_budget=100_000)
    assert below.ok and not below.compacted and "below threshold" in (below.reason or "")
    assert await scalar(store, "SELECT count(*) FROM summaries") == 0


async def test_unknown_and_rotated_sessions_are_refused(store: Store) -> None:
    missing = await run(store, "no-such-session")
    assert not missing.ok and "no-such-session" in (missing.reason or "")
    session = await seed(store, 6)
    await run(store, session.session_id)
    again = await run(store, session.session_id)
    assert not again.ok and "rotated" in (again.reason or "")


async def test_messages_appended_during_summarization_are_carried_over(store: Store) -> None:
    session = await seed(store, 6)

    class Appending(ExtractiveSummarizer):
        async def summarize(self, request: SummaryRequest) -> SummaryOutput:
            async with store.transaction() as conn:
                await repo.append_messages(
                    conn, session, [repo.NewMessage(UserMessage(content="late"), entry_id="late")], store.counter
                )
            return await super().summarize(request)

    result = await run(store, session.session_id, Appending())
    assert result.ok and result.compacted
    async with store.read() as conn:
        context = await repo.load_context(conn, result.result.session_id)
    assert context[-1].entry_id == "late"


async def test_legacy_engine_delegates_with_runtime_context(store: Store) -> None:
    session = await seed(store, 8)
    config = OpenClawConfig.model_validate(
        {
            "agents": {
                "defaults": {"compaction": {"keepRecentTokens": 300, "reserveTokens": 500, "reserveTokensFloor": 0}}
            }
        }
    )
    engine = LegacyContextEngine(EngineContext(store=store, openclaw_config=config))
    params = CompactParams(
        session_id=session.session_id,
        token_budget=2000,
        compaction_target="budget",
        runtime_context={"trigger": "overflow", "currentTokenCount": 9876.7},
    )
    result = await engine.compact(params)
    assert result.ok and result.compacted
    assert result.result.tokens_before == 9876
    assert await scalar(store, "SELECT trigger FROM compactions") == "overflow"


async def test_delegate_without_store_is_a_clear_failure() -> None:
    result = await delegate_compaction_to_runtime(CompactParams(session_id="x"), EngineContext())
    assert not result.ok and "store" in (result.reason or "")


class Recording(ExtractiveSummarizer):
    def __init__(self) -> None:
        super().__init__()
        self.requests: list[SummaryRequest] = []

    async def summarize(self, request: SummaryRequest) -> SummaryOutput:
        self.requests.append(request)
        return await super().summarize(request)


async def test_prompts_carry_identifier_policy_focus_and_previous_summary(store: Store) -> None:
    session = await seed(store, 6)
    rec = Recording()
    await run(store, session.session_id, rec, custom_instructions="keep the ports")
    first = rec.requests[0]
    assert first.kind == "history" and first.previous_summary is None
    assert "Preserve all opaque identifiers exactly as written" in first.prompt
    assert first.prompt.rstrip().endswith("Additional focus:\nkeep the ports")
    assert first.prompt.startswith("<conversation>\n[User]: Step 0")
    assert "Do NOT continue the conversation" in first.system_prompt
    successor = await active(store)
    await seed(store, 6, start=6)
    rec2 = Recording()
    custom = SETTINGS.model_copy(update={"identifier_policy": "custom", "identifier_instructions": "Keep ticket ids."})
    await run(store, successor.session_id, rec2, settings=custom)
    assert rec2.requests[0].previous_summary and "<previous-summary>" in rec2.requests[0].prompt
    assert "Keep ticket ids." in rec2.requests[0].prompt
    assert "Preserve all opaque identifiers" not in rec2.requests[0].prompt


async def test_long_history_is_summarized_in_sequential_chunks(store: Store) -> None:
    session = await seed(store, 60)
    rec = Recording()
    result = await run(store, session.session_id, rec, token_budget=1000)
    assert result.ok and result.compacted
    history = [r for r in rec.requests if r.kind == "history"]
    assert len(history) >= 2
    for before, after in zip(history, history[1:], strict=False):
        assert after.previous_summary is not None and after.previous_summary.split("\n")[0] == "## Goal"
        assert before.source_text != after.source_text
    assert "Step 0" in history[0].source_text and "Step 0" not in history[-1].source_text


async def test_split_turn_gets_turn_prefix_summary(store: Store) -> None:
    async with store.transaction() as conn:
        session = await repo.ensure_session(conn, KEY)
        big = [
            UserMessage(content="Refactor the loader in src/loader.py"),
            *[
                m
                for i in range(6)
                for m in (
                    AssistantMessage(content=[ToolCall(id=f"k{i}", name="edit", arguments={"path": f"src/l{i}.py"})]),
                    ToolResultMessage(tool_call_id=f"k{i}", content=[TextContent(text="ok " * 150)]),
                )
            ],
            AssistantMessage(content=[TextContent(text="All edits applied. " * 20)]),
        ]
        await repo.append_messages(conn, session, [repo.NewMessage(m) for m in big], store.counter)
    rec = Recording()
    result = await run(store, session.session_id, rec)
    assert result.ok and result.compacted
    assert [r.kind for r in rec.requests] == ["turn_prefix"]
    assert "\n\n---\n\n**Turn Context (split turn):**\n\n## Original Request" in result.result.summary
    assert "src/l0.py" in result.result.details["modifiedFiles"]
    async with store.read() as conn:
        context = await repo.load_context(conn, result.result.session_id)
    assert isinstance(context[1].message, AssistantMessage)  # the kept suffix of the split turn
