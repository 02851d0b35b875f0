"""`grep`, `describe`, `expand` and `dag` through the real CLI against a real database built here."""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import sqlite3
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import networkx as nx
import pytest
from test_retrieval import History, add_messages, build_planted, summarize_oldest
from typer.testing import CliRunner, Result

import openclaw_ctx.cli.app as cli
from openclaw_ctx.store.store import Store


def invoke(db: Path, *args: str) -> Result:
    """Run the real CLI app in-process (commands loaded once, as `main()` does)."""
    if not any(c.name == "grep" for c in cli.app.registered_commands):
        cli._load_commands()
    return CliRunner().invoke(cli.app, ["--db", str(db), *args], env={"COLUMNS": "160"})


def flat(output: str) -> str:
    """Output without whitespace: Rich wraps long lines when there is no terminal."""
    return "".join(output.split())


@pytest.fixture
def planted(db_path: Path) -> tuple[History, History]:
    async def build() -> tuple[History, History]:
        store = await Store.open(db_path)
        try:
            return await build_planted(store)
        finally:
            await store.close()

    return asyncio.run(build())


def as_json(result: Result) -> Any:
    assert result.exit_code == 0, result.output + result.stderr
    return json.loads(result.stdout)


def test_grep_key_finds_facts_across_rotations(db_path: Path, planted: tuple[History, History]) -> None:
    a, b = planted
    out = as_json(invoke(db_path, "grep", "vault17", "--key", a.key, "--scope", "messages", "--json"))
    assert [h["id"] for h in out["hits"]] == [f"msg_{a.ids[-2]}", f"msg_{a.ids[0]}"]
    assert out["hits"][1]["coveringSummaryId"] == a.leaves[0] and out["strategy"] == "fts"
    table = invoke(db_path, "grep", "vault17", "--key", a.key, "--scope", "messages")
    assert table.exit_code == 0 and f"msg_{a.ids[0]}" in table.stdout and a.leaves[0] in flat(table.stdout)
    everywhere = as_json(invoke(db_path, "grep", "vault17 code", "--all", "--scope", "messages", "--json"))
    assert {h["sessionKey"] for h in everywhere["hits"]} == {a.key, b.key}


def test_grep_sort_and_regex(db_path: Path, planted: tuple[History, History]) -> None:
    a, _b = planted
    newest = as_json(invoke(db_path, "grep", "vault17 code", "--key", a.key, "--limit", "1", "--json"))
    assert "777001" in newest["hits"][0]["snippet"]
    rx = as_json(
        invoke(db_path, "grep", r"vault17\b", "--key", a.key, "--mode", "regex", "--scope", "messages", "--json")
    )
    assert {h["id"] for h in rx["hits"]} == {f"msg_{a.ids[0]}", f"msg_{a.ids[-2]}"} and rx["strategy"] == "regex"
    relevance = invoke(db_path, "grep", "vault17", "--key", a.key, "--sort", "relevance")
    assert relevance.exit_code == 0 and "relevance" in relevance.stdout


@pytest.mark.parametrize(
    ("args", "code", "needle"),
    [
        (["grep", "x"], 2, "--key"),
        (["grep", "x", "--key", "k", "--all"], 2, "--all"),
        (["grep", "x(", "--all", "--mode", "regex"], 1, "invalid regular expression"),
        (["grep", "x", "--all", "--limit", "0"], 1, "limit must be an integer from 1 to 200"),
        (["grep", "x", "--all", "--sort", "best"], 1, "sort must be one of"),
        (["describe", "sum_nope"], 1, "no summary with id 'sum_nope'"),
        (["describe", "what"], 1, "not a summary id"),
        (["expand", "sum_nope"], 1, "no summary with id"),
        (["expand", "sum_nope", "--token-cap", "0"], 1, "token_cap must be a positive integer"),
        (["dag", "--key", "agent:main:a", "--format", "png"], 2, "dot, graphml, mermaid, svg"),
        (["dag", "--key", "nobody"], 1, "has no messages or summaries"),
    ],
)
def test_bad_input_fails_cleanly(
    db_path: Path, planted: tuple[History, History], args: list[str], code: int, needle: str
) -> None:
    result = invoke(db_path, *args)
    assert result.exit_code == code, result.output + result.stderr
    assert "Traceback" not in result.output + result.stderr
    assert flat(needle) in flat(result.stderr + result.output)


def test_missing_database_is_reported(tmp_path: Path) -> None:
    result = invoke(tmp_path / "none.db", "grep", "x", "--all")
    assert result.exit_code == 1 and "no database file" in result.stderr
    assert not (tmp_path / "none.db").exists()


def test_describe_summary_and_message(db_path: Path, planted: tuple[History, History]) -> None:
    a, _b = planted
    out = as_json(invoke(db_path, "describe", a.condensed[0], "--token-cap", "1000", "--json"))
    assert out["kind"] == "summary" and [s["id"] for s in out["sources"]] == a.leaves
    assert out["manifestTotal"] == 3 and all(m["fitsCap"] for m in out["manifest"])
    human = invoke(db_path, "describe", a.condensed[0])
    assert human.exit_code == 0 and "subtree: 3 node(s)" in human.stdout and a.leaves[1] in human.stdout
    msg = as_json(invoke(db_path, "describe", f"msg_{a.ids[0]}", "--json"))
    assert msg["row"]["text"] == "the vault17 code is 482913"
    assert [c["id"] for c in msg["covering"]] == [a.leaves[0], a.condensed[0]]
    human = invoke(db_path, "describe", str(a.ids[0]))
    assert human.exit_code == 0 and f"{a.leaves[0]} → {a.condensed[0]}" in human.stdout


def test_every_planted_fact_is_grepped_then_expanded_to_its_original(
    db_path: Path, planted: tuple[History, History]
) -> None:
    a, b = planted
    facts = {"482913": a, "555": a, "777001": a, "123456": b}
    for value, history in facts.items():
        hits = as_json(invoke(db_path, "grep", value, "--key", history.key, "--scope", "messages", "--json"))["hits"]
        assert len(hits) == 1, value
        hit = hits[0]
        original = history.texts[int(hit["id"][4:])]
        if hit["inContext"]:
            continue  # still raw: the model sees it as is
        expanded = as_json(invoke(db_path, "expand", hit["contextSummaryId"], "--messages", "--json"))
        texts = {e["id"]: e["text"] for e in expanded["entries"] if e["kind"] == "message"}
        assert texts[hit["id"]] == original
    human = invoke(db_path, "expand", a.condensed[0], "--messages", "--token-cap", "20")
    assert human.exit_code == 0 and "truncated" in human.stdout


def test_dag_export_formats(db_path: Path, planted: tuple[History, History], tmp_path: Path) -> None:
    a, _b = planted
    dot = invoke(db_path, "dag", "--key", a.key)
    assert (
        dot.exit_code == 0
        and dot.stdout.startswith("digraph")
        and f'"{a.condensed[0]}" -> "{a.leaves[0]}";' in dot.stdout
    )
    mermaid = invoke(db_path, "dag", "--key", a.key, "--format", "mermaid", "--no-messages")
    assert mermaid.stdout.startswith("flowchart TD") and f"msg_{a.ids[-1]}" not in mermaid.stdout
    target = tmp_path / "a.graphml"
    written = invoke(db_path, "dag", "--key", a.key, "--format", "graphml", "--out", str(target))
    assert written.exit_code == 0 and "wrote" in written.stderr and written.stdout == ""
    graph = nx.read_graphml(target)
    assert set(graph.successors(a.condensed[0])) == set(a.leaves) and graph.number_of_nodes() == len(a.ids) + 3


@pytest.mark.skipif(shutil.which("dot") is None, reason="Graphviz dot is not installed")
def test_dag_svg_draws_depth_tokens_and_time_range(db_path: Path, planted: tuple[History, History]) -> None:
    a, _b = planted
    result = invoke(db_path, "dag", "--key", a.key, "--format", "svg", "--no-messages")
    assert result.exit_code == 0, result.output + result.stderr
    root = ET.fromstring(result.stdout[result.stdout.index("<svg") :])
    texts = [t.text or "" for t in root.iter("{http://www.w3.org/2000/svg}text")]
    titles = [t.text or "" for t in root.iter("{http://www.w3.org/2000/svg}title")]
    assert {a.condensed[0], *a.leaves} <= set(titles)

    with sqlite3.connect(db_path) as conn:
        rows = conn.execute(
            "SELECT summary_id, depth, token_count, earliest_at, latest_at FROM summaries WHERE session_key = ?",
            (a.key,),
        ).fetchall()
    assert rows
    for sid, depth, tokens, earliest, latest in rows:
        at = texts.index(sid)
        assert texts[at + 1].endswith(f"d{depth} {tokens} tok")
        assert texts[at + 2] == f"{earliest} → {latest}"


def test_dag_svg_without_graphviz_says_how_to_get_it(
    db_path: Path, planted: tuple[History, History], tmp_path: Path
) -> None:
    a, _b = planted
    empty = tmp_path / "bin"
    empty.mkdir()
    out = tmp_path / "dag.svg"
    proc = subprocess.run(
        [sys.executable, "-m", "openclaw_ctx", "--db", str(db_path), "dag", "--key", a.key, "--format", "svg"]
        + ["--out", str(out)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        env={**os.environ, "PATH": str(empty)},
    )
    assert proc.returncode == 1
    assert "Graphviz `dot` is not installed" in proc.stderr and "apt-get install graphviz" in proc.stderr
    assert "Traceback" not in proc.stderr and not out.exists()


def test_help_for_every_recall_command(db_path: Path) -> None:
    for name in ("grep", "describe", "expand", "dag"):
        result = invoke(db_path, name, "--help")
        assert result.exit_code == 0 and "Usage" in result.stdout


def test_console_script_runs_recall_commands(db_path: Path, planted: tuple[History, History]) -> None:
    a, _b = planted
    exe = Path(sys.executable).with_name("openclaw-ctx")
    proc = subprocess.run(
        [str(exe), "--db", str(db_path), "grep", "vault170", "--key", a.key, "--scope", "messages", "--json"],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    hits = json.loads(proc.stdout)["hits"]
    assert hits[0]["id"] == f"msg_{a.ids[1]}"


def test_grep_over_sqlite_like_bounds_is_a_clear_error(db_path: Path, planted: tuple[History, History]) -> None:
    """Issue #13: very long LIKE patterns and more than 1000 terms used to crash (expression tree, "too complex")."""
    a, _b = planted
    many_cjk = " ".join(f"文{i}" for i in range(1001))  # CJK goes by LIKE: one AND clause per term
    result = invoke(db_path, "grep", many_cjk, "--key", a.key)
    assert result.exit_code == 1 and "Traceback" not in result.output + result.stderr
    assert "1001terms" in flat(result.stderr) and "atmost256" in flat(result.stderr)
    long_term = invoke(db_path, "grep", "中" * 20_000, "--all")
    assert long_term.exit_code == 1 and "Traceback" not in long_term.output + long_term.stderr
    assert "SQLiteallowsatmost50000" in flat(long_term.stderr)
    # FTS takes any number of phrases, and a regex's literal prefilter is clipped to what LIKE accepts.
    words = as_json(invoke(db_path, "grep", " ".join(["vault17"] * 1001), "--key", a.key, "--json"))
    assert words["strategy"] == "fts" and words["hits"]
    literal = as_json(invoke(db_path, "grep", "x" * 60_000, "--all", "--mode", "regex", "--json"))
    assert literal["hits"] == [] and literal["complete"] is True


def test_grep_says_of_each_summary_what_describe_says_of_it(db_path: Path, planted: tuple[History, History]) -> None:
    hits = as_json(invoke(db_path, "grep", ".", "--all", "--mode", "regex", "--scope", "summaries", "--json"))["hits"]
    assert hits and {h["kind"] for h in hits} == {"summary"}
    said = {h["id"]: h["inContext"] for h in hits}
    described = {sid: as_json(invoke(db_path, "describe", sid, "--json"))["inContext"] for sid in said}
    assert said == described
    assert any(said.values()), "no summary of the planted histories is in an active context"


def test_summaries_repeating_an_identifier_leave_room_for_the_messages(db_path: Path) -> None:
    # A long history's summaries each repeat the identifier; the messages that stated it still show.
    async def build() -> None:
        store = await Store.open(db_path)
        try:
            h = History("agent:main:ident")
            for n in range(30):
                await add_messages(store, h, [f"step {n}: deployed ORION-77 again", f"ack {n}"])
                await summarize_oldest(store, h, 2, f"summary {n}: ORION-77 deployed, step {n}")
        finally:
            await store.close()

    asyncio.run(build())
    out = as_json(invoke(db_path, "grep", "ORION-77", "--key", "agent:main:ident", "--limit", "10", "--json"))
    kinds = [h["kind"] for h in out["hits"]]
    assert (kinds.count("message"), kinds.count("summary")) == (5, 5)
    assert out["leftOut"] == {"messages": 5, "summaries": 5}
    human = invoke(db_path, "grep", "ORION-77", "--key", "agent:main:ident", "--limit", "10")
    assert human.exit_code == 0 and "at least 5 messages and 5 summaries more matched" in " ".join(human.stderr.split())
    only = as_json(invoke(db_path, "grep", "ORION-77", "--key", "agent:main:ident", "--limit", "10", "--scope",
                          "messages", "--json"))  # fmt: skip
    assert [h["kind"] for h in only["hits"]] == ["message"] * 10 and only["leftOut"]["summaries"] == 0
