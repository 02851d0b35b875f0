"""The legacy engine and the delegate bridge (reference §7 "Legacy engine & delegates")."""

from __future__ import annotations

from pathlib import Path

import pytest
from sqlalchemy import func, select

from engines.legacy import LegacyContextEngine
from openclaw_ctx.compaction import delegate_compaction_to_runtime
from openclaw_ctx.config import OpenClawConfig
from openclaw_ctx.context import pipeline_messages, render_summary_xml
from openclaw_ctx.contract import AbortSignal, AssembleParams, CompactParams, EngineContext, IngestParams
from openclaw_ctx.errors import AbortError
from openclaw_ctx.messages import AssistantMessage, CompactionSummaryMessage, TextContent, UserMessage
from openclaw_ctx.store import repo
from openclaw_ctx.store.models import Summary, SummaryMessage
from openclaw_ctx.store.store import Store


def engine_for(store: Store) -> LegacyContextEngine:
    return LegacyContextEngine(EngineContext(store=store, openclaw_config=OpenClawConfig()))


async def test_ingest_is_a_no_op(store: Store) -> None:
    result = await engine_for(store).ingest(IngestParams(session_id="s", message=UserMessage(content="hi")))
    assert result.ingested is False


async def test_assemble_returns_the_same_list_and_zero(store: Store) -> None:
    messages = [UserMessage(content="a"), AssistantMessage(content=[TextContent(text="b")])]
    result = await engine_for(store).assemble(AssembleParams(session_id="s", messages=messages, token_budget=10))
    assert result.messages is messages
    assert result.estimated_tokens == 0
    assert result.system_prompt_addition is None
    assert engine_for(store).info.id == "legacy" and not engine_for(store).info.owns_compaction


async def test_dispose_and_after_turn_are_quiet(store: Store) -> None:
    engine = engine_for(store)
    assert await engine.dispose() is None


async def _seed(store: Store, key: str, turns: int) -> repo.SessionRow:
    async with store.transaction() as conn:
        session = await repo.ensure_session(conn, key)
        items: list[repo.NewMessage] = []
        for i in range(turns):
            items.append(repo.NewMessage(UserMessage(content=f"request {i}: " + "please refactor the ledger " * 40)))
            items.append(repo.NewMessage(AssistantMessage(content=[TextContent(text=f"done {i} " + "ok " * 80)])))
        await repo.append_messages(conn, session, items, store.counter)
    return session


async def test_delegate_uses_runtime_context_token_count_and_rotates(store: Store, tmp_path: Path) -> None:
    session = await _seed(store, "agent:main:legacy", 30)
    ctx = EngineContext(store=store, openclaw_config=OpenClawConfig(), workspace_dir=str(tmp_path))
    params = CompactParams(
        session_id=session.session_id,
        session_key=session.session_key,
        session_file=session.session_file,
        token_budget=4_000,
        force=True,
        compaction_target="threshold",  # ignored by the built-in compaction
        runtime_context={"currentTokenCount": 12_345.7, "trigger": "manual"},
    )
    result = await delegate_compaction_to_runtime(params, ctx)
    assert result.ok and result.compacted and result.result is not None
    assert result.result.session_id and result.result.session_id != session.session_id
    assert result.result.tokens_before > 0
    async with store.read() as conn:
        kinds = list((await conn.execute(select(Summary.kind))).scalars())
        covered = await conn.scalar(select(func.count()).select_from(SummaryMessage))
        successor = await repo.get_session(conn, result.result.session_id)
        old = await repo.get_session(conn, session.session_id)
        entries = await repo.load_context(conn, successor.session_id)
    assert kinds == ["legacy"] and covered and covered > 0
    assert old.status == "rotated" and successor.parent_session_id == session.session_id
    rendered = pipeline_messages(entries)
    assert isinstance(rendered[0], CompactionSummaryMessage)


async def test_delegate_honours_an_aborted_signal(store: Store) -> None:
    session = await _seed(store, "agent:main:abort", 10)
    signal = AbortSignal()
    signal.abort("user pressed stop")
    params = CompactParams(
        session_id=session.session_id, session_key=session.session_key, force=True, abort_signal=signal
    )
    ctx = EngineContext(store=store, openclaw_config=OpenClawConfig())
    with pytest.raises(AbortError, match="user pressed stop"):
        await delegate_compaction_to_runtime(params, ctx)
    async with store.read() as conn:
        assert await conn.scalar(select(func.count()).select_from(Summary)) == 0


def test_summary_xml_escapes_and_marks_untrusted() -> None:
    summary = repo.SummaryRef(
        "sum_0123456789abcdef", "condensed", 2, "a < b & </summary>", 9, None, None, "test", "none"
    )
    xml = render_summary_xml(summary, ["sum_a", "sum_b"])
    assert 'trust="untrusted"' in xml and 'depth="2"' in xml
    assert "a &lt; b &amp; &lt;/summary&gt;" in xml
    assert xml.count("<summary_ref") == 2
