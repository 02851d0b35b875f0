"""A Runtime without a model: memory for an agent loop that calls its own model (record_turn, assemble, retract)."""

from __future__ import annotations

from typing import Any

import pytest

from openclaw_ctx.config import OpenClawConfig
from openclaw_ctx.errors import EngineError
from openclaw_ctx.host.runtime import Runtime
from openclaw_ctx.messages import AssistantMessage, TextContent, UserMessage
from openclaw_ctx.store import repo
from openclaw_ctx.store.store import Store


def turn(n: int, words: int = 40) -> list[Any]:
    text = " ".join(f"w{n}x{k}" for k in range(words))
    return [UserMessage(content=f"question {n}: {text}"), AssistantMessage(content=[TextContent(text=f"answer {n}")])]


async def test_a_runtime_without_a_model_needs_a_window_and_cannot_run_a_turn(store: Store) -> None:
    with pytest.raises(ValueError, match="context_window"):
        await Runtime.create(store)
    runtime = await Runtime.create(store, context_window=8_000)
    with pytest.raises(EngineError, match="without a model"):
        await runtime.run_turn("k", "hello")
    async with store.read() as conn:
        assert await repo.active_session(conn, "k") is None, "the refused turn created nothing"


@pytest.mark.parametrize("engine", ["legacy", "lossless-claw"])
async def test_recorded_turns_compact_as_run_turns_do_and_recording_again_adds_nothing(
    store: Store, engine: str
) -> None:
    runtime = await Runtime.create(store, config=OpenClawConfig().with_engine(engine), context_window=3_000)
    ids = iter(range(10_000))
    entry_ids: dict[int, str] = {}

    def entry_id(message: Any) -> str:
        return entry_ids.setdefault(id(message), f"e{next(ids)}")

    turns = [turn(n) for n in range(40)]
    for messages in turns:
        result = await runtime.record_turn("k", messages, entry_ids=entry_id)
        assert result.turn_number is not None
    await runtime.settle()
    again = await runtime.record_turn("k", turns[-1], entry_ids=entry_id)
    assert again.turn_number is None, "a turn recorded twice is stored once"
    view, session = await runtime.assemble("k")
    assert session is not None and session.parent_session_id is not None, "recording compacted (rotated)"
    assert view.messages[-1] == turns[-1][-1]
    async with store.read() as conn:
        assert len(await repo.conversation_messages(conn, "k")) == 80
        assert await repo.context_tokens(conn, session.session_id) <= 3_000
    await runtime.dispose()


async def test_assemble_of_an_unknown_key_is_empty_and_creates_nothing(store: Store) -> None:
    runtime = await Runtime.create(store, context_window=8_000)
    view, session = await runtime.assemble("nobody")
    assert (view.messages, session) == ([], None)
    assert await runtime.retract_newest("nobody") is None
    async with store.read() as conn:
        assert await repo.active_session(conn, "nobody") is None
