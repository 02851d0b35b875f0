"""Turning user text into FTS5 queries that cannot fail, and the LIKE terms for what FTS cannot serve.

FTS5 query syntax treats commas, quotes, parentheses, ``AND``/``OR``/``NOT``/``NEAR``, ``*``, ``:``
and ``^`` as operators, so raw user text is a syntax error waiting to happen (hermes-lcm #460: a
comma). :func:`sanitize_fts_query` quotes every whitespace-separated chunk as a phrase, so the query
is always a plain AND of phrases; a trailing ``*`` on a chunk is kept as a quoted prefix query.

``unicode61`` keeps a run of CJK characters as one token, so a CJK word inside a longer run never
matches; :func:`needs_like_fallback` says when to search with ``LIKE`` instead, and
:func:`like_terms` / :func:`like_pattern` build AND-of-substring terms for it. SQLite bounds a LIKE
search twice (expression depth 1000, pattern length 50 000 bytes): :func:`checked_like_terms`
refuses a search over either bound with a :class:`RecallQueryError` that names it.
"""

from __future__ import annotations

import re
import unicodedata

from openclaw_ctx._text import CJK_CHAR
from openclaw_ctx.errors import RecallQueryError

__all__ = [
    "CJK_CHAR",
    "MAX_LIKE_PATTERN_BYTES",
    "MAX_LIKE_TERMS",
    "checked_like_terms",
    "chunks",
    "fts_terms",
    "has_cjk",
    "like_pattern",
    "like_terms",
    "needs_like_fallback",
    "sanitize_fts_query",
]

MAX_LIKE_TERMS = 256
"""Terms one LIKE search ANDs together (SQLite refuses an expression tree deeper than 1000)."""
MAX_LIKE_PATTERN_BYTES = 50_000
"""SQLite's default ``SQLITE_LIMIT_LIKE_PATTERN_LENGTH``: a longer pattern is "too complex"."""

# Characters unicode61 treats as part of a token: letters, numbers and private-use code points.
_TOKEN_CATEGORIES = ("L", "N")
_CONTROL = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]")


def _is_token_char(ch: str) -> bool:
    category = unicodedata.category(ch)
    return category[0] in _TOKEN_CATEGORIES or category == "Co"


def chunks(user_text: str) -> list[tuple[str, bool]]:
    """Whitespace-separated chunks of `user_text` as ``(text, wants_prefix)``, dropping token-less ones."""
    cleaned = _CONTROL.sub(" ", user_text)
    out: list[tuple[str, bool]] = []
    for raw in cleaned.split():
        prefix = raw.endswith("*")
        chunk = raw.rstrip("*")
        if any(_is_token_char(ch) for ch in chunk):
            out.append((chunk, prefix))
    return out


def sanitize_fts_query(user_text: str) -> str | None:
    """An FTS5 MATCH expression for `user_text` that is always valid: an AND of quoted phrases.

    Each whitespace-separated chunk becomes one phrase (``"vault-17"`` matches the adjacent tokens
    ``vault 17``); embedded double quotes are doubled; a trailing ``*`` keeps its prefix meaning as
    ``"abc"*``. Chunks with no letter or digit (punctuation, emoji) are dropped, as are control
    characters (an embedded NUL would end the query string early).

    Args:
        user_text: anything a user or a model typed.

    Returns:
        The MATCH expression, or None when nothing searchable is left.
    """
    parts = []
    for chunk, prefix in chunks(user_text):
        quoted = '"' + chunk.replace('"', '""') + '"'
        parts.append(quoted + "*" if prefix else quoted)
    return " ".join(parts) if parts else None


def fts_terms(user_text: str) -> list[str]:
    """The lower-cased word tokens of `user_text` (what a snippet should highlight)."""
    terms: list[str] = []
    for chunk, _prefix in chunks(user_text):
        word = []
        for ch in chunk:
            if _is_token_char(ch):
                word.append(ch)
            elif word:
                terms.append("".join(word).lower())
                word = []
        if word:
            terms.append("".join(word).lower())
    return terms


def has_cjk(user_text: str) -> bool:
    """True when the text contains CJK (or Hangul / kana) characters."""
    return CJK_CHAR.search(user_text) is not None


def needs_like_fallback(user_text: str) -> bool:
    """True when FTS5 cannot serve this query (CJK text, or nothing tokenisable but something typed)."""
    if has_cjk(user_text):
        return True
    return sanitize_fts_query(user_text) is None and bool(like_terms(user_text))


def like_terms(user_text: str) -> list[str]:
    """The whitespace-separated terms of `user_text` for an AND-of-substrings LIKE search."""
    # A trailing `*` (prefix intent) is implied by substring matching.
    return [t.rstrip("*") for t in _CONTROL.sub(" ", user_text).split() if t.rstrip("*")]


def like_pattern(term: str) -> str:
    """A ``LIKE … ESCAPE '\\'`` pattern that matches `term` as a literal substring."""
    escaped = term.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
    return f"%{escaped}%"


def checked_like_terms(user_text: str) -> list[str]:
    """:func:`like_terms`, refused when SQLite could not run the LIKE search they make.

    Raises:
        RecallQueryError: more than :data:`MAX_LIKE_TERMS` terms, or a term whose pattern is over
            :data:`MAX_LIKE_PATTERN_BYTES`.
    """
    terms = like_terms(user_text)
    if len(terms) > MAX_LIKE_TERMS:
        raise RecallQueryError(
            f"the search has {len(terms)} terms; a substring (LIKE) search takes at most {MAX_LIKE_TERMS}"
        )
    for term in terms:
        size = len(like_pattern(term).encode("utf-8", "surrogatepass"))
        if size > MAX_LIKE_PATTERN_BYTES:
            raise RecallQueryError(
                f"a search term is {size} bytes as a LIKE pattern; SQLite allows at most {MAX_LIKE_PATTERN_BYTES}"
            )
    return terms
