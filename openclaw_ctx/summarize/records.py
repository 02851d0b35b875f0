"""Reading summarizer input back into messages, and summaries back into their sections.

Three source shapes reach the summarizers: the legacy serialization (``[User]: …``, ``[Assistant tool
calls]: …``), the lossless engine's leaf source (``[2026-03-11 09:30 UTC | user]`` then the body, an
assistant's tool calls as ``name({json})`` lines) and its condensed source (``[earliest - latest]`` then
a child summary). A summary, in the markdown sections or the plain ``Label:`` lines of a lossless node,
reads back into sections, so merging summaries never nests their labels.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass

__all__ = ["FILE_TAGS", "PLAIN_LABELS", "SECTIONS", "Record", "read_summary", "records"]

SECTIONS = (
    "## Goal",
    "## Constraints & Preferences",
    "### Done",
    "### In Progress",
    "### Blocked",
    "## Key Decisions",
    "## Next Steps",
    "## Critical Context",
    "## Exact identifiers",
)
PLAIN_LABELS = (
    ("## Goal", "Request"),
    ("### In Progress", "Current request"),
    ("## Constraints & Preferences", "Constraints"),
    ("## Key Decisions", "Decisions"),
    ("### Done", "Done"),
    ("### Blocked", "Problems"),
    ("## Next Steps", "Next"),
    ("## Critical Context", "Context"),
    ("## Exact identifiers", "Identifiers"),
)
_SECTION_OF_LABEL = {label: section for section, label in PLAIN_LABELS}
# The turn-prefix layout's headers: its "original request" is the split turn's, today's work.
_SECTION_ALIASES = {
    "## Original Request": "### In Progress",
    "## Early Progress": "### Done",
    "## Context for Suffix": "## Critical Context",
    "## Progress": None,
}

_LEGACY_ROLE = re.compile(
    r"^\[(User|Assistant|Assistant tool calls|Assistant error|Tool result|Tool error|Bash|Summary|Custom[^\]]*)\]: ?"
)
_LEGACY_KIND = {
    "User": "user",
    "Assistant": "assistant",
    "Assistant tool calls": "calls",
    "Assistant error": "tool",
    "Tool result": "tool",
    "Tool error": "tool",
    "Bash": "tool",
    "Summary": "summary",
}
_LEAF_HEADER = re.compile(r"^\[(?:unknown time|\d{4}-\d\d-\d\d \d\d:\d\d UTC) \| (\w+)(?: \| tool=([^\]\n]*))?\]$")
_LEAF_KIND = {
    "user": "user",
    "assistant": "assistant",
    "toolResult": "tool",
    "bashExecution": "tool",
    "compactionSummary": "summary",
    "branchSummary": "summary",
}
_SPAN_HEADER = re.compile(r"^\[[\d?][^\]\n]{0,39} - [\d?][^\]\n]{0,39}\]$")
_JSON_CALL = re.compile(r"^([\w.-]+)\((\{.*\})\)$")
_LEGACY_CALL = re.compile(r"([\w.-]+)\((.*?)\)(?:; |$)")
_LEGACY_ARG = re.compile(r"\b(\w+)=(\"(?:[^\"\\]|\\.)*\"|[^,]+)")
_PLAIN_LINE = re.compile(r"^(" + "|".join(re.escape(label) for _, label in PLAIN_LABELS) + r"):(?: (.*))?$")
_EXPAND_FOOTER = "Expand for details about: "
_FILES = "Files: "
FILE_TAGS = re.compile(r"<(read-files|modified-files)>.*?</\1>", re.DOTALL)
_BULLET = re.compile(r"^(?:[-*]\s*(?:\[[ x]\]\s*)?|\d+\.\s*)")
_NESTED_LABEL = re.compile(r"^(?:(?:" + "|".join(re.escape(label) for _, label in PLAIN_LABELS) + r"): )+")


@dataclass
class Record:
    """One message of the source: `kind` is user, assistant, calls, tool, summary or text."""

    kind: str
    text: str
    calls: list[tuple[str, dict[str, object]]] | None = None


def records(source: str) -> list[Record]:
    """The messages of a summarizer source, in order, whichever of the three shapes it has."""
    out: list[Record] = []
    previous_blank = True
    for line in source.splitlines():
        legacy = _LEGACY_ROLE.match(line)
        header = None if legacy else _LEAF_HEADER.match(line)
        if legacy:
            out.append(Record(_LEGACY_KIND.get(legacy.group(1), "text"), line[legacy.end() :]))
        elif header:
            out.append(Record(_LEAF_KIND.get(header.group(1), "text"), ""))
        elif previous_blank and _SPAN_HEADER.match(line):
            out.append(Record("summary", ""))
        elif out:
            out[-1].text = f"{out[-1].text}\n{line}" if out[-1].text else line
        elif line.strip():
            out.append(Record("text", line))
        previous_blank = not line.strip()
    result: list[Record] = []
    for record in out:
        result.extend(_split_calls(record))
    return result


def _split_calls(record: Record) -> list[Record]:
    """An assistant message's tool calls as their own record, parsed into (name, arguments)."""
    if record.kind == "calls":
        return [Record("calls", record.text, _legacy_calls(record.text))]
    if record.kind != "assistant":
        return [record]
    prose: list[str] = []
    calls: list[tuple[str, dict[str, object]]] = []
    for line in record.text.splitlines():
        m = _JSON_CALL.match(line.strip())
        args = _json_object(m.group(2)) if m else None
        if m and args is not None:
            calls.append((m.group(1), args))
        else:
            prose.append(line)
    split = [Record("assistant", "\n".join(prose))] if any(p.strip() for p in prose) else []
    return split + ([Record("calls", record.text, calls)] if calls else [])


def _json_object(text: str) -> dict[str, object] | None:
    try:
        value = json.loads(text)
    except ValueError:
        return None
    return value if isinstance(value, dict) else None


def _legacy_calls(text: str) -> list[tuple[str, dict[str, object]]]:
    calls: list[tuple[str, dict[str, object]]] = []
    for m in _LEGACY_CALL.finditer(text):
        args: dict[str, object] = {}
        for a in _LEGACY_ARG.finditer(m.group(2)):
            raw = a.group(2).strip()
            try:
                args[a.group(1)] = json.loads(raw)
            except ValueError:
                args[a.group(1)] = raw.strip('"')
        calls.append((m.group(1), args))
    return calls


def read_summary(summary: str) -> dict[str, list[str]]:
    """A summary's items by section (markdown headers or plain labels); loose prose goes to Critical Context."""
    sections: dict[str, list[str]] = {}
    current = "## Critical Context"
    for raw in FILE_TAGS.sub("", summary).splitlines():
        line = raw.strip()
        if not line or line in ("---", "- (none)", "(none)", "(unknown)") or line.startswith("**Turn Context"):
            continue
        if line.startswith("#"):
            alias = _SECTION_ALIASES.get(line, line if line in SECTIONS else "## Critical Context")
            current = alias or current
            continue
        if line.startswith(_EXPAND_FOOTER):
            continue
        if line.startswith(_FILES):
            files = [f for f in line[len(_FILES) :].split(", ") if f.strip() and f != "none"]
            sections.setdefault("## Exact identifiers", []).extend(files)
            continue
        plain = _PLAIN_LINE.match(line)
        if plain:
            current = _SECTION_OF_LABEL[plain.group(1)]
            rest = _NESTED_LABEL.sub("", plain.group(2) or "")
            # A v1 node joined a label's items with "; " on one line; identifiers are always ", "-joined.
            items = rest.split("; ") if rest else []
        else:
            items = [_NESTED_LABEL.sub("", _BULLET.sub("", line))]
        if current == "## Exact identifiers":
            items = [i for item in items for i in item.split(", ")]
        sections.setdefault(current, []).extend(i.strip() for i in items if i.strip())
    return sections
