"""The context we rebuild from a transcript equals the one OpenClaw 2026.9's own code rebuilds (#15).

`openclaw_context.mjs` runs the installed host's navigation and buildSessionContext on each file; the
Python side reads the same file with :func:`read_transcript`. Compared message for message, with
the thinking level and model. Where the two differ on purpose, the test says so and checks the
difference: OpenClaw keeps a ``system`` message (convertToLlm drops it before any model sees it) and
passes ``content: null`` through, which we read as no blocks, as pi does.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest
from openclaw_host.gateway import HostInstall
from openclaw_host.transcript_cases import named_cases, random_case, v1_case

from openclaw_ctx.inspect.dag import deep_check
from openclaw_ctx.messages import flatten_text, parse_message, to_wire
from openclaw_ctx.store import repo
from openclaw_ctx.store.store import Store
from openclaw_ctx.transcripts import import_paths, read_transcript

pytestmark = [pytest.mark.openclaw_host, pytest.mark.slow]
STRESS_SEEDS = range(300)
REAL_SESSION = Path(__file__).parents[1] / "fixtures" / "openclaw-2026.9.6-session.jsonl"
_NOT_FOR_MODELS = ("system",)


def _oracle(host: HostInstall, files: list[Path]) -> dict[str, dict[str, Any]]:
    script = Path(__file__).with_name("openclaw_context.mjs")
    dist = host.openclaw.parent.parent / "openclaw" / "dist"
    out = subprocess.run(
        [str(host.node), str(script), str(dist), *map(str, files)],
        capture_output=True,
        text=True,
        timeout=600,
        check=True,
    )
    results = [json.loads(line) for line in out.stdout.splitlines() if line.startswith("{")]
    return {r["file"]: r for r in results}


def _normalized(message: dict[str, Any]) -> dict[str, Any]:
    """A message as JSON would carry it: no undefined/None-valued keys, null content as no blocks."""
    out = {k: v for k, v in message.items() if v is not None}
    if "content" in message and message["content"] is None:
        out["content"] = []
    return out


def _ours(path: Path) -> dict[str, Any]:
    context = read_transcript(path).session_context()
    return {
        "messages": [_normalized(to_wire(m)) for m in context.messages],
        "thinkingLevel": context.thinking_level,
        "model": _normalized(context.model) if context.model is not None else None,
    }


def _theirs(result: dict[str, Any]) -> dict[str, Any]:
    assert "error" not in result, result.get("error")
    messages = [m for m in result["messages"] if m.get("role") not in _NOT_FOR_MODELS]
    return {
        "messages": [_normalized(m) for m in messages],
        "thinkingLevel": result.get("thinkingLevel"),
        "model": _normalized(result["model"]) if result.get("model") is not None else None,
    }


@pytest.fixture(scope="module")
def corpus(
    tmp_path_factory: pytest.TempPathFactory, host_install: HostInstall
) -> dict[str, tuple[Path, dict[str, Any]]]:
    root = tmp_path_factory.mktemp("oracle")
    files = {name: w.write(root / f"{name}.jsonl") for name, w in named_cases().items()}
    files["v1-first-kept-index"] = v1_case(root / "v1.jsonl")
    files["real-openclaw-2026.9.6"] = REAL_SESSION
    files |= {f"stress-{seed}": random_case(seed).write(root / f"stress-{seed}.jsonl") for seed in STRESS_SEEDS}
    results = _oracle(host_install, list(files.values()))
    return {name: (path, results[str(path)]) for name, path in files.items()}


@pytest.mark.parametrize("name", [*named_cases(), "v1-first-kept-index", "real-openclaw-2026.9.6"])
def test_named_case_matches_openclaw(corpus: dict[str, tuple[Path, dict[str, Any]]], name: str) -> None:
    path, result = corpus[name]
    assert _ours(path) == _theirs(result)


def test_stress_trees_match_openclaw(corpus: dict[str, tuple[Path, dict[str, Any]]]) -> None:
    differ = [
        name for name, (path, result) in corpus.items() if name.startswith("stress-") and _ours(path) != _theirs(result)
    ]
    assert differ == [], f"{len(differ)} of {len(STRESS_SEEDS)} stress trees differ from OpenClaw, e.g. {differ[:5]}"


def test_the_cases_exercise_what_they_are_named_for(corpus: dict[str, tuple[Path, dict[str, Any]]]) -> None:
    """Guards against a fixture that silently stops testing anything: each rule changes the outcome."""
    roles = {name: [m["role"] for m in result["messages"]] for name, (_, result) in corpus.items()}
    assert roles["successive-compactions"].count("compactionSummary") == 1
    assert roles["stale-parent"][:2] == ["user", "assistant"] and len(roles["stale-parent"]) == 8
    assert "system" in roles["excluded-and-system"]  # kept by OpenClaw, left out by us (never sent to a model)
    assert roles["reset-plain"] == ["user", "assistant"]
    assert roles["v1-first-kept-index"] == ["compactionSummary", "user", "assistant", "user", "assistant", "user"]
    texts = [m.get("content") for m in corpus["reset-kept"][1]["messages"]]
    assert "kept? no" not in json.dumps(texts)
    checkpoint = corpus["replay-checkpoint"][1]["messages"]
    assert [("providerReplay" in m) for m in checkpoint if m["role"] == "assistant"] == [False, False, True]


def _text_of(message: dict[str, Any]) -> str:
    if message.get("role") in ("compactionSummary", "branchSummary"):
        return (
            str(message["summary"]) if message["role"] == "compactionSummary" else flatten_text(parse_message(message))
        )
    return flatten_text(parse_message(_normalized(message)))


async def test_imported_store_holds_openclaws_context_and_passes_the_deep_check(
    corpus: dict[str, tuple[Path, dict[str, Any]]], tmp_path: Path
) -> None:
    """Import every case into one store: each session's context items are OpenClaw's context, nothing is lost."""
    store = await Store.open(tmp_path / "oracle.db")
    try:
        report = await import_paths(store, [path for path, _ in corpus.values()])
        assert report.failed_files == 0 and report.skipped == [], report.skipped[:5]
        differ = []
        for name, (path, result) in corpus.items():
            session_id = read_transcript(path).header.id  # type: ignore[union-attr]
            async with store.read() as conn:
                items = await repo.load_context(conn, session_id)
            ours = [flatten_text(i.message) if i.kind == "message" else i.summary.content for i in items]
            theirs = [_text_of(m) for m in result["messages"] if m.get("role") not in _NOT_FOR_MODELS]
            if ours != theirs:
                differ.append(name)
        assert differ == [], f"{len(differ)} of {len(corpus)} imported contexts differ from OpenClaw's: {differ[:5]}"
        errors = [p for p in await deep_check(store) if p.severity == "error"]
        assert errors == []
    finally:
        await store.close()
