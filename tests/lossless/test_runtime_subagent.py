"""lcm_expand_query through the real runtime: the host spawns the recall child, which expands under its grant."""

from __future__ import annotations

import json

import pytest
from lcm_helpers import SMALL, conversation, host_persist
from sqlalchemy import text

from engines.lossless.grants import GrantError, GrantStore
from openclaw_ctx.config import OpenClawConfig
from openclaw_ctx.host.runtime import Runtime
from openclaw_ctx.messages import AssistantMessage, ToolResultMessage, flatten_text
from openclaw_ctx.store.store import Store
from openclaw_ctx.testing import ScriptedModel, assistant, tool_call, tool_use

KEY = "agent:main:recall"


def config() -> OpenClawConfig:
    return OpenClawConfig.model_validate(
        {
            "plugins": {
                "slots": {"contextEngine": "lossless-claw"},
                "entries": {"lossless-claw": {"config": SMALL}},
            }
        }
    )


def call(call_id: str, name: str, arguments: dict[str, object]) -> AssistantMessage:
    return tool_use(tool_call(call_id, name, arguments))


def say(text_: str) -> AssistantMessage:
    return assistant(text_, stop_reason="stop")


async def leaf_over(store: Store, needle: str) -> str:
    async with store.read() as conn:
        row = await conn.execute(
            text(
                "SELECT sm.summary_id FROM summary_messages AS sm JOIN messages AS m ON m.message_id = sm.message_id "
                "WHERE m.text LIKE :needle"
            ),
            {"needle": f"%{needle}%"},
        )
        return str(row.scalar_one())


async def test_expand_query_spawns_a_child_through_the_runtime(store: Store) -> None:
    await host_persist(store, KEY, conversation(12))
    model = ScriptedModel()
    runtime = await Runtime.create(store, config=config(), model=model)
    assert (await runtime.compact(KEY)).compacted
    leaf = await leaf_over(store, "FACT_0 ")

    answer = {"answer": "value=0", "citedIds": [leaf], "expandedSummaryCount": 1, "totalSourceTokens": 40}
    model.extend(
        [
            call("q1", "lcm_expand_query", {"prompt": "What did module_0 contain?", "summaryIds": [leaf]}),
            # The child: expand the leaf down to its messages, then answer with the JSON contract.
            call("c1", "lcm_expand", {"summaryIds": [leaf], "includeMessages": True}),
            say(json.dumps({**answer, "truncated": False})),
            say("module_0 held value=0."),
        ]
    )
    result = await runtime.run_turn(KEY, "What did module_0 contain, exactly?")

    parent_result = next(m for m in result.new_messages if isinstance(m, ToolResultMessage))
    assert parent_result.tool_name == "lcm_expand_query" and not parent_result.is_error
    assert json.loads(flatten_text(parent_result))["answer"] == "value=0"

    async with store.read() as conn:
        children = [r[0] for r in await conn.execute(text("SELECT DISTINCT session_key FROM sessions"))]
        child = next(k for k in children if k.startswith(f"{KEY}:subagent:lcm-expand-"))
        rows = await conn.execute(
            text("SELECT role, text FROM messages WHERE session_key = :k ORDER BY seq"), {"k": child}
        )
        child_messages = rows.all()
    assert [r.role for r in child_messages] == ["user", "assistant", "toolResult", "assistant"]
    assert leaf in child_messages[0].text, "the child's task names the seed summary"
    assert "contents of module_0: value=0" in child_messages[2].text, "the child's grant let it expand to messages"
    with pytest.raises(GrantError, match="revoked"):
        await GrantStore(store).require(child)
    await runtime.dispose()
