"""Exact identifiers in free text: paths, URLs, hosts and ports, ids, hashes, versions, constants.

An identifier is something a later turn may need verbatim and a paraphrase would break. Plain
numbers are not identifiers (a year, a line number, a count, a piece of a phone number) unless
they are long or named by the word before them ("ticket 1234567", "PR #482"); backticked text
counts only when it is shaped like code, not a phrase someone quoted.
"""

from __future__ import annotations

import re

__all__ = ["extract_identifiers", "strip_noise"]

_NOISE = re.compile(r"\[\.\.\. \d+ more characters truncated\]|\[Large \w+ \(~\d+K tokens\) omitted from summary\]")
_LABELLED_NUMBER = (
    r"(?:ticket|issue|bug|pr|pull request|order|invoice|build|job|run|pid|port|id|case|incident|account|"
    r"booking|reservation|confirmation|tracking|flight|room|no\.?|number)"
)
_PATTERNS = [
    re.compile(r"\b(?:https?|wss?|ftp|file)://[^\s<>\"'`)\]]+"),
    re.compile(r"(?<![\w.+-])[\w.+-]+@[A-Za-z0-9-]+(?:\.[A-Za-z0-9-]+)*\.[A-Za-z]{2,}\b"),
    re.compile(r"\b[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}\b"),
    re.compile(r"\b(?:localhost|(?:\d{1,3}\.){3}\d{1,3}|[A-Za-z0-9-]+(?:\.[A-Za-z0-9-]+)+):\d{2,5}\b"),
    re.compile(r"\b(?:\d{1,3}\.){3}\d{1,3}\b"),
    re.compile(r"(?<![\w/:.@-])(?:~|\.{1,2})?/?(?:[\w.@+-]+/)+[\w.@+-]+"),
    re.compile(
        r"\b[\w-]+\.(?:py|pyi|ts|tsx|js|jsx|mjs|json|jsonl|md|toml|yaml|yml|txt|sql|sh|rs|go|java|rb|c|h|cc|cpp|"
        r"css|html|lock|cfg|ini|log|csv|db|env|xml|proto)\b"
    ),
    re.compile(r"(?<![\w.])v?\d+\.\d+\.\d+(?:[-+][\w.]+)?\b"),
    re.compile(r"\b0x[0-9a-fA-F]{4,}\b|\b(?=[0-9a-fA-F]*\d)(?=[0-9a-fA-F]*[a-fA-F])[0-9a-fA-F]{7,}\b"),
    re.compile(r"\b[A-Z][A-Z0-9]*(?:_[A-Z0-9]+)+\b"),
    re.compile(r"(?<![\w#])#\d{2,}\b"),
    re.compile(rf"(?i:\b{_LABELLED_NUMBER}\s*[:#]?\s*)(\d{{3,}})\b"),
    re.compile(r"(?<![\w.,+-])\d{6,}(?![\w.,]\d)"),
    re.compile(r"`([^`\s]{2,80})`"),
]
# Backticked text is an identifier when it looks like code: a separator (snake_case included), a digit,
# camelCase, or an all-caps constant.
_CODE_SHAPED = re.compile(r"[._/:=-]|\d|[a-z][A-Z]|^[A-Z][A-Z0-9]{3,}$")
_CALL_ONLY = re.compile(r"^[\w.]+\($")


def strip_noise(text: str) -> str:
    """The text without the truncation markers serializers insert."""
    return _NOISE.sub(" ", text)


def _plausible_path(value: str, raw: str) -> bool:
    if "://" in raw or value.startswith(("/", "~", "./", "../")):
        return True
    return value.count("/") >= 2 or "." in value.rsplit("/", 1)[-1]


def _keep(value: str, raw: str) -> bool:
    if len(value) < 2:
        return False
    if raw.startswith("`"):
        return bool(_CODE_SHAPED.search(value)) and not _CALL_ONLY.match(value)
    return "/" not in value or _plausible_path(value, raw)


def extract_identifiers(text: str) -> list[str]:
    """Exact identifiers in `text`, first-seen order, without overlaps."""
    text = strip_noise(text)
    spans: list[tuple[int, int, str]] = []
    for pattern in _PATTERNS:
        for m in pattern.finditer(text):
            value = (m.group(1) if m.groups() else m.group(0)).rstrip(".,;:!?'\"")
            if _keep(value, m.group(0)):
                start = m.start(1) if m.groups() else m.start()
                spans.append((start, start + len(value), value))
    spans.sort(key=lambda s: (s[0], -(s[1] - s[0])))
    out: dict[str, None] = {}
    end = -1
    for start, stop, value in spans:
        if start < end:
            continue
        end = stop
        out.setdefault(value, None)
    return list(out)
