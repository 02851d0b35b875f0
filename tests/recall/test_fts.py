"""FTS5 query sanitising: no input can break a MATCH, AND semantics, prefix intent, LIKE fallback."""

from __future__ import annotations

import re
import sqlite3
from collections.abc import Iterator

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from openclaw_ctx.recall.fts import (
    fts_terms,
    has_cjk,
    like_pattern,
    like_terms,
    needs_like_fallback,
    sanitize_fts_query,
)
from openclaw_ctx.recall.regex_scan import required_literal
from openclaw_ctx.recall.rows import SearchRow
from openclaw_ctx.recall.search import rank

DOCS = [
    "the vault17 code is 482913",
    "vault170 holds something else entirely",
    "Deploy to prod-eu, then run the migration",
    'she said "hello world" (twice)',
    "running runners ran",
    "中文测试文本",
]


@pytest.fixture(scope="module")
def fts() -> Iterator[sqlite3.Connection]:
    """An FTS5 table with the store's tokenizer, filled with DOCS."""
    conn = sqlite3.connect(":memory:")
    conn.execute("CREATE VIRTUAL TABLE f USING fts5(text, tokenize='porter unicode61 remove_diacritics 2')")
    conn.executemany("INSERT INTO f(rowid, text) VALUES (?, ?)", list(enumerate(DOCS, start=1)))
    yield conn
    conn.close()


def match(conn: sqlite3.Connection, user_text: str) -> list[int]:
    query = sanitize_fts_query(user_text)
    if query is None:
        return []
    return [r[0] for r in conn.execute("SELECT rowid FROM f WHERE f MATCH ? ORDER BY rowid", (query,))]


NASTY = [
    "a, b",
    '"unbalanced',
    'he said "hi',
    "(vault17",
    "vault17)",
    "AND",
    "OR NOT NEAR",
    "vault17 AND",
    "NEAR(vault17 code)",
    "*",
    "code:vault17",
    "^vault17",
    "col:*",
    "🙂🙂",
    "vault17 🙂",
    "a\x00b",
    "",
    "   ",
    '""',
    "'",
    "-vault17",
    "+",
    "{x y}",
    "\\",
]


@pytest.mark.parametrize("user_text", NASTY)
def test_nasty_input_never_breaks_match(fts: sqlite3.Connection, user_text: str) -> None:
    match(fts, user_text)  # must not raise


def test_every_chunk_is_quoted_and_anded() -> None:
    assert sanitize_fts_query("vault17 code") == '"vault17" "code"'
    assert sanitize_fts_query('say "hi"') == '"say" """hi"""'
    assert sanitize_fts_query("NOT this") == '"NOT" "this"'


def test_and_semantics(fts: sqlite3.Connection) -> None:
    assert match(fts, "vault17 code") == [1]
    assert match(fts, "vault17 missingword") == []


def test_operators_are_words_not_syntax(fts: sqlite3.Connection) -> None:
    # "OR" is a plain (absent) word: an OR query would have matched row 1.
    assert match(fts, "vault17 OR nothing") == []
    assert match(fts, "prod-eu, migration") == [3]


def test_trailing_star_keeps_prefix_intent(fts: sqlite3.Connection) -> None:
    assert sanitize_fts_query("vault*") == '"vault"*'
    assert match(fts, "vault*") == [1, 2]
    assert match(fts, "vault") == []  # without the star it is an exact token


def test_near_duplicate_is_not_a_hit(fts: sqlite3.Connection) -> None:
    assert match(fts, "vault17") == [1]


def test_quotes_inside_text(fts: sqlite3.Connection) -> None:
    assert match(fts, '"hello world"') == [4]


def test_porter_stemming_still_applies(fts: sqlite3.Connection) -> None:
    assert match(fts, "runs") == [3, 5]  # "run the migration" and "running runners"


def test_tokenless_input_gives_none() -> None:
    assert sanitize_fts_query("🙂 ,,, ***") is None
    assert sanitize_fts_query("") is None
    assert sanitize_fts_query("a\x00b") == '"a" "b"'


def test_cjk_falls_back_to_like() -> None:
    assert has_cjk("密码 4821")
    assert needs_like_fallback("测试")
    assert not needs_like_fallback("vault17")
    assert needs_like_fallback("🙂")  # nothing tokenisable, but something to look for


def test_like_terms_and_escaping() -> None:
    assert like_terms("50% off_now abc*") == ["50%", "off_now", "abc"]
    assert like_pattern("50%_x\\") == "%50\\%\\_x\\\\%"
    conn = sqlite3.connect(":memory:")
    conn.execute("CREATE TABLE t(x)")
    conn.executemany("INSERT INTO t VALUES (?)", [("50% off",), ("500 off",), ("a_b",), ("aXb",)])
    found = [r[0] for r in conn.execute("SELECT x FROM t WHERE x LIKE ? ESCAPE '\\'", (like_pattern("50%"),))]
    assert found == ["50% off"]
    found = [r[0] for r in conn.execute("SELECT x FROM t WHERE x LIKE ? ESCAPE '\\'", (like_pattern("a_b"),))]
    assert found == ["a_b"]


def test_fts_terms() -> None:
    assert fts_terms("Vault-17, code*") == ["vault", "17", "code"]


@settings(max_examples=400, deadline=None)
@given(st.text())
def test_random_text_never_raises_from_sqlite(user_text: str) -> None:
    conn = sqlite3.connect(":memory:")
    conn.execute("CREATE VIRTUAL TABLE f USING fts5(text, tokenize='porter unicode61 remove_diacritics 2')")
    conn.execute("INSERT INTO f(text) VALUES (?)", (user_text.replace("\x00", ""),))
    query = sanitize_fts_query(user_text)
    if query is not None:
        conn.execute("SELECT rowid FROM f WHERE f MATCH ?", (query,)).fetchall()
    conn.close()


@settings(max_examples=200, deadline=None)
@given(st.lists(st.sampled_from(list("abc") + ['"', "(", ")", "*", ":", "^", ",", " ", "AND", "OR", "NEAR"])))
def test_operator_soup_never_raises(parts: list[str]) -> None:
    conn = sqlite3.connect(":memory:")
    conn.execute("CREATE VIRTUAL TABLE f USING fts5(text)")
    query = sanitize_fts_query("".join(parts))
    if query is not None:
        conn.execute("SELECT rowid FROM f WHERE f MATCH ?", (query,)).fetchall()
    conn.close()


def test_required_literal_examples() -> None:
    assert required_literal(r"vault1[0-9]") == "vault1"
    assert required_literal(r"abc+d") == "abc"
    assert required_literal(r"ab?c") is None
    assert required_literal(r"A|B|C") is None
    assert required_literal(r"(?i)vault") is None
    assert required_literal(r"code\.v2") == "code.v2"
    assert required_literal(r"(opt)?tail") == "tail"
    assert required_literal(r"x{2}yz") == "yz"


ATOMS = ["a", "b", "c", "ab", ".", "a?", "b*", "c+", "[ab]", "(ab)?", "(a|b)", "\\.", "b{2}", "^", "$", "x"]


@settings(max_examples=400, deadline=None)
@given(st.lists(st.sampled_from(ATOMS), min_size=1, max_size=6), st.text(alphabet="abcx.", max_size=12))
def test_required_literal_is_in_every_match(atoms: list[str], haystack: str) -> None:
    pattern = "".join(atoms)
    literal = required_literal(pattern)
    if literal is not None and re.search(pattern, haystack):
        assert literal.lower() in haystack.lower()


def _row(ms: int, score: float | None, message_id: int | None = 1, summary_id: str | None = None) -> SearchRow:
    return SearchRow("k", "s", "t", None, ms, message_id=message_id, summary_id=summary_id, score=score)


def test_rank_orders_by_policy() -> None:
    hour = 3_600_000
    now = 1000 * hour
    old_strong = _row(now - 900 * hour, -10.0, message_id=1)
    new_weak = _row(now - hour, -9.5, message_id=2)
    unscored = _row(now, None, message_id=3)
    summary_same_time = _row(now - hour, -9.5, message_id=None, summary_id="sum_x")
    rows = [old_strong, new_weak, unscored, summary_same_time]
    assert rank(rows, "recency", now_ms=now) == [unscored, new_weak, summary_same_time, old_strong]
    assert rank(rows, "relevance", now_ms=now) == [old_strong, new_weak, summary_same_time, unscored]
    # 900 hours of age damps -10 to about -5.3: the newer, slightly weaker match wins
    assert rank(rows, "hybrid", now_ms=now)[:2] == [new_weak, summary_same_time]
    assert rank(rows, "hybrid", now_ms=now)[-1] == unscored
