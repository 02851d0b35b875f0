"""The recall-quality dataset (bench/recall_data.py): deterministic, split-disjoint, and its annotations hold."""

from __future__ import annotations

import re
from collections import Counter
from datetime import datetime

import pytest

from bench.recall_data import Conversation, generate
from bench.recall_pools import CJK, HOP, IDENT, PARA, TEMP

CLASSES = ("paraphrase", "temporal", "multi_hop", "cjk", "identifier")
STOP = frozenset(
    "a an the is are was were be am do does did i me my we our us you your it its this that of in on at to for "
    "from with by and or not what when where which who how now can should has have s t m re ll".split()
)


def words(text: str) -> set[str]:
    """Content words, crudely stemmed (first five letters), so 'celebrated' and 'celebrate' count as shared."""
    return {w[:5] for w in re.findall(r"[a-z0-9]+", text.lower()) if w not in STOP}


@pytest.fixture(scope="module")
def data() -> dict[str, list[Conversation]]:
    return {split: generate(split) for split in ("dev", "test")}


def test_same_arguments_give_identical_output(data: dict[str, list[Conversation]]) -> None:
    for split in ("dev", "test"):
        assert generate(split) == data[split]
        assert repr(generate(split)) == repr(data[split])
    assert generate("dev", seed=1) != data["dev"]


def test_default_sizes(data: dict[str, list[Conversation]]) -> None:
    for convs in data.values():
        assert len(convs) == 4
        assert sum(len(s.turns) for c in convs for s in c.sessions) == 960
        assert len({c.key for c in convs}) == 4
        for c in convs:
            assert len(c.questions) >= 30
            assert len({q.qid for q in c.questions}) == len(c.questions)
            counts = Counter(q.qclass for q in c.questions)
            assert all(counts[k] >= 6 for k in CLASSES), counts


def test_dev_and_test_share_no_fact_values_or_templates(data: dict[str, list[Conversation]]) -> None:
    answers = {s: {q.answer for c in generate(s, seed=3) + data[s] for q in c.questions} for s in ("dev", "test")}
    assert answers["dev"] and not answers["dev"] & answers["test"]
    for pool in (PARA, TEMP, HOP, CJK, IDENT):
        dev = {v for row in pool["dev"] for field in row for v in field.split("|")}
        test = {v for row in pool["test"] for field in row for v in field.split("|")}
        assert not dev & test, dev & test
    questions = {s: {q.text for c in data[s] for q in c.questions} for s in ("dev", "test")}
    assert not questions["dev"] & questions["test"]


def test_evidence_exists_and_holds_the_answer(data: dict[str, list[Conversation]]) -> None:
    for c in data["dev"] + data["test"]:
        for q in c.questions:
            assert q.answer and q.evidence
            texts = [c.sessions[s].turns[t].text for s, t in q.evidence]  # IndexError if out of range
            if q.qclass == "multi_hop":
                assert len(q.evidence) == 2 and q.answer in "\n".join(texts)
            else:
                assert all(q.answer in text for text in texts), q


def test_the_answer_appears_in_no_other_turn(data: dict[str, list[Conversation]]) -> None:
    for c in data["dev"] + data["test"]:
        for q in c.questions:
            leaks = [
                (s, t)
                for s, session in enumerate(c.sessions)
                for t, turn in enumerate(session.turns)
                if q.answer in turn.text and (s, t) not in q.evidence
            ]
            assert leaks == [], (q, leaks)


def test_paraphrase_questions_share_at_most_one_content_word(data: dict[str, list[Conversation]]) -> None:
    for c in data["dev"] + data["test"]:
        for q in (q for q in c.questions if q.qclass == "paraphrase"):
            for s, t in q.evidence:
                shared = words(q.text) & words(c.sessions[s].turns[t].text)
                assert len(shared) <= 1, (q.text, c.sessions[s].turns[t].text, shared)


def test_time_bounds_and_timestamps(data: dict[str, list[Conversation]]) -> None:
    bounded = 0
    for c in data["dev"] + data["test"]:
        stamps = [turn.timestamp for s in c.sessions for turn in s.turns]
        assert stamps == sorted(stamps) and len(set(stamps)) == len(stamps)
        assert stamps[0].startswith("2026-03-01T")
        assert all(datetime.strptime(x, "%Y-%m-%dT%H:%M:%SZ") for x in stamps)  # noqa: DTZ007
        for q in c.questions:
            if q.since is not None:
                bounded += 1
                assert q.qclass == "temporal"
                assert all(c.sessions[s].turns[t].timestamp >= q.since for s, t in q.evidence)
                assert q.since > stamps[0]
    assert bounded >= 8


def test_turns_alternate_and_stay_short(data: dict[str, list[Conversation]]) -> None:
    for c in data["dev"] + data["test"]:
        for session in c.sessions:
            assert [t.role for t in session.turns] == ["user", "assistant"] * (len(session.turns) // 2)
            assert all(0 < len(t.text) <= 1500 for t in session.turns)
        evidence_sessions = {s for q in c.questions for s, _ in q.evidence}
        assert len(evidence_sessions) == len(c.sessions)  # spread over every session


def test_small_sizes_still_annotate_correctly() -> None:
    for sessions, turns in ((1, 6), (2, 10), (3, 21)):
        for c in generate("test", seed=5, conversations=2, sessions_per_conversation=sessions, turns_per_session=turns):
            assert len(c.sessions) == sessions and all(len(s.turns) == turns for s in c.sessions)
            assert c.questions
            for q in c.questions:
                union = "\n".join(c.sessions[s].turns[t].text for s, t in q.evidence)
                assert q.answer in union
