"""What the extractive summarizer reads out of a serialized conversation: cue sentences, identifiers, errors.

The input is the text callers hand to summarizers (``[User]: …``, ``[Assistant]: …``,
``[Assistant tool calls]: …``, ``[Tool result]: …``); the output is an :class:`Extract`, which
:mod:`openclaw_ctx.summarize.extractive` lays out as the structured summary.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

__all__ = ["MAX_LINE_CHARS", "Extract", "clip", "extract", "extract_errors", "extract_identifiers"]

MAX_LINE_CHARS = 280

_ROLE = re.compile(
    r"^\[(User|Assistant|Assistant tool calls|Assistant error|Tool result|Tool error|Bash|Summary|Custom[^\]]*)\]: ?"
)
_NOISE = re.compile(r"\[\.\.\. \d+ more characters truncated\]|\[Large \w+ \(~\d+K tokens\) omitted from summary\]")
_ID_PATTERNS = [
    re.compile(r"\b(?:https?|wss?|ftp|file)://[^\s<>\"'`)\]]+"),
    re.compile(r"\b[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}\b"),
    re.compile(r"\b(?:localhost|(?:\d{1,3}\.){3}\d{1,3}|[A-Za-z0-9-]+(?:\.[A-Za-z0-9-]+)+):\d{2,5}\b"),
    re.compile(r"\b(?:\d{1,3}\.){3}\d{1,3}\b"),
    re.compile(r"(?<![\w/:.@-])(?:~|\.{1,2})?/?(?:[\w.@+-]+/)+[\w.@+-]+"),
    re.compile(
        r"\b[\w-]+\.(?:py|pyi|ts|tsx|js|jsx|mjs|json|jsonl|md|toml|yaml|yml|txt|sql|sh|rs|go|java|rb|c|h|cc|cpp|"
        r"css|html|lock|cfg|ini|log|csv|db|env|xml|proto)\b"
    ),
    re.compile(r"\b0x[0-9a-fA-F]{4,}\b|\b(?=[0-9a-fA-F]*\d)(?=[0-9a-fA-F]*[a-fA-F])[0-9a-fA-F]{8,}\b"),
    re.compile(r"\b[A-Z][A-Z0-9]*(?:_[A-Z0-9]+)+\b"),
    re.compile(r"(?<![\w.])\d{4,}(?:\.\d+)?(?![\w])"),
    re.compile(r"`([^`\n]{2,80})`"),
]
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
_SENTENCES = re.compile(r"(?<=[.!?])\s+|\n+")
_PRIMARY_ARGS = ("path", "file_path", "filePath", "file", "command", "cmd", "url", "query", "pattern", "name")
_CALL = re.compile(r"([\w.-]+)\((.*?)\)(?:; |$)")


def clip(text: str, limit: int = MAX_LINE_CHARS) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1].rstrip() + "…"


def extract_identifiers(text: str) -> list[str]:
    """Exact identifiers in `text`, first-seen order, without overlaps (paths, URLs, ids, numbers, …)."""
    text = _NOISE.sub(" ", text)
    spans: list[tuple[int, int, str]] = []
    for pattern in _ID_PATTERNS:
        for m in pattern.finditer(text):
            value = (m.group(1) if m.groups() else m.group(0)).rstrip(".,;:!?'\"")
            if "/" in value and not _plausible_path(value, m.group(0)):
                continue
            spans.append((m.start(), m.start() + len(value), value))
    spans.sort(key=lambda s: (s[0], -(s[1] - s[0])))
    out: dict[str, None] = {}
    end = -1
    for start, stop, value in spans:
        if start < end or len(value) < 2:
            continue
        end = stop
        out.setdefault(value, None)
    return list(out)


def _plausible_path(value: str, raw: str) -> bool:
    if "://" in raw or value.startswith(("/", "~", "./", "../")):
        return True
    return value.count("/") >= 2 or "." in value.rsplit("/", 1)[-1]


def extract_errors(text: str) -> list[str]:
    """Error lines (exception names, `error:`, failing exit codes), clipped, first-seen order."""
    found: dict[str, None] = {}
    for m in _ERROR.finditer(_NOISE.sub(" ", text)):
        found.setdefault(clip(m.group(0), 220), None)
    return list(found)


@dataclass
class Extract:
    """What the heuristics found in one source text."""

    requests: list[str] = field(default_factory=list)
    constraints: list[str] = field(default_factory=list)
    decisions: list[str] = field(default_factory=list)
    done: list[str] = field(default_factory=list)
    next_steps: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    tools: dict[str, list[str]] = field(default_factory=dict)
    identifiers: list[str] = field(default_factory=list)
    last_statement: str | None = None


def _records(source: str) -> list[tuple[str, str]]:
    records: list[tuple[str, str]] = []
    for line in source.splitlines():
        m = _ROLE.match(line)
        if m:
            records.append((m.group(1), line[m.end() :]))
        elif records:
            role, text = records[-1]
            records[-1] = (role, text + "\n" + line)
        elif line.strip():
            records.append(("Text", line))
    return records


def _sentences(text: str) -> list[str]:
    return [clip(s) for s in _SENTENCES.split(_NOISE.sub(" ", text)) if len(s.strip()) > 3]


def _add(bucket: list[str], value: str) -> None:
    if value not in bucket:
        bucket.append(value)


def _tool_calls(text: str, tools: dict[str, list[str]]) -> None:
    for m in _CALL.finditer(text):
        name, args = m.group(1), m.group(2)
        primary = ""
        for key in _PRIMARY_ARGS:
            a = re.search(rf"\b{key}=(\"(?:[^\"\\]|\\.)*\"|[^,]+)", args)
            if a:
                primary = a.group(1).strip('"')
                break
        seen = tools.setdefault(name, [])
        if primary and primary not in seen:
            seen.append(clip(primary, 120))


def extract(source: str) -> Extract:
    """Run the heuristics over a serialized conversation (or any plain text)."""
    ex = Extract(identifiers=extract_identifiers(source))
    for role, text in _records(source):
        if role == "Assistant tool calls":
            _tool_calls(text, ex.tools)
            continue
        if role in ("Tool result", "Tool error", "Bash", "Assistant error"):
            for err in extract_errors(text)[:3]:
                _add(ex.errors, err)
            continue
        sentences = _sentences(text)
        if not sentences:
            continue
        if role == "User":
            _add(ex.requests, clip(" ".join(sentences[:2])))
        for s in sentences:
            if _CUES["decision"].search(s):
                _add(ex.decisions, s)
            elif role in ("User", "Text") and _CUES["constraint"].search(s):
                _add(ex.constraints, s)
            elif role != "User" and _CUES["done"].search(s):
                _add(ex.done, s)
            elif role != "User" and _CUES["next"].search(s):
                _add(ex.next_steps, s)
            if role != "User" and _ERROR.search(s):
                _add(ex.errors, s)
        if role in ("Assistant", "Text"):
            ex.last_statement = sentences[-1]
    return ex
