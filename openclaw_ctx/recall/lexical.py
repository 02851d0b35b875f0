"""Lexical ranking for natural-language recall: content words, OR semantics, bm25, then phrase and coverage boosts.

A question ("where is the staging db hosted now?") shares few words with its answer, and never all
of them, so recall ORs the question's content words (stop words dropped; the store's FTS5 tokenizer
stems them with Porter), ranks every match by bm25, and re-scores the best candidates by how many of
the distinct query words they hold and whether two of them stand next to each other. An identifier
typed as one chunk (``INC-4821``, ``db-eu-3.internal``) is also searched as a phrase and weighs more.

CJK text is one FTS5 token per run of characters, so a CJK query is searched by its character
bigrams with LIKE and scored by how many of them an item holds.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import UTC, datetime

from openclaw_ctx.recall.fts import CJK_CHAR, chunks, fts_terms, has_cjk

__all__ = [
    "STOP_WORDS",
    "LexicalQuery",
    "explicit_window",
    "lexical_query",
    "rescore",
]

STOP_WORDS = frozenset(
    """
    a about above after again against all also am an and any are as at be because been before being below
    between both but by can could did do does doing done down during each else ever few for from further get
    got had has have having he her here hers herself him himself his how i if in into is it its itself just
    let like me more most much my myself no nor not now of off on once only or other our ours ourselves out
    over own please same say said she should so some such tell than that the their theirs them themselves
    then there these they this those through to too under until up us very was we were what when where which
    while who whom whose why will with would you your yours yourself yourselves again anything something
    someone thing things know remind recall remember mentioned mention told ask asked one ones still
    currently current ago last latest newest
    """.split()
)
"""English function words and question glue that never identify an answer."""

_CJK_STOP = frozenset(
    "的了吗呢吧啊是在和与及或我你他她它们这那哪里什么怎么谁几个为有没不也就都很吗么呀はがをにでとものへやかな"
)
_CJK_RUN = re.compile(CJK_CHAR.pattern + "+")
_IDENTIFIER = re.compile(r"\w[\w.:/#@-]*[.:/#@-][\w.:/#@-]*\w")


@dataclass(frozen=True)
class LexicalQuery:
    """What a question becomes: its content words, identifier phrases, CJK bigrams and FTS5 OR query."""

    terms: tuple[str, ...]
    phrases: tuple[tuple[str, ...], ...]
    bigrams: tuple[str, ...]
    match: str | None

    @property
    def empty(self) -> bool:
        """Nothing lexical to search for (only stop words, punctuation or emoji)."""
        return self.match is None and not self.bigrams


def lexical_query(question: str) -> LexicalQuery:
    """The lexical form of a natural-language question."""
    latin = _CJK_RUN.sub(" ", question)
    terms = tuple(dict.fromkeys(t for t in fts_terms(latin) if t not in STOP_WORDS and not _noise(t)))
    phrases = tuple(
        dict.fromkeys(
            tuple(fts_terms(chunk)) for chunk, _ in chunks(latin) if _IDENTIFIER.fullmatch(chunk.strip("?,.!;:()\"'"))
        )
    )
    phrases = tuple(p for p in phrases if len(p) > 1)
    parts = [_quoted(t) for t in terms] + [_quoted(" ".join(p)) for p in phrases]
    bigrams: list[str] = []
    if has_cjk(question):
        for run in _CJK_RUN.findall(question):
            kept = "".join(ch if ch not in _CJK_STOP else " " for ch in run)
            for piece in kept.split():
                bigrams.extend(piece[i : i + 2] for i in range(max(1, len(piece) - 1)))
    return LexicalQuery(terms, phrases, tuple(dict.fromkeys(bigrams)), " OR ".join(parts) if parts else None)


def _noise(term: str) -> bool:
    return len(term) == 1 and not term.isdigit()


def _quoted(text: str) -> str:
    return '"' + text.replace('"', '""') + '"'


def _stem(word: str) -> str:
    """A crude suffix strip, enough to say a word of the text is the query word (FTS5 matched it by Porter)."""
    for suffix in ("ings", "ing", "ies", "ied", "ed", "es", "s", "ly"):
        if len(word) > len(suffix) + 2 and word.endswith(suffix):
            return word[: -len(suffix)]
    return word


def rescore(text: str, query: LexicalQuery, bm25: float, *, coverage_weight: float, phrase_weight: float) -> float:
    """A candidate's lexical score (higher is better) from its bm25 and the query words it holds."""
    words = [_stem(w) for w in fts_terms(text[:20_000])]
    present = set(words)
    stems = [_stem(t) for t in query.terms]
    covered = sum(1 for s in dict.fromkeys(stems) if s in present)
    coverage = covered / len(set(stems)) if stems else 0.0
    pairs = {(a, b) for a, b in zip(words, words[1:], strict=False)}
    wanted = {(a, b) for a, b in zip(stems, stems[1:], strict=False)}
    for phrase in query.phrases:
        wanted |= {(_stem(a), _stem(b)) for a, b in zip(phrase, phrase[1:], strict=False)}
    adjacent = len(wanted & pairs) / len(wanted) if wanted else 0.0
    return -bm25 * (1.0 + coverage_weight * coverage + phrase_weight * adjacent)


_DATE = r"(\d{4}-\d{2}-\d{2}(?:[T ]\d{2}:\d{2}(?::\d{2})?Z?)?)"
_SINCE = re.compile(rf"\b(?:since|after|from|starting)\s+(?:the\s+)?{_DATE}", re.IGNORECASE)
_BEFORE = re.compile(rf"\b(?:before|until|till|prior to|up to)\s+(?:the\s+)?{_DATE}", re.IGNORECASE)


def explicit_window(question: str) -> tuple[datetime | None, datetime | None]:
    """Time bounds the question states in ISO form ("since 2026-03-10", "before 2026-04-01")."""

    def parse(match: re.Match[str] | None) -> datetime | None:
        if match is None:
            return None
        try:
            value = datetime.fromisoformat(match.group(1).replace("Z", "+00:00"))
        except ValueError:
            return None
        return value if value.tzinfo else value.replace(tzinfo=UTC)

    return parse(_SINCE.search(question)), parse(_BEFORE.search(question))
