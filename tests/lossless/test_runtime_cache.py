"""Prompt-cache friendliness through the real runtime: between compactions, each model call's prompt
starts with the previous call's prompt, byte for byte (same system prompt, same messages)."""

from __future__ import annotations

import json

from lcm_helpers import SMALL

from openclaw_ctx.config import OpenClawConfig
from openclaw_ctx.host.runtime import Runtime
from openclaw_ctx.messages import AssistantMessage, TextContent, to_wire
from openclaw_ctx.store.store import Store
from openclaw_ctx.testing import ScriptedModel

KEY = "agent:main:cache"


def config() -> OpenClawConfig:
    settings = {**SMALL, "freshTailCount": 8, "leafChunkTokens": 1500, "condensedTargetTokens": 200}
    return OpenClawConfig.model_validate(
        {
            "plugins": {
                "slots": {"contextEngine": "lossless-claw"},
                "entries": {"lossless-claw": {"config": settings}},
            }
        }
    )


def wire(messages: list[object]) -> list[str]:
    return [json.dumps(to_wire(m), sort_keys=True) for m in messages]  # type: ignore[arg-type]


async def test_prompt_prefix_is_stable_between_compactions(store: Store) -> None:
    turns = 40
    filler = " ".join(f"detail{k}" for k in range(60))
    replies = [
        AssistantMessage(content=[TextContent(text=f"answer {i}: {filler}")], stop_reason="stop") for i in range(turns)
    ]
    model = ScriptedModel(replies, context_window=6_000)
    runtime = await Runtime.create(store, config=config(), model=model)
    # compacted[i]: a compaction ran between model call i-1 and model call i (after turn i-1's reply,
    # or inside turn i before its call).
    compacted = [False] * turns
    for i in range(turns):
        result = await runtime.run_turn(KEY, f"question {i}: {filler}")
        compacted[i] = compacted[i] or any(c.compacted for c in result.compactions)
        if i + 1 < turns:
            compacted[i + 1] = any(c.compacted for c in await runtime.settle(KEY))
    await runtime.dispose()

    stable = rotated = 0
    for i in range(1, turns):
        before, after = model.calls[i - 1], model.calls[i]
        if compacted[i]:
            rotated += 1
            continue
        previous = wire([*before.messages, replies[i - 1]])
        assert after.system_prompt == before.system_prompt, f"turn {i}: system prompt changed"
        assert wire(after.messages)[: len(previous)] == previous, f"turn {i}: the prompt prefix changed"
        stable += 1
    assert rotated >= 2, "the history outgrew the threshold several times"
    assert stable >= turns // 2, "most turns reuse the previous prompt as their prefix"
