"""`recall`: plain-words questions over a generated multi-session history, through the real runtime, store and CLI."""

from __future__ import annotations

import contextlib
import json
import sqlite3
import subprocess
import sys
from datetime import datetime
from pathlib import Path

import pytest

from bench.b_recall_quality import raw_bm25
from bench.recall_data import Conversation, generate
from openclaw_ctx import recall
from openclaw_ctx.config import OpenClawConfig
from openclaw_ctx.errors import RecallQueryError
from openclaw_ctx.host.runtime import Runtime
from openclaw_ctx.messages import AgentMessage
from openclaw_ctx.recall import embedding  # noqa: F401  (recall.embedding below)
from openclaw_ctx.store.store import Store
from openclaw_ctx.testing import assistant, user


def _ms(iso: str) -> int:
    return int(datetime.fromisoformat(iso.replace("Z", "+00:00")).timestamp() * 1000)


async def _load(db: Path, conv: Conversation, *, engine: str = "lossless-claw", vectors: bool = True) -> None:
    store = await Store.open(db)
    runtime = await Runtime.create(
        store, config=OpenClawConfig().with_engine(engine), context_window=4096, embed_vectors=vectors
    )
    for s, session in enumerate(conv.sessions):
        for t in range(0, len(session.turns), 2):
            pair = session.turns[t : t + 2]
            messages: list[AgentMessage] = [
                user(x.text, timestamp=_ms(x.timestamp)) if x.role == "user" else assistant(x.text) for x in pair
            ]
            ids = {id(m): f"{s}:{t + i}" for i, m in enumerate(messages)}
            await runtime.record_turn(conv.key, messages, entry_ids=lambda m, ids=ids: ids.get(id(m)))
    await runtime.dispose()
    await store.close()


@pytest.fixture(scope="module")
def conversation() -> Conversation:
    return generate("dev", conversations=1, sessions_per_conversation=4, turns_per_session=40)[0]


def _cli(db: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "openclaw_ctx", "--db", str(db), *args], capture_output=True, text=True, timeout=120
    )


def _evidence(db: Path, conv: Conversation) -> dict[str, set[int]]:
    with contextlib.closing(sqlite3.connect(db)) as con:
        ids = dict(con.execute("SELECT entry_id, message_id FROM messages WHERE session_key = ?", (conv.key,)))
    return {q.qid: {ids[f"{s}:{t}"] for s, t in q.evidence} for q in conv.questions}


@pytest.mark.slow
async def test_paraphrased_questions_find_their_evidence_through_the_cli(
    tmp_path: Path, conversation: Conversation
) -> None:
    db = tmp_path / "recall.db"
    await _load(db, conversation)
    evidence = _evidence(db, conversation)
    with contextlib.closing(sqlite3.connect(db)) as con:
        compacted = con.execute("SELECT count(*) FROM summaries").fetchone()[0]
        stored = con.execute("SELECT count(*) FROM message_vectors").fetchone()[0]
        messages = con.execute("SELECT count(*) FROM messages").fetchone()[0]
    assert compacted > 0  # most of the history was summarized away at a 4k window
    assert stored == messages  # the runtime's upkeep embedded every message after its turn
    paraphrased = [q for q in conversation.questions if q.qclass in ("paraphrase", "cjk")]
    found = baseline = 0
    for q in paraphrased:
        with contextlib.closing(sqlite3.connect(db)) as con:
            baseline += bool(set(raw_bm25(con, conversation.key, q.text)) & evidence[q.qid])
        done = _cli(db, "recall", q.text, "--key", conversation.key, "--json")
        assert done.returncode == 0, done.stderr
        doc = json.loads(done.stdout)
        assert doc["mode"] == "hybrid"
        ranked = [h["messageId"] for h in doc["hits"] if h["kind"] == "message"]
        found += bool(set(ranked[:10]) & evidence[q.qid])
        for hit in doc["hits"]:
            assert {"id", "sessionId", "time", "snippet", "rank"} <= set(hit)
            if hit["kind"] == "message":
                assert hit["entryId"] and (hit["inContext"] or hit["coveringSummaryId"])
    # Raw FTS5 bm25 over the same rows, the question's words ORed, finds few of these.
    assert found >= 0.4 * len(paraphrased) and found > baseline, (found, baseline, len(paraphrased))


async def test_hybrid_beats_words_alone_on_paraphrase_and_every_mode_answers(
    tmp_path: Path, conversation: Conversation
) -> None:
    db = tmp_path / "recall.db"
    await _load(db, conversation, engine="legacy", vectors=False)  # legacy history, no stored vectors
    evidence = _evidence(db, conversation)
    questions = [q for q in conversation.questions if q.qclass == "paraphrase"]
    scores = {}
    async with await Store.open(db) as store:
        for mode in ("lexical", "semantic", "hybrid"):
            hits = [await recall.recall(store, q.text, session_key=conversation.key, mode=mode) for q in questions]
            assert all(h.mode == mode for h in hits)
            scores[mode] = sum(
                bool({h.message_id for h in found} & evidence[q.qid]) for q, found in zip(questions, hits, strict=True)
            )
    assert scores["hybrid"] > scores["lexical"], scores


async def test_an_explicit_date_in_the_question_bounds_the_search(tmp_path: Path, conversation: Conversation) -> None:
    db = tmp_path / "recall.db"
    await _load(db, conversation, vectors=False)
    bounded = [q for q in conversation.questions if q.since]
    assert bounded
    async with await Store.open(db) as store:
        for q in bounded:
            hits = await recall.recall(store, q.text, session_key=conversation.key, since=q.since, limit=20)
            assert all(h.time is not None and h.time >= q.since for h in hits)


@pytest.mark.parametrize(
    ("question", "error"),
    [
        ("", "empty"),
        ("   ", "empty"),
        ("what is the and of it", "no searchable words"),
        ("🙂🙂 🎉", "no searchable words"),
        ("x" * 10_001, "at most 10000"),
    ],
)
async def test_bad_questions_are_named_errors(store: Store, question: str, error: str) -> None:
    with pytest.raises(RecallQueryError, match=error):
        await recall.recall(store, question, session_key="k")


async def test_syntax_characters_mixed_scripts_and_long_questions_answer(
    tmp_path: Path, conversation: Conversation
) -> None:
    db = tmp_path / "recall.db"
    await _load(db, conversation, vectors=False)
    odd = ['pre-prod" OR NEAR(db, 3) AND ^*', "数据库 staging 🙂 データベース", "word " * 1500, "a\x00b deploy"]
    async with await Store.open(db) as store:
        for question in odd:
            hits = await recall.recall(store, question, session_key=conversation.key)
            assert len(hits) <= 10
        long = await recall.recall(store, " ".join(f"w{i}" for i in range(100)), session_key=conversation.key)
        assert any("64" in n for n in long.notes)
        with pytest.raises(RecallQueryError, match="mode"):
            await recall.recall(store, "deploy", session_key=conversation.key, mode="fuzzy")  # type: ignore[arg-type]


async def test_a_missing_vector_table_degrades_to_words_with_a_note(tmp_path: Path, conversation: Conversation) -> None:
    db = tmp_path / "recall.db"
    await _load(db, conversation, vectors=False)
    with contextlib.closing(sqlite3.connect(db)) as con:
        con.execute("DROP TABLE message_vectors")
    async with await Store.open(db, upgrade=False) as store:
        hits = await recall.recall(store, conversation.questions[0].text, session_key=conversation.key)
    assert hits.mode == "lexical"
    assert any("vector tables cannot be read" in n for n in hits.notes)


async def test_embed_writes_every_vector_once_and_resumes(tmp_path: Path, conversation: Conversation) -> None:
    db = tmp_path / "recall.db"
    await _load(db, conversation, vectors=False)
    with contextlib.closing(sqlite3.connect(db)) as con:
        assert con.execute("SELECT count(*) FROM message_vectors").fetchone()[0] == 0
        messages, summaries = (
            con.execute(f"SELECT count(*) FROM {t}").fetchone()[0] for t in ("messages", "summaries")
        )
    embedder = recall.embedding.default_embedder()
    assert embedder is not None
    async with await Store.open(db) as store:  # a run that stopped part way
        partial = await recall.embed_pending(store, embedder, limit=100)
    assert partial.messages == 100
    first = _cli(db, "embed", "--key", conversation.key, "--json")
    assert first.returncode == 0, first.stderr
    assert json.loads(first.stdout) == {
        "model": "wordllama-l2_supercat-256",
        "messages": messages - 100,
        "summaries": summaries,
    }
    again = _cli(db, "embed", "--json")
    assert json.loads(again.stdout)["messages"] == 0
    with contextlib.closing(sqlite3.connect(db)) as con:
        assert con.execute("SELECT count(*), min(length(vector)) FROM message_vectors").fetchone() == (messages, 256)
