"""What the extractive summarizer reads out of a source: requests, facts, cue sentences, identifiers, errors.

The source is any of the shapes :mod:`openclaw_ctx.summarize.records` reads; the output is an
:class:`Extract`, which :mod:`openclaw_ctx.summarize.extractive` lays out as the structured summary.
A *fact* is a prose sentence someone may ask about later: it is scored by who said it and how
specific it is (names, numbers, identifiers), and loses to questions, small talk and sentences
that repeat one template.
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass, field

from openclaw_ctx._text import CJK_CHAR
from openclaw_ctx.summarize.fallback import is_directive
from openclaw_ctx.summarize.identifiers import extract_identifiers, strip_noise
from openclaw_ctx.summarize.records import read_summary, records

__all__ = [
    "MAX_LINE_CHARS",
    "Extract",
    "clip",
    "extract",
    "extract_errors",
    "extract_identifiers",
    "salience",
    "score_facts",
]

MAX_LINE_CHARS = 280

_ERROR = re.compile(
    r"(?:\b[A-Z]\w*(?:Error|Exception)\b|\b(?:error|fatal|panic|FAILED|Traceback)\b|exit code [1-9]\d*)[^\n]{0,200}",
)
_CUES = {
    "constraint": re.compile(
        r"\b(must|never|always|don't|do not|prefer|make sure|only|without|avoid|should(?:n't)?|no more than|"
        r"at most|at least|required?)\b",
        re.IGNORECASE,
    ),
    "decision": re.compile(
        r"\b(decid\w*|chose|choose|choosing|going with|go with|settled on|opt(?:ed)? for|switch(?:ed|ing)? to|"
        r"instead of|we'll use|i'll use|will use|let's use|use \S+ (?:for|as|instead))\b",
        re.IGNORECASE,
    ),
    "done": re.compile(
        r"\b(done|fixed|added|implemented|created|updated|completed|passe[sd]|resolved|wrote|removed|renamed|"
        r"refactored|merged|installed|configured|finished|works now)\b",
        re.IGNORECASE,
    ),
    "next": re.compile(r"\b(next|then i'll|i will|i'll|todo|plan to|remaining|still need|need to)\b", re.IGNORECASE),
}
_SENTENCES = re.compile(r"(?<=[.!?。！？])\s+|(?<=[。！？])|\n+")
_FENCE = re.compile(r"^```.*?^```[^\n]*$", re.DOTALL | re.MULTILINE)
_PRIMARY_ARGS = ("path", "file_path", "filePath", "file", "command", "cmd", "url", "query", "pattern", "name")
_WORD = re.compile(r"[^\W\d_][\w'’-]*|\S*\d\S*")
# Words that start sentences or are capitalised by habit, so a capital alone does not make them a name.
_COMMON = frozenset(
    """a an the this that these those it its it's we i i'm i'll i've i'd you he she they our my your their his
    her there here so but and or if when then now also just please can could would should will let let's ok okay
    yes no thanks thank sure great good right anyway noted understood heads-up quick one first next finally still
    what why how where who which whose in on at for with from to by as after before since all some any each every
    do does did is are was were be been have has had not running run ignore here's that's we'll we're you're don't
    can't update swap change note fyi btw hi hello hey context reminder todo today tomorrow yesterday""".split()
)
_LABEL_PREFIX = re.compile(r"^[\w' -]{1,24}(?::\s+|：\s*)")
# Someone asking for a thing to be remembered, in the languages users write notes in.
_REMEMBER = re.compile(
    r"\b(?:remember|keep (?:that|this|it) in mind|for (?:later|the record)|note to self|don't forget|"
    r"saved to memory)\b|备忘|记住|别忘|メモ|覚えて|忘れないで",
    re.IGNORECASE,
)
_TEMPLATE_PARTS = re.compile(r"`[^`]*`|\d+|\b[A-Z]\w*")


def clip(text: str, limit: int = MAX_LINE_CHARS) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1].rstrip() + "…"


def extract_errors(text: str) -> list[str]:
    """Error lines (exception names, `error:`, failing exit codes), clipped, first-seen order."""
    found: dict[str, None] = {}
    for m in _ERROR.finditer(strip_noise(text)):
        found.setdefault(clip(m.group(0), 220), None)
    return list(found)


def salience(sentence: str, kind: str) -> int:
    """How likely a later turn needs this sentence: role, plus specific words, minus questions and small talk."""
    words = _WORD.findall(_LABEL_PREFIX.sub("", sentence))
    names = {w for i, w in enumerate(words) if w[:1].isupper() and (i > 0 or w.lower() not in _COMMON)}
    numbers = {w for w in words if any(c.isdigit() for c in w)}
    specific = len(names | numbers | set(extract_identifiers(sentence)))
    # CJK packs a clause into a few characters, so its length stands in for the words it has.
    specific += min(2, _cjk_count(sentence) // 12)
    if not specific and len(words) < 8:
        return 0
    score = {"user": 3, "assistant": 2}.get(kind, 2) + 2 * min(specific, 3)
    if _REMEMBER.search(sentence):
        score += 2
    if _is_question(sentence):
        score -= 5
    return score


def _is_question(sentence: str) -> bool:
    return sentence.rstrip().endswith(("?", "？"))


def _cjk_count(text: str) -> int:
    return len(CJK_CHAR.findall(text))


def _template(sentence: str) -> str:
    return _TEMPLATE_PARTS.sub("_", sentence).lower()


@dataclass
class Extract:
    """What the heuristics found in one source text."""

    requests: list[str] = field(default_factory=list)
    facts: list[tuple[int, str]] = field(default_factory=list)
    constraints: list[str] = field(default_factory=list)
    decisions: list[str] = field(default_factory=list)
    done: list[str] = field(default_factory=list)
    next_steps: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    tools: dict[str, list[str]] = field(default_factory=dict)
    identifiers: list[str] = field(default_factory=list)
    """Identifiers said in prose or passed to tools, first-seen order."""
    output_identifiers: list[str] = field(default_factory=list)
    """Identifiers seen only in tool output or code blocks."""
    earlier: dict[str, list[str]] = field(default_factory=dict)
    """Sections of the summaries inside the source (a condensed node's children), in source order."""
    last_statement: str | None = None


def _sentences(text: str) -> list[str]:
    out = []
    for s in _SENTENCES.split(strip_noise(text)):
        s = s.strip().lstrip("#>").strip()
        if len(s) > 3 and _prose(s):
            out.append(clip(s))
    return out


def _prose(s: str) -> bool:
    """Not a log line, a table row or code: mostly letters and spaces."""
    letters = sum(c.isalpha() or c.isspace() for c in s)
    return letters >= 0.6 * len(s)


def _add(bucket: list[str], value: str) -> None:
    if value not in bucket:
        bucket.append(value)


def _tool_calls(calls: list[tuple[str, dict[str, object]]], ex: Extract, prose_ids: list[str]) -> None:
    for name, args in calls:
        seen = ex.tools.setdefault(name, [])
        primary = next((clip(str(args[k]), 120) for k in _PRIMARY_ARGS if isinstance(args.get(k), str | int)), "")
        if primary and primary not in seen:
            seen.append(primary)
        prose_ids += extract_identifiers(" ".join(str(v) for v in args.values() if isinstance(v, str | int)))


def extract(source: str) -> Extract:
    """Run the heuristics over a summarizer source (or any plain text)."""
    ex = Extract()
    prose_ids: list[str] = []
    output_ids: list[str] = []
    candidates: list[tuple[str, str]] = []
    for record in records(source):
        if record.kind == "calls":
            _tool_calls(record.calls or [], ex, prose_ids)
            continue
        if record.kind == "tool":
            output_ids += extract_identifiers(record.text)
            for err in extract_errors(record.text)[:3]:
                _add(ex.errors, err)
            continue
        if record.kind == "summary":
            for section, items in read_summary(record.text).items():
                ex.earlier.setdefault(section, []).extend(items)
            continue
        prose = _FENCE.sub("\n", record.text)
        output_ids += extract_identifiers("\n".join(_FENCE.findall(record.text)))
        prose_ids += extract_identifiers(prose)
        sentences = _sentences(prose)
        if not sentences:
            continue
        if record.kind == "user":
            _add(ex.requests, clip(" ".join(sentences[:2])))
        for s in sentences:
            _classify(s, record.kind, ex, candidates)
        if record.kind in ("assistant", "text"):
            ex.last_statement = sentences[-1]
    ex.facts = score_facts(candidates)
    ex.identifiers = list(dict.fromkeys(prose_ids))
    said = set(ex.identifiers)
    ex.output_identifiers = [i for i in dict.fromkeys(output_ids) if i not in said]
    return ex


def _classify(s: str, kind: str, ex: Extract, candidates: list[tuple[str, str]]) -> None:
    """Put one sentence in the first bucket its cues call for; the rest are fact candidates."""
    if kind != "user" and is_directive(s):
        return
    question = _is_question(s)
    if _CUES["decision"].search(s) and not question:
        _add(ex.decisions, s)
    elif kind in ("user", "text") and not question and _CUES["constraint"].search(s):
        _add(ex.constraints, s)
    elif kind != "user" and _CUES["done"].search(s):
        _add(ex.done, s)
    elif kind != "user" and _CUES["next"].search(s):
        _add(ex.next_steps, s)
    elif kind != "user" and _ERROR.search(s):
        _add(ex.errors, s)
    else:
        candidates.append((kind, s))


def score_facts(candidates: list[tuple[str, str]]) -> list[tuple[int, str]]:
    """Scored (kind, sentence) candidates worth keeping, in order; a template repeated among them is boilerplate."""
    templates = Counter(_template(s) for _, s in candidates)
    facts: list[tuple[int, str]] = []
    seen: set[str] = set()
    for kind, s in candidates:
        if s in seen:
            continue
        seen.add(s)
        score = salience(s, kind) - 2 * min(templates[_template(s)] - 1, 2)
        if score >= 3:
            facts.append((score, s))
    return facts
