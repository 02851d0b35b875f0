"""AgentMessage: exact JSON round-trips, bad input named by field, and Unicode through the real store."""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from openclaw_ctx.errors import InvalidMessageError
from openclaw_ctx.messages import (
    MAX_SAFE_INTEGER,
    AssistantMessage,
    ToolResultMessage,
    UserMessage,
    message_from_json,
    message_to_json,
    parse_message,
    provider_event_key,
    to_wire,
)
from openclaw_ctx.store import repo
from openclaw_ctx.store.store import Store

# Messages as OpenClaw writes them, with private metadata, provider extras and explicit nulls.
SAMPLES: list[dict[str, Any]] = [
    {"role": "user", "content": "hello", "timestamp": 1733000000000},
    {
        "role": "user",
        "content": [
            {"type": "text", "text": "look at this", "textSignature": None},
            {"type": "image", "data": "aGVsbG8=", "mimeType": "image/png", "detail": "high"},
        ],
        "timestamp": 1733000000001,
        "__openclaw": {"senderId": "u1", "senderName": "Ada", "senderUsername": None},
    },
    {
        "role": "assistant",
        "content": [
            {"type": "thinking", "thinking": "plan", "thinkingSignature": "sig=="},
            {"type": "text", "text": "Running it."},
            {"type": "toolCall", "id": "call_1", "name": "bash", "arguments": {"cmd": "ls", "n": [1, 2.5, None]}},
        ],
        "api": "openai-responses",
        "provider": "openai",
        "model": "gpt-5",
        "usage": {
            "input": 120,
            "output": 30,
            "cacheRead": 0,
            "cacheWrite": 0,
            "totalTokens": 150,
            "cost": {"input": 0.0012, "output": 0.003, "cacheRead": 0, "cacheWrite": 0, "total": 0.0042},
            "contextUsage": {"state": "available", "promptTokens": 120, "totalTokens": 150},
        },
        "stopReason": "toolUse",
        "errorMessage": None,
        "timestamp": 1733000000002,
        "responseId": "resp_abc",
        "routing": {"lane": "main"},
    },
    {
        "role": "toolResult",
        "toolCallId": "call_1",
        "toolName": "bash",
        "content": [{"type": "text", "text": "a.txt\nb.txt"}],
        "details": {"exitCode": 0, "durationMs": 12},
        "isError": False,
        "timestamp": 1733000000003,
    },
    {
        "role": "bashExecution",
        "command": "git status",
        "output": "clean",
        "exitCode": 0,
        "cancelled": False,
        "truncated": False,
        "excludeFromContext": True,
    },
    {"role": "custom", "customType": "reminder", "content": "stand up", "display": False, "details": None},
    {"role": "branchSummary", "summary": "tried X", "fromId": "ab12cd34"},
    {"role": "compactionSummary", "summary": "## Goal\nship", "tokensBefore": 50000, "timestamp": 5},
]


@pytest.mark.parametrize("wire", SAMPLES, ids=[f"{s['role']}-{i}" for i, s in enumerate(SAMPLES)])
def test_openclaw_json_round_trips_exactly(wire: dict[str, Any]) -> None:
    original = copy.deepcopy(wire)
    message = parse_message(wire)
    assert to_wire(message) == original
    assert json.loads(message_to_json(message)) == original
    assert message_from_json(message_to_json(message)) == message
    assert wire == original, "parsing never mutates the caller's dict"


def test_absent_keys_stay_absent_and_explicit_nulls_stay_null() -> None:
    bare = to_wire(parse_message({"role": "assistant", "content": []}))
    assert bare == {"role": "assistant", "content": []}
    nulls = to_wire(parse_message({"role": "assistant", "content": [], "usage": None, "model": None}))
    assert nulls == {"role": "assistant", "content": [], "usage": None, "model": None}


def test_wire_keys_are_camel_case_and_python_names_are_snake_case() -> None:
    message = parse_message(SAMPLES[3])
    assert isinstance(message, ToolResultMessage) and message.tool_call_id == "call_1" and message.is_error is False
    built = ToolResultMessage(tool_call_id="c", tool_name="t", content=[], is_error=True)
    assert to_wire(built) == {"role": "toolResult", "toolCallId": "c", "toolName": "t", "content": [], "isError": True}


def test_unknown_fields_are_kept_at_every_level() -> None:
    message = parse_message(SAMPLES[2])
    assert isinstance(message, AssistantMessage)
    assert message.model_extra == {"routing": {"lane": "main"}}
    assert message.response_id == "resp_abc" and (provider_event_key(message) or "").startswith(
        "response:openai:resp_abc:"
    )
    wire = to_wire(message)
    assert wire["usage"]["contextUsage"]["promptTokens"] == 120
    assert wire["content"][2]["arguments"]["n"] == [1, 2.5, None]


# --- a property: any well-formed message round-trips ----------------------------------------------

_json_leaf = st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False) | st.text()
_json = st.recursive(
    _json_leaf,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3),
    max_leaves=8,
)
# Extra keys must not collide with a known field's name or alias.
_extra_keys = st.dictionaries(st.from_regex(r"\Aext[A-Z][a-z0-9]{0,5}\Z"), _json, max_size=2)
_text_block = st.builds(lambda text, extra: {"type": "text", "text": text, **extra}, st.text(), _extra_keys)
_tool_call = st.builds(
    lambda i, name, args: {"type": "toolCall", "id": i, "name": name, "arguments": args},
    st.text(min_size=1, max_size=10),
    st.text(min_size=1, max_size=10),
    st.dictionaries(st.text(max_size=8), _json, max_size=3),
)
_thinking = st.builds(lambda t: {"type": "thinking", "thinking": t}, st.text())
_user = st.builds(
    lambda content, ts, extra: {
        "role": "user",
        "content": content,
        **({"timestamp": ts} if ts is not None else {}),
        **extra,
    },
    st.text() | st.lists(_text_block, max_size=3),
    st.none() | st.integers(min_value=0, max_value=MAX_SAFE_INTEGER),
    _extra_keys,
)
_assistant = st.builds(
    lambda content, stop, extra: {"role": "assistant", "content": content, "stopReason": stop, **extra},
    st.lists(_text_block | _thinking | _tool_call, max_size=4),
    st.sampled_from(["stop", "length", "toolUse", "error", "aborted"]) | st.none(),
    _extra_keys,
)
_tool_result = st.builds(
    lambda cid, content, err, details: {
        "role": "toolResult",
        "toolCallId": cid,
        "toolName": "t",
        "content": content,
        "isError": err,
        "details": details,
    },
    st.text(min_size=1, max_size=10),
    st.lists(_text_block, max_size=2),
    st.booleans(),
    _json,
)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_user | _assistant | _tool_result)
def test_property_every_wellformed_message_round_trips_through_json(wire: dict[str, Any]) -> None:
    message = parse_message(wire)
    assert to_wire(message) == wire
    text = message_to_json(message)
    assert json.loads(text) == wire
    assert to_wire(message_from_json(text)) == wire


# --- bad input -------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("data", "field"),
    [
        ({"role": "system", "content": "x"}, "message.role"),
        ({"content": "x"}, "message.role"),
        ({"role": "user"}, "message.content"),
        ({"role": "toolResult", "content": []}, "message.toolCallId"),
        ({"role": "user", "content": 5}, "message.content"),
        ({"role": "user", "content": "x", "timestamp": "yesterday"}, "message.timestamp"),
        ({"role": "assistant", "content": [{"type": "text"}]}, "message.content.0.text"),
        ({"role": "assistant", "content": [{"type": "toolCall", "id": "", "name": "x"}]}, "message.content.0.id"),
        ({"role": "assistant", "content": [{"type": "bogus"}]}, "message.content.0"),
        ({"role": "assistant", "content": [], "stopReason": "finished"}, "message.stopReason"),
        ({"role": "toolResult", "toolCallId": "c", "content": [], "isError": "nope"}, "message.isError"),
    ],
)
def test_invalid_message_error_names_the_field(data: Any, field: str) -> None:
    with pytest.raises(InvalidMessageError) as caught:
        parse_message(data)
    assert caught.value.detail.startswith(field), caught.value.detail
    assert isinstance(caught.value, ValueError)


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ('{"role": "user", "content": ', "not valid JSON"),
        ("not json at all", "not valid JSON"),
        ("[1, 2]", "expected a JSON object, got list"),
        ("42", "expected a JSON object, got int"),
    ],
)
def test_non_json_or_non_object_input_is_rejected_clearly(raw: str, expected: str) -> None:
    with pytest.raises(InvalidMessageError, match=expected):
        parse_message(raw)
    with pytest.raises(InvalidMessageError, match=f"stored message: {expected}"):
        message_from_json(raw)


def test_where_prefix_names_the_position_in_a_batch() -> None:
    with pytest.raises(InvalidMessageError, match=r"^messages\[3\]\.content: Field required"):
        parse_message({"role": "user"}, where="messages[3]")


# --- Unicode -----------------------------------------------------------------------------------

UNICODE_TEXTS = {
    "emoji": "ship it 🚀👩🏽‍💻 🇯🇵",
    "cjk": "上下文引擎 コンテキスト 컨텍스트",
    "combining-rtl": "e\u0301 \u05e9\u05dc\u05d5\u05dd \u202e reversed",
    "nul": "before\x00after",
    "lone-high-surrogate": json.loads('"broken \\ud83d pair"'),
    "lone-low-surrogate": json.loads('"\\udc00 alone"'),
    "astral-and-bmp-edges": "\U0010fffd \ufffe \uffff \U0001f600",
}


@pytest.mark.parametrize("text", UNICODE_TEXTS.values(), ids=UNICODE_TEXTS.keys())
def test_unicode_round_trips_through_json(text: str) -> None:
    message = parse_message({"role": "user", "content": [{"type": "text", "text": text}], "timestamp": 1})
    stored = message_to_json(message)
    back = message_from_json(stored)
    assert isinstance(back, UserMessage) and not isinstance(back.content, str)
    assert back.content[0].text == text
    assert to_wire(back) == to_wire(message)


async def test_unicode_round_trips_through_the_real_store(store: Store) -> None:
    messages = [
        parse_message({"role": "user", "content": text, "timestamp": i, "extNote": text})
        for i, text in enumerate(UNICODE_TEXTS.values())
    ]
    messages.append(
        parse_message(
            {
                "role": "assistant",
                "content": [
                    {"type": "toolCall", "id": "c1", "name": "write", "arguments": {"body": UNICODE_TEXTS["nul"]}}
                ],
                "stopReason": "toolUse",
            }
        )
    )
    async with store.transaction() as conn:
        session = await repo.ensure_session(conn, "agent:main:unicode")
        results = await repo.append_messages(
            conn, session, [repo.NewMessage(m, entry_id=f"e{i}") for i, m in enumerate(messages)], store.counter
        )
    assert all(r.inserted for r in results)
    async with store.read() as conn:
        entries = await repo.load_context(conn, session.session_id)
    assert [e.entry_id for e in entries] == [f"e{i}" for i in range(len(messages))]
    assert [to_wire(e.message) for e in entries if e.message is not None] == [to_wire(m) for m in messages]
    assert [e.message.content for e in entries[: len(UNICODE_TEXTS)] if e.message is not None] == list(
        UNICODE_TEXTS.values()
    )
