"""The JSONL v3 reader: typed entries, the active branch, buildSessionContext, malformed lines."""

from __future__ import annotations

import json
import tracemalloc
from pathlib import Path
from typing import Any

import pytest

from openclaw_ctx._time import ms_from_iso
from openclaw_ctx.messages import (
    AssistantMessage,
    BranchSummaryMessage,
    CompactionSummaryMessage,
    CustomMessage,
    UserMessage,
    flatten_text,
)
from openclaw_ctx.transcripts import (
    CompactionEntry,
    CustomEntry,
    CustomMessageEntry,
    LabelEntry,
    MessageEntry,
    ModelChangeEntry,
    SessionInfoEntry,
    ThinkingLevelChangeEntry,
    TranscriptLineError,
    UnknownEntry,
    iter_entries,
    iter_lines,
    read_transcript,
)

HEADER = {"type": "session", "version": 3, "id": "sess-1", "timestamp": "2026-01-01T00:00:00.000Z", "cwd": "/w"}


def _ts(n: int) -> str:
    return f"2026-01-01T00:{n // 60:02d}:{n % 60:02d}.000Z"


def _msg(entry_id: str, parent: str | None, role: str, text: str, n: int) -> dict[str, Any]:
    if role == "assistant":
        message: dict[str, Any] = {"role": "assistant", "content": [{"type": "text", "text": text}]}
    else:
        message = {"role": "user", "content": text}
    return {"type": "message", "id": entry_id, "parentId": parent, "timestamp": _ts(n), "message": message}


def _write(path: Path, lines: list[Any]) -> Path:
    path.write_text("\n".join(x if isinstance(x, str) else json.dumps(x) for x in lines) + "\n", encoding="utf-8")
    return path


def _texts(messages: list[Any]) -> list[str]:
    return [flatten_text(m) for m in messages]


def test_reads_header_and_every_entry_type(tmp_path: Path) -> None:
    lines = [
        HEADER | {"parentSession": "/old/a.jsonl"},
        {"type": "session_info", "id": "s1", "parentId": None, "timestamp": _ts(1), "name": "demo"},
        {"type": "model_change", "id": "m1", "parentId": "s1", "timestamp": _ts(2), "provider": "p", "modelId": "x"},
        {"type": "thinking_level_change", "id": "t1", "parentId": "m1", "timestamp": _ts(3), "thinkingLevel": "high"},
        _msg("u1", "t1", "user", "hello", 4),
        {"type": "label", "id": "l1", "parentId": "u1", "timestamp": _ts(5), "targetId": "u1", "label": "start"},
        {"type": "custom", "id": "c1", "parentId": "l1", "timestamp": _ts(6), "customType": "ext", "data": {"k": 1}},
        {"type": "future_thing", "id": "f1", "parentId": "c1", "timestamp": _ts(7), "payload": [1, 2]},
    ]
    t = read_transcript(_write(tmp_path / "a.jsonl", lines))
    assert t.errors == []
    assert t.header is not None and t.header.id == "sess-1" and t.header.parent_session == "/old/a.jsonl"
    kinds = [type(e) for e in t.entries]
    assert kinds == [
        SessionInfoEntry,
        ModelChangeEntry,
        ThinkingLevelChangeEntry,
        MessageEntry,
        LabelEntry,
        CustomEntry,
        UnknownEntry,
    ]
    unknown = t.entries[-1]
    assert unknown.type == "future_thing" and unknown.to_json() == lines[-1]
    assert [e.to_json() for e in t.entries] == lines[1:]
    context = t.session_context()
    assert context.thinking_level == "high" and context.model == {"provider": "p", "modelId": "x"}
    assert _texts(context.messages) == ["hello"]


def test_active_branch_is_leaf_to_root_and_skips_abandoned(tmp_path: Path) -> None:
    lines = [
        HEADER,
        _msg("a", None, "user", "q1", 1),
        _msg("b", "a", "assistant", "r1", 2),
        _msg("c", "b", "user", "abandoned question", 3),
        _msg("d", "c", "assistant", "abandoned answer", 4),
        _msg("e", "b", "user", "q2", 5),
        _msg("f", "e", "assistant", "r2", 6),
    ]
    t = read_transcript(_write(tmp_path / "b.jsonl", lines))
    assert [e.id for e in t.active_branch()] == ["a", "b", "e", "f"]
    assert [e.id for e in t.active_branch("d")] == ["a", "b", "c", "d"]
    assert _texts(t.context_messages()) == ["q1", "r1", "q2", "r2"]


def test_context_after_compaction_matches_build_session_context(tmp_path: Path) -> None:
    lines = [
        HEADER,
        _msg("a", None, "user", "old question", 1),
        _msg("b", "a", "assistant", "old answer", 2),
        _msg("c", "b", "user", "kept question", 3),
        _msg("d", "c", "assistant", "kept answer", 4),
        {
            "type": "compaction",
            "id": "k",
            "parentId": "d",
            "timestamp": _ts(5),
            "summary": "SUMMARY",
            "firstKeptEntryId": "c",
            "tokensBefore": 1234,
            "details": {"readFiles": ["x.py"], "modifiedFiles": []},
        },
        {"type": "custom", "id": "x", "parentId": "k", "timestamp": _ts(6), "customType": "state"},
        {
            "type": "custom_message",
            "id": "y",
            "parentId": "x",
            "timestamp": _ts(7),
            "customType": "note",
            "content": "injected",
            "display": False,
        },
        {"type": "branch_summary", "id": "z", "parentId": "y", "timestamp": _ts(8), "fromId": "q", "summary": "BS"},
        _msg("e", "z", "user", "new question", 9),
    ]
    t = read_transcript(_write(tmp_path / "c.jsonl", lines))
    compaction = t.by_id["k"]
    assert isinstance(compaction, CompactionEntry)
    assert compaction.first_kept_entry_id == "c" and compaction.tokens_before == 1234
    assert isinstance(t.by_id["y"], CustomMessageEntry)
    messages = t.context_messages()
    assert isinstance(messages[0], CompactionSummaryMessage)
    assert messages[0].summary == "SUMMARY" and messages[0].tokens_before == 1234
    assert messages[0].timestamp == ms_from_iso(_ts(5))
    assert isinstance(messages[3], CustomMessage) and messages[3].display is False
    assert isinstance(messages[4], BranchSummaryMessage) and messages[4].from_id == "q"
    assert _texts(messages) == ["SUMMARY", "kept question", "kept answer", "injected", "BS", "new question"]


def test_latest_compaction_wins_and_missing_first_kept_keeps_nothing_before(tmp_path: Path) -> None:
    lines = [
        HEADER,
        _msg("a", None, "user", "one", 1),
        {"type": "compaction", "id": "k1", "parentId": "a", "timestamp": _ts(2), "summary": "S1",
         "firstKeptEntryId": "a", "tokensBefore": 5},
        _msg("b", "k1", "user", "two", 3),
        {"type": "compaction", "id": "k2", "parentId": "b", "timestamp": _ts(4), "summary": "S2",
         "firstKeptEntryId": "gone", "tokensBefore": 9},
        _msg("c", "k2", "user", "three", 5),
    ]  # fmt: skip
    t = read_transcript(_write(tmp_path / "d.jsonl", lines))
    assert _texts(t.context_messages()) == ["S2", "three"]


def test_malformed_lines_are_collected_and_the_rest_reads(tmp_path: Path) -> None:
    path = tmp_path / "bad.jsonl"
    good = [HEADER, _msg("a", None, "user", "first", 1)]
    body = "\n".join(json.dumps(x) for x in good) + "\n"
    body += '{"type":"message","id":"b",\n'  # truncated JSON
    body += "[1, 2]\n"  # not an object
    body += json.dumps({"type": "message", "id": "c", "parentId": "a", "message": {"role": "user"}}) + "\n"
    body += json.dumps({"type": "label", "parentId": "a"}) + "\n"  # no id
    body += json.dumps(_msg("a", None, "user", "dup", 2)) + "\n"
    body += "\n   \n"  # blank lines are not errors
    body += json.dumps(_msg("d", "c", "assistant", "after the broken one", 3)) + "\n"
    path.write_bytes(body.encode() + b'{"type":"custom","id":"e","customType":"\xff"}\n')
    t = read_transcript(path)
    reasons = {e.line_no: e.reason for e in t.errors}
    assert sorted(reasons) == [3, 4, 5, 6, 7, 11]
    assert reasons[3].startswith("not valid JSON")
    assert reasons[4] == "expected a JSON object, got list"
    assert "message.content: Field required" in reasons[5]
    assert reasons[6] == "label.id: required"
    assert reasons[7] == "duplicate entry id 'a' (first at line 2)"
    assert reasons[11].startswith("not valid UTF-8")
    assert str(t.errors[0]) == f"{path}:3: {reasons[3]}"
    assert all(isinstance(e, TranscriptLineError) and e.raw for e in t.errors)
    assert [e.id for e in t.entries] == ["a", "d"]
    # The broken entry "c" still links "d" back to "a".
    assert [e.id for e in t.active_branch()] == ["a", "d"]


def test_missing_header_is_an_error_but_entries_still_read(tmp_path: Path) -> None:
    t = read_transcript(_write(tmp_path / "nohdr.jsonl", [_msg("a", None, "user", "hi", 1)]))
    assert t.header is None
    assert len(t.errors) == 1 and "missing session header" in t.errors[0].reason
    assert [e.id for e in t.entries] == ["a"]


def test_newer_version_header_is_rejected(tmp_path: Path) -> None:
    t = read_transcript(_write(tmp_path / "v9.jsonl", [HEADER | {"version": 9}]))
    assert t.header is None and "newer than this reader" in t.errors[0].reason


def test_version_1_files_get_linear_ids(tmp_path: Path) -> None:
    lines = [
        {"type": "session", "version": 1, "id": "old", "timestamp": _ts(0), "cwd": "/"},
        {"type": "message", "timestamp": _ts(1), "message": {"role": "user", "content": "a"}},
        {"type": "message", "timestamp": _ts(2), "message": {"role": "hookMessage", "customType": "h", "content": "b"}},
        {"type": "compaction", "timestamp": _ts(3), "summary": "S", "firstKeptEntryIndex": 1, "tokensBefore": 3},
    ]
    t = read_transcript(_write(tmp_path / "v1.jsonl", lines))
    assert t.errors == []
    ids = [e.id for e in t.entries]
    assert [e.parent_id for e in t.entries] == [None, ids[0], ids[1]]
    assert isinstance(t.entries[1], MessageEntry) and isinstance(t.entries[1].message, CustomMessage)
    # firstKeptEntryIndex counts the header as record 0 (pi's migration): 1 is the first message.
    assert _texts(t.context_messages()) == ["S", "a", "b"]


def test_iter_lines_and_entries_stream(tmp_path: Path) -> None:
    path = tmp_path / "big.jsonl"
    filler = "x" * 2000
    with path.open("w", encoding="utf-8") as out:
        out.write(json.dumps(HEADER) + "\n")
        parent = None
        for n in range(12_000):  # ~25 MB
            out.write(json.dumps(_msg(f"{n:08x}", parent, "user", filler, n)) + "\n")
            parent = f"{n:08x}"
    first = next(iter_lines(path))
    assert first[0] == 1 and json.loads(first[1]) == HEADER and first[2] == HEADER
    tracemalloc.start()
    try:
        count = 0
        for item in iter_entries(path):
            count += 1
            assert not isinstance(item, TranscriptLineError)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert count == 12_001
    assert peak < 8_000_000, f"streaming used {peak:,} bytes"


@pytest.mark.parametrize(
    ("role", "cls"),
    [("user", UserMessage), ("assistant", AssistantMessage)],
)
def test_message_entries_round_trip_to_json(tmp_path: Path, role: str, cls: type) -> None:
    line = _msg("a", None, role, "text ✓ 漢字", 1) | {"extraKey": {"kept": True}}
    t = read_transcript(_write(tmp_path / "r.jsonl", [HEADER, line]))
    entry = t.entries[0]
    assert isinstance(entry, MessageEntry) and isinstance(entry.message, cls)
    assert entry.to_json() == line


def test_crlf_line_endings_and_a_final_line_without_newline(tmp_path: Path) -> None:
    path = tmp_path / "crlf.jsonl"
    lines = [
        json.dumps(HEADER),
        json.dumps(_msg("a", None, "user", "one", 1)),
        json.dumps(_msg("b", "a", "user", "two", 2)),
    ]
    path.write_bytes("\r\n".join(lines).encode())
    t = read_transcript(path)
    assert t.errors == [] and [e.id for e in t.entries] == ["a", "b"]
    assert [line_no for line_no, _, _ in iter_lines(path)] == [1, 2, 3]
