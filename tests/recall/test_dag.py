"""The DAG in networkx: load, validate (healthy and deliberately broken stores), export."""

from __future__ import annotations

import sqlite3
import xml.etree.ElementTree as ET
from pathlib import Path

import networkx as nx
import pytest
from test_retrieval import History, add_messages, build_planted, condense, filler, summarize_oldest

from openclaw_ctx.errors import RecallQueryError
from openclaw_ctx.inspect.dag import deep_check, export, load_dag, validate
from openclaw_ctx.store import repo
from openclaw_ctx.store.store import Store


def raw_sql(db_path: Path, *statements: str) -> None:
    """Corrupt the file the way an outside tool could (foreign keys off, no triggers of ours)."""
    conn = sqlite3.connect(db_path)
    try:
        for statement in statements:
            conn.execute(statement)
        conn.commit()
    finally:
        conn.close()


async def test_load_dag_nodes_edges_and_context(store: Store) -> None:
    a, _b = await build_planted(store)
    graph = await load_dag(store, a.key)
    assert graph.number_of_nodes() == len(a.ids) + 3
    assert set(graph.successors(a.condensed[0])) == set(a.leaves)
    assert [graph.edges[a.leaves[0], f"msg_{i}"]["ordinal"] for i in a.ids[:4]] == [0, 1, 2, 3]
    assert graph.graph["context"] == [a.condensed[0], f"msg_{a.ids[-2]}", f"msg_{a.ids[-1]}"]
    assert graph.nodes[a.condensed[0]]["depth"] == 1 and graph.nodes[f"msg_{a.ids[0]}"]["role"] == "user"
    assert nx.is_directed_acyclic_graph(graph)
    slim = await load_dag(store, a.key, include_messages=False)
    assert f"msg_{a.ids[-1]}" not in slim and f"msg_{a.ids[0]}" in slim  # covered ones stay as edge targets


async def test_healthy_history_validates_for_every_key(store: Store) -> None:
    a, b = await build_planted(store)
    assert await validate(store, a.key) == []
    assert await validate(store, b.key) == []
    assert await deep_check(store) == []


async def test_deeper_dag_validates(store: Store) -> None:
    h = History("agent:main:deep")
    for round_ in range(4):
        await add_messages(store, h, filler(f"r{round_}", 3))
        await summarize_oldest(store, h, 3, f"leaf {round_}")
    await condense(store, h, 2, "d1 a")
    await condense(store, h, 2, "d1 b")
    await condense(store, h, 2, "d2", depth=1)
    await add_messages(store, h, filler("tail", 2))
    assert await deep_check(store) == []
    graph = await load_dag(store, h.key)
    assert graph.graph["context"][0] == h.condensed[-1]
    assert len(nx.descendants(graph, h.condensed[-1])) == 4 + 2 + 12


def codes(problems: list) -> set[str]:  # type: ignore[type-arg]
    return {p.code for p in problems}


async def test_cycle_is_reported(store: Store, db_path: Path) -> None:
    a, _b = await build_planted(store)
    raw_sql(db_path, f"INSERT INTO summary_parents VALUES ('{a.leaves[0]}', '{a.condensed[0]}', 0)")
    problems = await validate(store, a.key)
    assert "cycle" in codes(problems)
    cycle = next(p for p in problems if p.code == "cycle")
    assert a.leaves[0] in cycle.detail and a.condensed[0] in cycle.detail


async def test_depth_and_token_problems(store: Store, db_path: Path) -> None:
    a, _b = await build_planted(store)
    raw_sql(
        db_path,
        f"UPDATE summaries SET depth = 4 WHERE summary_id = '{a.condensed[0]}'",
        f"UPDATE summaries SET depth = 1, token_count = 0 WHERE summary_id = '{a.leaves[1]}'",
    )
    problems = await validate(store, a.key)
    details = {(p.code, p.subject): p.detail for p in problems}
    assert details[("depth", a.leaves[1])] == "a leaf has depth 1, expected 0"
    assert details[("depth", a.condensed[0])] == "depth 4, expected 2"
    assert ("token_count", a.leaves[1]) in details


async def test_lost_and_double_covered_messages(store: Store, db_path: Path) -> None:
    a, _b = await build_planted(store)
    newest = a.ids[-1]
    async with store.read() as conn:
        session = await repo.active_session(conn, a.key)
    assert session is not None
    raw_sql(db_path, f"DELETE FROM context_items WHERE session_id = '{session.session_id}' AND message_id = {newest}")
    async with store.transaction() as conn:
        extra = repo.NewSummary(
            kind="leaf", content="dup", token_count=2, summarizer="t", source_message_ids=[a.ids[0]]
        )
        dup = await repo.insert_summary(conn, session, extra)
    problems = await validate(store, a.key)
    by_subject = {(p.code, p.subject) for p in problems}
    assert ("uncovered", f"msg_{newest}") in by_subject
    assert ("covered_twice", f"msg_{a.ids[0]}") in by_subject
    double = next(p for p in problems if p.code == "covered_twice")
    assert dup in double.detail and a.leaves[0] in double.detail


async def test_unreachable_summary_subtree(store: Store, db_path: Path) -> None:
    a, _b = await build_planted(store)
    async with store.read() as conn:
        session = await repo.active_session(conn, a.key)
    assert session is not None
    raw_sql(db_path, f"DELETE FROM context_items WHERE session_id = '{session.session_id}' AND item_type = 'summary'")
    problems = await validate(store, a.key)
    unreachable = {p.subject for p in problems if p.code == "unreachable"}
    assert unreachable == {f"msg_{i}" for i in a.ids[:8]}


async def test_context_items_must_resolve_within_the_key(store: Store, db_path: Path) -> None:
    a, b = await build_planted(store)
    async with store.read() as conn:
        session = await repo.active_session(conn, a.key)
    assert session is not None
    sid = session.session_id
    raw_sql(
        db_path,
        f"INSERT INTO context_items VALUES ('{sid}', 100, 'message', 99999, NULL, 5)",
        f"INSERT INTO context_items VALUES ('{sid}', 101, 'message', {b.ids[0]}, NULL, 5)",
        f"INSERT INTO context_items VALUES ('{sid}', 102, 'summary', NULL, 'sum_ghost', 5)",
    )
    problems = [p for p in await validate(store, a.key) if p.code.startswith("context")]
    assert {(p.code, p.subject) for p in problems} == {
        ("context_unresolved", f"{sid}#100"),
        ("context_cross_key", f"{sid}#101"),
        ("context_unresolved", f"{sid}#102"),
    }
    assert any(p.session_key == a.key for p in await deep_check(store))


async def test_cross_key_edges(store: Store, db_path: Path) -> None:
    a, b = await build_planted(store)
    raw_sql(db_path, f"INSERT INTO summary_messages VALUES ('{a.leaves[0]}', {b.ids[1]}, 9)")
    problems = await validate(store, a.key)
    assert ("cross_key_edge", f"msg_{b.ids[1]}") in {(p.code, p.subject) for p in problems}


async def test_export_formats(store: Store) -> None:
    a, _b = await build_planted(store)
    graph = await load_dag(store, a.key)
    dot = export(graph, "dot")
    assert dot.startswith('digraph "lcm agent:main:a" {') and dot.count(" -> ") == graph.number_of_edges()
    assert f'"{a.condensed[0]}" -> "{a.leaves[0]}";' in dot and "penwidth=2" in dot
    graphml = export(graph, "graphml")
    ET.fromstring(graphml)
    back = nx.parse_graphml(graphml)
    assert set(back.nodes) == set(graph.nodes) and back.number_of_edges() == graph.number_of_edges()
    assert back.nodes[a.condensed[0]]["kind"] == "condensed"
    mermaid = export(graph, "mermaid")
    assert mermaid.startswith("flowchart TD") and f"  {a.condensed[0]} --> {a.leaves[0]}" in mermaid
    assert mermaid.count(" --> ") == graph.number_of_edges()
    with pytest.raises(RecallQueryError, match="format must be one of dot, graphml, mermaid"):
        export(graph, "svg")


async def test_real_engine_compactions_stay_valid_and_recallable(store: Store) -> None:
    """The lossless engine compacts (rotating twice); recall finds every planted fact's original."""
    from engines.lossless.engine import create_engine
    from openclaw_ctx.contract import CompactParams, EngineContext
    from openclaw_ctx.recall import expand, grep

    engine = create_engine(
        EngineContext(
            store=store,
            config={"freshTailCount": 4, "leafChunkTokens": 300, "leafMinFanout": 2, "condensedMinFanout": 2},
        )
    )
    h = History("agent:main:engine")
    for round_ in range(3):
        texts = [
            f"round {round_} turn {i}: the code for locker{round_}x{i} is {round_}{i}4711 " + "pad " * 30
            for i in range(10)
        ]
        await add_messages(store, h, texts)
        async with store.read() as conn:
            session = await repo.active_session(conn, h.key)
        assert session is not None
        result = await engine.compact(
            CompactParams(session_id=session.session_id, session_key=h.key, token_budget=500, force=True)
        )
        assert result.ok and result.compacted, result.reason
    assert await deep_check(store) == []
    expanded = 0
    for mid, original in h.texts.items():
        fact = original.split()[7]  # locker<r>x<i>
        hits = await grep(store, fact, session_key=h.key, scope="messages")
        assert [x.id for x in hits] == [f"msg_{mid}"], fact
        if hits[0].in_context:
            continue
        assert hits[0].covering_summary_id is not None
        opened = await expand(store, hits[0].covering_summary_id, include_messages=True, token_cap=100_000)
        assert {e.id: e.text for e in opened.entries if e.kind == "message"}[f"msg_{mid}"] == original
        expanded += 1
    assert expanded >= 20  # most of the history was summarized away and came back through expand
