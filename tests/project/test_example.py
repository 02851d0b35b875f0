"""The shipped example transcript: reproducible, well-formed, realistic, with its planted facts early."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

from examples.make_example import OUTPUT, PLANTED_FACTS, main
from openclaw_ctx.messages import AssistantMessage, ImageContent, ThinkingContent, ToolCall, ToolResultMessage, to_wire
from openclaw_ctx.transcripts import MessageEntry, Transcript, read_transcript

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def example() -> Transcript:
    return read_transcript(OUTPUT)


def test_generator_rewrites_the_committed_file_byte_identically(tmp_path: Path) -> None:
    target = tmp_path / "again.jsonl"
    assert main([str(target)]) == 0
    assert target.read_bytes() == OUTPUT.read_bytes()


def test_script_runs_from_a_fresh_checkout_layout(tmp_path: Path) -> None:
    target = tmp_path / "cli.jsonl"
    done = subprocess.run(
        [sys.executable, str(ROOT / "examples" / "make_example.py"), str(target)],
        capture_output=True,
        text=True,
        check=True,
    )
    assert "wrote" in done.stdout
    assert target.read_bytes() == OUTPUT.read_bytes()


def test_size_and_shape(example: Transcript) -> None:
    assert example.errors == []
    assert example.header is not None and example.header.version == 3
    assert 600 <= len(example.entries) <= 1000
    assert 1_000_000 <= OUTPUT.stat().st_size <= 2_000_000
    ids = [e.id for e in example.entries]
    assert all(re.fullmatch(r"[0-9a-f]{8}", i) for i in ids) and len(set(ids)) == len(ids)
    assert [e.parent_id for e in example.entries] == [None, *ids[:-1]]
    stamps = [e.timestamp or "" for e in example.entries]
    assert stamps == sorted(stamps) and len(set(stamps)) == len(stamps)
    kinds = Counter(e.type for e in example.entries)
    assert {"model_change", "thinking_level_change", "label", "session_info"} <= set(kinds)
    assert len(example.active_branch()) == len(example.entries)


def test_every_line_round_trips_through_the_models(example: Transcript) -> None:
    lines = OUTPUT.read_text(encoding="utf-8").splitlines()
    assert len(lines) == len(example.entries) + 1
    for line, entry in zip(lines[1:], example.entries, strict=True):
        rebuilt = json.dumps(entry.to_json(), ensure_ascii=False, separators=(",", ":"))
        assert rebuilt == line
        if isinstance(entry, MessageEntry):
            assert to_wire(entry.message) == json.loads(line)["message"]


def test_realistic_content(example: Transcript) -> None:
    messages = [e.message for e in example.entries if isinstance(e, MessageEntry)]
    assistants = [m for m in messages if isinstance(m, AssistantMessage)]
    results = [m for m in messages if isinstance(m, ToolResultMessage)]
    assert all(m.usage is not None and m.usage.total() > 0 and m.stop_reason for m in assistants)
    calls = [b for m in assistants for b in m.content if isinstance(b, ToolCall)]
    assert {c.name for c in calls} == {"read", "write", "edit", "bash", "grep"}
    assert sorted(c.id for c in calls) == sorted(r.tool_call_id for r in results)
    assert any(isinstance(b, ThinkingContent) for m in assistants for b in m.content)
    assert any(r.is_error and "Traceback" in r.content[0].text for r in results if hasattr(r.content[0], "text"))
    sizes = [len(json.dumps(to_wire(r))) for r in results]
    assert sum(1 for s in sizes if s >= 20_000) >= 3
    images = [b for m in messages for b in getattr(m, "content", []) if isinstance(b, ImageContent)]
    assert len(images) >= 2 and all(b.mime_type == "image/png" for b in images)
    raw = OUTPUT.read_text(encoding="utf-8")
    for sample in ("汇率", "🙏", "Müller", "テスト", "Спасибо"):
        assert sample in raw


def test_planted_facts_appear_only_in_the_opening(example: Transcript) -> None:
    lines = OUTPUT.read_text(encoding="utf-8").splitlines()
    assert len(PLANTED_FACTS) >= 8
    for name, value in PLANTED_FACTS.items():
        where = [n for n, line in enumerate(lines) if value in line]
        assert where, name
        assert max(where) < 20, f"{name} appears late, at line {max(where)}"
    readme = (ROOT / "examples" / "README.md").read_text(encoding="utf-8")
    for value in PLANTED_FACTS.values():
        assert value in readme
