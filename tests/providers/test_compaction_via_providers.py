"""A real compaction through the runtime and each engine, with each provider, against the loopback server.

Turns go to the provider through the Runtime's Model; `/compact` goes through the engine's compact() to
the LLM summarizer; the `summaries` row is read back with plain sqlite3 and must name the model.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from loopback import LoopbackServer, RecordingSleep, Reply, Status, serve

from openclaw_ctx.compaction import compact_session
from openclaw_ctx.config import CompactionSettings, OpenClawConfig, load_config
from openclaw_ctx.errors import SummarizerError
from openclaw_ctx.host.runtime import Runtime
from openclaw_ctx.messages import AssistantMessage, TextContent, UserMessage
from openclaw_ctx.providers import RetryPolicy, SpendGuard
from openclaw_ctx.providers.settings import resolve_model
from openclaw_ctx.store import repo
from openclaw_ctx.store.store import Store
from openclaw_ctx.summarize.base import SummaryRequest
from openclaw_ctx.summarize.settings import resolve_summarizer

FAST: dict[str, Any] = {"retry": RetryPolicy(base_delay_s=0.01, max_delay_s=0.02), "sleep": RecordingSleep()}


@pytest.fixture
def loopback() -> Iterator[LoopbackServer]:
    with serve() as server:
        yield server


def summary_text(body: dict[str, Any]) -> str:
    """Summary calls get a summary; turns get an answer that quotes the user."""
    system = body.get("system") or next(
        (m["content"] for m in body.get("messages", []) if m.get("role") == "system"), ""
    )
    if "summarization" in str(system):
        return "Summary: the user planted the word zanzibar and asked about mod files."
    return "noted: " + str(body.get("messages", [{}])[-1].get("content", ""))[:40]


def config_for(tmp_path: Path, engine: str) -> OpenClawConfig:
    path = tmp_path / "openclaw.json"
    path.write_text(
        '{plugins: {entries: {"lossless-claw": {enabled: true, config: {freshTailCount: 2, leafChunkTokens: 400}}}}}',
        encoding="utf-8",
    )
    return load_config(path).with_engine(engine)


def env_for(api: str, loopback: LoopbackServer) -> dict[str, str]:
    if api == "anthropic":
        return {"ANTHROPIC_API_KEY": "ak-test", "ANTHROPIC_BASE_URL": loopback.base_url}
    return {"OPENAI_API_KEY": "sk-test", "OPENAI_BASE_URL": loopback.openai_url}


@pytest.mark.parametrize("engine", ["legacy", "lossless-claw"])
@pytest.mark.parametrize(("api", "ref"), [("openai", "openai/gpt-test-1"), ("anthropic", "anthropic/claude-test-1")])
async def test_manual_compaction_through_the_runtime_names_the_model(
    tmp_path: Path, db_path: Path, loopback: LoopbackServer, engine: str, api: str, ref: str
) -> None:
    loopback.default = Reply(text=summary_text)
    config = config_for(tmp_path, engine)
    env = env_for(api, loopback)
    model = resolve_model(config, model=ref, env=env, **FAST)
    summarizer = resolve_summarizer(config, model=ref, env=env, **FAST)
    assert model is not None and summarizer is not None
    key = f"agent:main:{api}"
    async with await Store.open(db_path) as store:
        # A small window, so the kept recent part is small and there is history to compact.
        runtime = await Runtime.create(store, config=config, model=model, summarizer=summarizer, context_window=3000)
        for n in range(8):
            await runtime.run_turn(key, f"Turn {n}: remember zanzibar and check /srv/mod{n}.py. " + "detail " * 80)
        result = await runtime.compact(key, instructions="keep the planted word")
        await runtime.dispose()
    assert result.ok and result.compacted, result.reason
    model_id = ref.split("/", 1)[1]
    with sqlite3.connect(db_path) as db:
        rows = db.execute(
            "SELECT summarizer, model, fallback_level, content FROM summaries WHERE session_key = ?", (key,)
        ).fetchall()
    assert rows, "the compaction stored a summary"
    assert {(s, m) for s, m, _level, _content in rows} == {(api, model_id)}
    assert all(level == "none" for _s, _m, level, _c in rows)
    assert any("zanzibar" in content for *_rest, content in rows)
    summary_calls = [r for r in loopback.requests if "summarization" in str(r.body)]
    assert summary_calls and all(r.body["model"] == model_id for r in summary_calls)


async def seed(store: Store, key: str) -> str:
    async with store.transaction() as conn:
        session = await repo.ensure_session(conn, key, engine_id="legacy")
        items = [
            repo.NewMessage(m, entry_id=f"{key}-{i}")
            for i, m in enumerate(
                message
                for n in range(6)
                for message in (
                    UserMessage(content=f"Step {n}: check /srv/app/mod{n}.py please. " + "detail " * 40),
                    AssistantMessage(content=[TextContent(text=f"Checked mod{n}.py; decision {n} stands. " * 5)]),
                )
            )
        ]
        await repo.append_messages(conn, session, items, store.counter)
    return session.session_id


async def test_builtin_compaction_spend_guard_counts_per_session_key(
    store: Store, db_path: Path, loopback: LoopbackServer
) -> None:
    loopback.default = Reply(text="Steps checked; decisions stand.")
    guard = SpendGuard(max_calls=1, window_s=600, backoff_s=600)
    summarizer = _local_summarizer(loopback, guard)
    settings = CompactionSettings(keep_recent_tokens=200, reserve_tokens=500, reserve_tokens_floor=0)

    async def budget_compaction(key: str) -> Any:
        return await compact_session(
            store,
            await seed(store, key),
            settings=settings,
            summarizer=summarizer,
            token_budget=2000,
            custom_instructions=None,
            force=True,
            trigger="budget",
        )

    first = await budget_compaction("agent:main:a")
    second = await budget_compaction("agent:main:b")  # another key: its own allowance
    assert first.ok and second.ok
    with sqlite3.connect(db_path) as db:
        levels = dict(db.execute("SELECT session_key, fallback_level FROM summaries").fetchall())
    assert levels == {"agent:main:a": "none", "agent:main:b": "none"}
    calls = len(loopback.requests)
    # The same key again is over its allowance: no call, and the summary is the marked deterministic one.
    async with store.transaction() as conn:
        session = await repo.active_session(conn, "agent:main:a")
        assert session is not None
        await repo.append_messages(
            conn,
            session,
            [repo.NewMessage(UserMessage(content="more " * 400), entry_id=f"more-{n}") for n in range(3)],
            store.counter,
        )
    third = await compact_session(
        store,
        session.session_id,
        settings=settings,
        summarizer=summarizer,
        token_budget=2000,
        custom_instructions=None,
        force=True,
        trigger="budget",
    )
    assert third.ok and third.compacted
    assert len(loopback.requests) == calls
    with sqlite3.connect(db_path) as db:
        marked = db.execute(
            "SELECT fallback_level FROM summaries WHERE session_key = 'agent:main:a' ORDER BY created_at DESC LIMIT 1"
        ).fetchone()
    assert marked == ("deterministic",)


def _local_summarizer(loopback: LoopbackServer, guard: SpendGuard) -> Any:
    from openclaw_ctx.providers import OpenAIClient
    from openclaw_ctx.summarize.llm import LLMSummarizer

    client = OpenAIClient(base_url=loopback.openai_url, provider="ollama", spend_guard=guard, **FAST)
    return LLMSummarizer(client, "qwen3")


async def test_auth_failure_in_a_manual_compaction_writes_nothing(
    tmp_path: Path, db_path: Path, loopback: LoopbackServer
) -> None:
    config = config_for(tmp_path, "legacy")
    env = env_for("anthropic", loopback)
    model = resolve_model(config, model="anthropic/claude-x", env=env, **FAST)
    summarizer = resolve_summarizer(config, model="anthropic/claude-x", env=env, **FAST)
    assert model is not None and summarizer is not None
    async with await Store.open(db_path) as store:
        runtime = await Runtime.create(store, config=config, model=model, summarizer=summarizer, context_window=3000)
        for n in range(12):
            await runtime.run_turn("k", f"turn {n} " + "words " * 80)
        loopback.default = Status(401, "invalid x-api-key", "authentication_error")
        result = await runtime.compact("k")
    assert not result.ok and "auth" in (result.reason or "")
    with sqlite3.connect(db_path) as db:
        assert db.execute("SELECT count(*) FROM summaries").fetchone() == (0,)


@pytest.mark.parametrize("engine", ["legacy", "lossless-claw"])
async def test_a_manual_compaction_clears_the_keys_spend_guard(
    tmp_path: Path, db_path: Path, loopback: LoopbackServer, engine: str
) -> None:
    loopback.default = Reply(text=summary_text)
    config = config_for(tmp_path, engine)
    env = {**env_for("openai", loopback), "LCM_SUMMARY_MAX_CALLS_PER_WINDOW": "1"}
    model = resolve_model(config, model="openai/gpt-g", env=env, **FAST)
    summarizer = resolve_summarizer(config, model="openai/gpt-g", env=env, **FAST)
    assert model is not None and summarizer is not None
    key = "agent:main:guarded"
    request = SummaryRequest(kind="leaf", source_text="x", target_tokens=50, metadata={"session_key": key})
    await summarizer.summarize(request)
    with pytest.raises(SummarizerError, match="spend guard"):
        await summarizer.summarize(request)  # the key is now backing off
    async with await Store.open(db_path) as store:
        runtime = await Runtime.create(store, config=config, model=model, summarizer=summarizer, context_window=3000)
        for n in range(12):
            await runtime.run_turn(key, f"turn {n} about zanzibar " + "words " * 80)
        calls = len(loopback.requests)
        result = await runtime.compact(key)
    assert result.ok and result.compacted, result.reason
    assert len(loopback.requests) > calls, "the manual compaction reached the provider"
    with sqlite3.connect(db_path) as db:
        models = {m for (m,) in db.execute("SELECT model FROM summaries")}
    assert "gpt-g" in models
