"""Tool-call pairing repair: unit cases and hypothesis properties."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from openclaw_ctx.compaction.pairing import MISSING_RESULT_TEXT, is_well_paired, repair_tool_pairing
from openclaw_ctx.messages import (
    AgentMessage,
    AssistantMessage,
    TextContent,
    ToolResultMessage,
)
from openclaw_ctx.testing import assistant, tool_call, tool_result, user
from openclaw_ctx.testing import assistant as say


def call(*ids: str) -> AssistantMessage:
    return assistant(None, calls=[tool_call(i, f"tool_{i}", {"x": i}) for i in ids])


def result(cid: str, text: str = "out") -> ToolResultMessage:
    return tool_result(cid, text, name=f"tool_{cid}")


def test_well_formed_list_is_unchanged() -> None:
    messages: list[AgentMessage] = [user(), call("a", "b"), result("a"), result("b"), say(), user()]
    assert repair_tool_pairing(messages) == messages
    assert is_well_paired(messages)


def test_orphan_result_is_dropped() -> None:
    repaired = repair_tool_pairing([result("gone"), user(), say()])
    assert [m.role for m in repaired] == ["user", "assistant"]


def test_missing_result_gets_synthetic_error_right_after_the_call() -> None:
    repaired = repair_tool_pairing([user(), call("a", "b"), result("b"), user("next")])
    assert [m.role for m in repaired] == ["user", "assistant", "toolResult", "toolResult", "user"]
    first, second = repaired[2], repaired[3]
    assert isinstance(first, ToolResultMessage) and isinstance(second, ToolResultMessage)
    assert first.tool_call_id == "a" and first.is_error
    assert first.content[0] == TextContent(text=MISSING_RESULT_TEXT)
    assert first.tool_name == "tool_a"
    assert second.tool_call_id == "b" and not second.is_error


def test_late_result_in_same_span_moves_into_its_group() -> None:
    late = result("a", "async output")
    repaired = repair_tool_pairing([call("a"), user("meanwhile"), late, say()])
    assert repaired[1] is late
    assert [m.role for m in repaired] == ["assistant", "toolResult", "user", "assistant"]


def test_result_after_next_assistant_is_orphan() -> None:
    repaired = repair_tool_pairing([call("a"), say(), result("a")])
    assert [m.role for m in repaired] == ["assistant", "toolResult", "assistant"]
    assert isinstance(repaired[1], ToolResultMessage) and repaired[1].is_error


def test_duplicate_result_dropped() -> None:
    repaired = repair_tool_pairing([call("a"), result("a", "one"), result("a", "two")])
    assert len(repaired) == 2
    assert isinstance(repaired[1], ToolResultMessage) and repaired[1].content[0] == TextContent(text="one")


def test_input_is_not_mutated() -> None:
    messages: list[AgentMessage] = [result("x"), call("a")]
    snapshot = list(messages)
    repair_tool_pairing(messages)
    assert messages == snapshot


# --- properties -----------------------------------------------------------------------------------

IDS = ["a", "b", "c", "d", "e"]
_message = st.one_of(
    st.builds(user, st.sampled_from(["u1", "u2"])),
    st.builds(say, st.sampled_from(["s1", "s2"])),
    st.lists(st.sampled_from(IDS), min_size=1, max_size=3).map(lambda ids: call(*ids)),
    st.builds(result, st.sampled_from(IDS)),
)
message_lists = st.lists(_message, max_size=25)


@settings(max_examples=300, deadline=None)
@given(message_lists)
def test_repair_never_leaves_orphans(messages: list[AgentMessage]) -> None:
    assert is_well_paired(repair_tool_pairing(messages))


@settings(max_examples=300, deadline=None)
@given(message_lists)
def test_repair_is_idempotent(messages: list[AgentMessage]) -> None:
    once = repair_tool_pairing(messages)
    assert repair_tool_pairing(once) == once


@settings(max_examples=300, deadline=None)
@given(message_lists)
def test_non_result_messages_keep_their_order(messages: list[AgentMessage]) -> None:
    kept = [m for m in repair_tool_pairing(messages) if not isinstance(m, ToolResultMessage)]
    assert kept == [m for m in messages if not isinstance(m, ToolResultMessage)]


@settings(max_examples=300, deadline=None)
@given(message_lists)
def test_real_results_survive_when_in_their_span(messages: list[AgentMessage]) -> None:
    repaired = repair_tool_pairing(messages)
    real = [m for m in repaired if isinstance(m, ToolResultMessage) and not m.is_error]
    # Every real result in the output is one of the input objects (never rewritten).
    assert all(any(r is m for m in messages) for r in real)


@settings(max_examples=200, deadline=None)
@given(message_lists)
def test_well_paired_input_is_a_fixed_point(messages: list[AgentMessage]) -> None:
    if is_well_paired(messages):
        assert repair_tool_pairing(messages) == messages
