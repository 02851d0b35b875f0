"""The pure half of the built-in compaction: threshold, cut point (reference §7 checklist), serialization."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from openclaw_ctx import testing
from openclaw_ctx.compaction.plan import (
    NO_FIT_ERROR,
    FileOps,
    adaptive_chunk_ratio,
    chunk_messages,
    compose_summary,
    estimate_tokens,
    extract_file_ops,
    find_cut_point,
    is_oversized,
    max_chunk_tokens,
    oversized_note,
    serialize_for_summary,
    should_compact,
)
from openclaw_ctx.config import CompactionSettings
from openclaw_ctx.messages import (
    AgentMessage,
    AssistantMessage,
    BashExecutionMessage,
    ImageContent,
    TextContent,
    ThinkingContent,
    ToolCall,
    ToolResultMessage,
    UserMessage,
)


def user(tokens: int = 10) -> UserMessage:
    return testing.user("u" * (tokens * 4))


def say(tokens: int = 10) -> AssistantMessage:
    return testing.assistant("a" * (tokens * 4))


def call(cid: str, name: str = "bash", **args: object) -> AssistantMessage:
    return testing.assistant(None, calls=[testing.tool_call(cid, name, args)])


def result(cid: str, tokens: int = 10, *, error: bool = False) -> ToolResultMessage:
    return testing.tool_result(cid, "r" * (tokens * 4), is_error=error)


# --- estimates and threshold -------------------------------------------------------------------------


def test_estimate_is_ceil_chars_over_four() -> None:
    assert estimate_tokens(UserMessage(content="abcde")) == 2
    assert estimate_tokens(UserMessage(content=[ImageContent(data="x", mime_type="image/png")])) == 1200
    assistant = AssistantMessage(
        content=[TextContent(text="abcd"), ThinkingContent(thinking="efgh"), ToolCall(id="1", name="ls", arguments={})]
    )
    assert estimate_tokens(assistant) == 3  # 4 + 4 + len("ls") + len("{}") = 12 chars
    assert estimate_tokens(BashExecutionMessage(command="ls", output="ab", exclude_from_context=True)) == 0


def test_should_compact_uses_floored_reserve() -> None:
    s = CompactionSettings()
    assert s.effective_reserve() == 20000
    assert not should_compact(80000, 100000, s)
    assert should_compact(80001, 100000, s)
    assert not should_compact(10**9, 100000, CompactionSettings(enabled=False))
    assert should_compact(95001, 100000, CompactionSettings(reserve_tokens=5000, reserve_tokens_floor=0))
    assert not should_compact(95000, 100000, CompactionSettings(reserve_tokens=5000, reserve_tokens_floor=0))


# --- cut point ---------------------------------------------------------------------------------------


def test_large_trailing_tool_result_keeps_its_call_not_index_zero() -> None:
    entries: list[AgentMessage] = [user(100), say(100), call("a"), result("a", 5000)]
    cut = find_cut_point(entries, 1000)
    assert cut.first_kept_index == 2
    assert cut.error is None


def test_cut_trims_prefix_to_recent_budget() -> None:
    entries: list[AgentMessage] = [user(500), say(500), user(500), say(500), user(100), say(100)]
    cut = find_cut_point(entries, 200)
    assert (cut.first_kept_index, cut.is_split_turn) == (4, False)
    # Crossing the budget inside a turn cuts at the assistant message: a split turn.
    cut = find_cut_point(entries, 600)
    assert (cut.first_kept_index, cut.is_split_turn, cut.turn_start_index) == (3, True, 2)


def test_never_cuts_at_a_tool_result() -> None:
    entries: list[AgentMessage] = [user(100), call("a"), result("a", 300), call("b"), result("b", 300), say(10)]
    for keep in range(1, 1000, 37):
        cut = find_cut_point(entries, keep)
        if cut.first_kept_index < len(entries):
            assert not isinstance(entries[cut.first_kept_index], ToolResultMessage)


def test_out_of_order_result_stays_with_its_call_group() -> None:
    entries: list[AgentMessage] = [user(500), call("a"), user(300), result("a", 10), say(10)]
    # Crossing the budget at the interjecting user message would orphan the late result: the cut moves back.
    cut = find_cut_point(entries, 300)
    assert cut.first_kept_index == 1


def test_preserve_from_index_keeps_pending_user_message() -> None:
    entries: list[AgentMessage] = [user(500), say(500), user(500), say(10)]
    cut = find_cut_point(entries, 5, preserve_from_index=2)
    assert cut.first_kept_index == 2


def test_budget_too_small_for_any_group_keeps_nothing() -> None:
    entries: list[AgentMessage] = [user(10), say(10)]
    cut = find_cut_point(entries, 0)
    assert cut.first_kept_index == len(entries)
    assert cut.error == NO_FIT_ERROR
    only_results: list[AgentMessage] = [result("x"), result("y")]
    assert find_cut_point(only_results, 5).first_kept_index == 2


def test_split_turn_detected_with_turn_start() -> None:
    entries: list[AgentMessage] = [user(10), call("a"), result("a", 400), call("b"), result("b", 400), say(400)]
    cut = find_cut_point(entries, 400)
    assert cut.first_kept_index == 5
    assert cut.is_split_turn and cut.turn_start_index == 0
    assert cut.history_end == 0


def test_everything_fits_means_nothing_to_summarize() -> None:
    entries: list[AgentMessage] = [user(10), say(10), user(10)]
    cut = find_cut_point(entries, 10_000)
    assert cut.first_kept_index == 0


_groups = st.lists(
    st.one_of(
        st.integers(1, 300).map(lambda n: [user(n)]),
        st.integers(1, 300).map(lambda n: [say(n)]),
        st.tuples(st.integers(1, 50), st.integers(1, 600)).map(lambda t: ["call", t[1]]),
    ),
    min_size=1,
    max_size=20,
)


def _build(groups: list[list[object]]) -> list[AgentMessage]:
    out: list[AgentMessage] = []
    for i, g in enumerate(groups):
        if g[0] == "call":
            out.append(call(f"c{i}"))
            out.append(result(f"c{i}", int(g[1])))  # type: ignore[call-overload]
        else:
            out.append(g[0])  # type: ignore[arg-type]
    return out


@settings(max_examples=200, deadline=None)
@given(_groups, st.integers(0, 3000))
def test_cut_never_separates_call_from_result(groups: list[list[object]], keep: int) -> None:
    entries = _build(groups)
    cut = find_cut_point(entries, keep)
    kept = entries[cut.first_kept_index :]
    calls = {b.id for m in kept if isinstance(m, AssistantMessage) for b in m.content if isinstance(b, ToolCall)}
    assert all(m.tool_call_id in calls for m in kept if isinstance(m, ToolResultMessage))
    assert 0 <= cut.first_kept_index <= len(entries)
    if cut.is_split_turn:
        assert 0 <= cut.turn_start_index < cut.first_kept_index


# --- serialization, file ops, chunking, composition --------------------------------------------------


def test_serialization_format() -> None:
    messages: list[AgentMessage] = [
        UserMessage(content=[TextContent(text="look"), ImageContent(data="AAAA", mime_type="image/png")]),
        AssistantMessage(
            content=[
                ThinkingContent(thinking="secret reasoning"),
                TextContent(text="Reading."),
                ToolCall(id="1", name="read", arguments={"path": "src/a.py", "limit": 5}),
            ]
        ),
        ToolResultMessage(tool_call_id="1", tool_name="read", content=[TextContent(text="x" * 2500)]),
    ]
    text = serialize_for_summary(messages)
    assert "[User]: look\n[image data omitted from summary input]" in text
    assert "[Assistant]: Reading." in text
    assert '[Assistant tool calls]: read(path="src/a.py", limit=5)' in text
    assert "secret reasoning" not in text
    assert "[Tool result]: " + "x" * 2000 + "\n[... 500 more characters truncated]" in text


def test_tool_result_truncation_keeps_error_tail() -> None:
    body = "y" * 3000 + "\nValueError: bad thing happened"
    text = serialize_for_summary([ToolResultMessage(tool_call_id="1", content=[TextContent(text=body)], is_error=True)])
    assert text.startswith("[Tool error]: ")
    assert text.endswith("ValueError: bad thing happened")
    assert "more characters truncated]" in text


def test_file_ops_read_and_modified_carried_forward() -> None:
    messages: list[AgentMessage] = [
        call("1", "read", path="a.py"),
        call("2", "edit", path="b.py"),
        call("3", "read", path="b.py"),
        call("4", "write", file_path="c.py"),
    ]
    ops = extract_file_ops(messages, {"readFiles": ["old.py"], "modifiedFiles": ["older.py"]})
    assert ops.details() == {"readFiles": ["a.py", "old.py"], "modifiedFiles": ["b.py", "c.py", "older.py"]}


def test_chunking_respects_groups_and_limit() -> None:
    messages = _build([["call", 100], [user(100)], ["call", 100], [say(100)]])
    chunks = chunk_messages(messages, 300, estimate_tokens)
    assert sum(len(c) for c in chunks) == len(messages)
    for c in chunks:
        assert not isinstance(c[0], ToolResultMessage)
        assert sum(estimate_tokens(m) for m in c) <= 250 or len(c) <= 2


def test_adaptive_ratio_and_oversize() -> None:
    assert adaptive_chunk_ratio(1000, 10, 100_000) == 0.4
    assert 0.15 <= adaptive_chunk_ratio(200_000, 2, 100_000) < 0.4
    assert max_chunk_tokens(100_000, 0.4) == 40_000 - 4096
    assert is_oversized(50_000, 100_000) and not is_oversized(40_000, 100_000)
    assert oversized_note(user(1), 12_345) == "[Large user (~12K tokens) omitted from summary]"


def test_compose_summary_split_turn_and_file_tags() -> None:
    ops = FileOps(read={"a.py", "b.py"}, modified={"b.py"})
    text = compose_summary("## Goal\nX", "## Original Request\nY", ops)
    assert text.startswith("## Goal\nX\n\n---\n\n**Turn Context (split turn):**\n\n## Original Request\nY")
    assert text.endswith("<read-files>\na.py\n</read-files>\n\n<modified-files>\nb.py\n</modified-files>")
    long = compose_summary("z" * 20_000, None, FileOps())
    assert long.endswith("[Compaction summary truncated to fit budget]") and len(long) < 16_100
