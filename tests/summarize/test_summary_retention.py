"""Facts said once, long ago, survive compaction by the built-in summarizer in both engines.

A coding session with small talk, pasted logs, code blocks and `cat -n` tool output around eight
planted facts is recorded through the real runtime on a real store at a small window, so both
engines compact it several times; the facts must still be in what the model is sent, and the
summaries' identifiers must be identifiers (no line numbers from tool output, no years).
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from openclaw_ctx.config import OpenClawConfig
from openclaw_ctx.host.runtime import Runtime
from openclaw_ctx.messages import AgentMessage, flatten_text
from openclaw_ctx.store.store import Store
from openclaw_ctx.summarize import ExtractiveSummarizer, SummaryRequest
from openclaw_ctx.testing import assistant, tool_call, tool_result, tool_use, user

KEY = "agent:main:retention:1"
FACTS = {
    "Celine is our release manager for the spring train.": "Celine",
    "The staging database lives on db-stg-04 behind the bastion.": "db-stg-04",
    "Hallberg Partners's office phone is +49 30 5550 7719.": "+49 30 5550 7719",
    "Hana's kid can't have peanuts, so no satay at the team lunch.": "peanuts",
    "Our AWS account for the billing service is 4481-2290-7713.": "4481-2290-7713",
    "Rent for the Lisbon flat went up to €1,720 a month.": "€1,720",
    "The demo for stakeholders is on Wednesday at 4pm in room Orion.": "Wednesday at 4pm",
    "Aiko maintains the py-telemetry library now.": "py-telemetry",
}
FILLER_CODE = "```python\ndef load(path):\n    with open(path) as f:\n        return json.load(f)\n```"


def cat_n(lines: int) -> str:
    return "\n".join(f"{n:6d}\tvalue_{n} = compute({n})" for n in range(1001, 1001 + lines))


def history() -> list[list[AgentMessage]]:
    """Turns: a goal, then facts between tool-heavy work; one fact every fifth turn."""
    turns: list[list[AgentMessage]] = [
        [user("Please refactor the loader in src/loader.py so it streams."), assistant("Sure, starting now.")]
    ]
    facts = list(FACTS)
    for i in range(40):
        call = f"call-{i}"
        said = facts[i // 5] if i % 5 == 0 and i // 5 < len(facts) else "Thanks, carry on."
        turns.append(
            [
                user(f"{said} Also, what does line {1000 + i} of src/loader.py do?"),
                tool_use(tool_call(call, "read", {"path": "src/loader.py"})),
                tool_result(call, cat_n(60), name="read"),
                assistant(f"Noted. That line computes a value; here is the shape:\n{FILLER_CODE}"),
            ]
        )
    turns.append([user("Now run the tests and tell me what fails."), assistant("Running them.")])
    return turns


def visible_text(messages: list[AgentMessage]) -> str:
    return "\n".join(flatten_text(m) for m in messages)


@pytest.mark.parametrize("engine", ["legacy", "lossless-claw"])
async def test_planted_facts_survive_compaction(tmp_path: Path, engine: str) -> None:
    store = await Store.open(tmp_path / "ctx.db")
    runtime = await Runtime.create(store, config=OpenClawConfig().with_engine(engine), context_window=4096)
    try:
        for turn in history():
            await runtime.record_turn(KEY, turn)
        await runtime.settle()
        result, _ = await runtime.assemble(KEY)
    finally:
        await runtime.dispose()
        await store.close()
    seen = visible_text(result.messages)
    assert "Sure, starting now." not in seen and "line 1000 of" not in seen  # the early turns are compacted
    kept = [answer for answer in FACTS.values() if answer in seen]
    assert len(kept) >= 6, f"{engine} kept {kept}"


def test_identifiers_skip_line_numbers_and_years() -> None:
    source = "\n\n".join(
        [
            "[User]: In 2026 we moved the parser to src/parse/core.py; see PR #482.",
            '[Assistant tool calls]: read(path="src/parse/core.py")',
            f"[Tool result]: {cat_n(40)}",
            "[Assistant]: Line 1012 calls `parse_block`; nothing else changed.",
        ]
    )
    text = ExtractiveSummarizer().summarize_text(SummaryRequest(kind="history", source_text=source, target_tokens=600))
    ids = text.split("## Exact identifiers")[1]
    assert "parse_block" in ids and "src/parse/core.py" in text and "#482" in text
    assert not re.search(r"^- \d+$", ids, re.MULTILINE), ids


def test_lossless_sources_are_read_by_role_and_labels_never_nest() -> None:
    leaf = "\n\n".join(
        [
            "[2026-03-11 09:30 UTC | user]\nMei set up the reindex cron on host idx-07. Please check it runs.",
            '[2026-03-11 09:31 UTC | assistant]\nChecking the crontab.\nbash({"command": "crontab -l"})',
            "[2026-03-11 09:31 UTC | toolResult | tool=bash]\n*/5 * * * * /opt/idx/reindex.sh",
            "[2026-03-11 09:32 UTC | assistant]\nIt runs every five minutes via /opt/idx/reindex.sh.",
        ]
    )
    summarizer = ExtractiveSummarizer()
    first = summarizer.summarize_text(SummaryRequest(kind="leaf", source_text=leaf, target_tokens=400))
    assert "idx-07" in first and "/opt/idx/reindex.sh" in first
    assert first.splitlines()[-1].startswith("Expand for details about: bash"), first
    condensed_source = "\n\n".join(f"[2026-03-1{d} 09:30 - 2026-03-1{d} 10:00]\n{first}" for d in range(1, 4))
    once = summarizer.summarize_text(SummaryRequest(kind="condensed", source_text=condensed_source, target_tokens=400))
    twice = summarizer.summarize_text(
        SummaryRequest(
            kind="condensed", source_text=f"[2026-03-11 09:30 - 2026-03-13 10:00]\n{once}", target_tokens=400
        )
    )
    for text in (once, twice):
        assert "idx-07" in text
        assert not re.search(r"(\w+): (?:- )?\1:", text), text
        assert not re.search(
            r"^(?:Request|Context|Done|Identifiers): (?:Request|Context|Done|Identifiers):", text, re.M
        )
