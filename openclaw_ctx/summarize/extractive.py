"""The embedded summarizer: deterministic, offline, no model.

It reads the serialized conversation (``[User]: …``, ``[Assistant]: …``, ``[Assistant tool calls]: …``,
``[Tool result]: …``), picks sentences by simple cues (requests, constraints, decisions, completed work,
errors), keeps every exact identifier it finds, merges with the previous summary, and trims the
lowest-value lines until the result fits the target. It is named ``extractive-v1`` wherever it is used.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field

from openclaw_ctx.summarize.base import SummaryOutput, SummaryRequest
from openclaw_ctx.summarize.extract import Extract, clip, extract, extract_identifiers
from openclaw_ctx.summarize.fallback import truncate_to_tokens
from openclaw_ctx.tokens import TokenCounter, get_counter

__all__ = ["ExtractiveSummarizer"]

NAME = "extractive-v1"


# --- the structured summary -------------------------------------------------------------------------

_SECTIONS = (
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
_PREFIX = {"### Done": "- [x] ", "### In Progress": "- [ ] "}
_CONTINUE = "Continue with the latest request:"
_FILE_TAGS = re.compile(r"<(read-files|modified-files)>.*?</\1>", re.DOTALL)


@dataclass(order=True)
class _Line:
    priority: int
    seq: int
    section: str = field(compare=False)
    text: str = field(compare=False)


def _parse_previous(summary: str) -> dict[str, list[str]]:
    """Bulleted lines of a previous summary by section; unknown sections go to Critical Context."""
    sections: dict[str, list[str]] = {}
    current = "## Critical Context"
    for raw in _FILE_TAGS.sub("", summary).splitlines():
        line = raw.strip()
        if not line or line == "---" or line == "- (none)":
            continue
        if line.startswith("#"):
            current = line if line in _SECTIONS else "## Critical Context"
            continue
        if line == "## Progress" or line.startswith("**Turn Context"):
            continue
        text = re.sub(r"^(?:[-*]\s*(?:\[[ x]\]\s*)?|\d+\.\s*)", "", line)
        if text:
            sections.setdefault(current, []).append(clip(text))
    return sections


def _plan_lines(ex: Extract, previous: dict[str, list[str]], prior_ids: list[str]) -> list[_Line]:
    lines: list[_Line] = []

    def put(section: str, texts: list[str], priority: int) -> None:
        for t in texts:
            lines.append(_Line(priority, len(lines), section, t))

    # The session's original goal outlives every update; later requests show up as current work.
    goals = previous.get("## Goal", []) or ex.requests[:1]
    put("## Goal", goals[:1], 95)
    put("## Goal", goals[1:], 75)
    put("## Constraints & Preferences", previous.get("## Constraints & Preferences", []) + ex.constraints, 65)
    put("### Done", previous.get("### Done", []) + ex.done, 40)
    put("### In Progress", previous.get("### In Progress", [])[-2:] if not ex.requests else [], 50)
    tools = [f"{name}: {', '.join(args[:6])}" if args else name for name, args in ex.tools.items()]
    put("### Done", tools, 35)
    if ex.requests:
        put("### In Progress", [ex.requests[-1]], 85)
    put("### Blocked", previous.get("### Blocked", []) + ex.errors[-5:], 55)
    put("## Key Decisions", previous.get("## Key Decisions", []) + ex.decisions, 60)
    steps = ex.next_steps[-3:] or [s for s in previous.get("## Next Steps", []) if not s.startswith(_CONTINUE)]
    if ex.requests:
        steps = [*steps, f"{_CONTINUE} {ex.requests[-1]}"]
    put("## Next Steps", steps, 50)
    put("## Critical Context", previous.get("## Critical Context", []), 45)
    put("## Critical Context", ex.errors[:5] + ([ex.last_statement] if ex.last_statement else []), 70)
    ids = list(dict.fromkeys(prior_ids + ex.identifiers))
    put("## Exact identifiers", ids, 100)
    return lines


def _render(lines: list[_Line], *, show_empty: bool) -> str:
    by_section: dict[str, list[str]] = {s: [] for s in _SECTIONS}
    for line in sorted(lines, key=lambda x: x.seq):
        if line.text not in by_section[line.section]:
            by_section[line.section].append(line.text)
    out: list[str] = []
    for section in _SECTIONS:
        items = by_section[section]
        if not items and not show_empty:
            continue
        if section == "### Done":
            out.append("## Progress")
        out.append(section)
        if section == "## Goal":
            out.extend(items or ["(unknown)"])
        elif section == "## Next Steps":
            out.extend(f"{i}. {t}" for i, t in enumerate(items, 1)) if items else out.append("- (none)")
        else:
            prefix = _PREFIX.get(section, "- ")
            out.extend(prefix + t for t in items) if items else out.append("- (none)")
        out.append("")
    return "\n".join(out).strip()


def _fit(lines: list[_Line], target: int, counter: TokenCounter, render: Callable[[list[_Line], bool], str]) -> str:
    """Drop the lowest-value lines (oldest first within a priority) until the rendering fits."""
    cost = {id(line): counter.count(line.text) + 3 for line in lines}
    # Identifiers outrank everything, up to 60% of the target; older ones beyond that rank just below
    # the goal and the current request, so a long history cannot crowd those out.
    share = 0
    for line in sorted((x for x in lines if x.section == "## Exact identifiers"), key=lambda x: -x.seq):
        share += cost[id(line)]
        if share > 0.6 * target:
            line.priority = 80
    # Empty sections are shown only when their headers leave room for content.
    show_empty = counter.count(render([], True)) <= target // 2
    kept = sorted(lines)
    total = counter.count(render([], show_empty)) + sum(cost.values())
    dropped = 0
    while dropped < len(kept) and total > target:
        total -= cost[id(kept[dropped])]
        dropped += 1
    kept = kept[dropped:]
    text = render(kept, show_empty)
    while counter.count(text) > target and kept:
        kept = kept[1:]
        text = render(kept, show_empty and bool(kept))
    if counter.count(text) > target:
        text = truncate_to_tokens(text, target, counter)
    return text


class _Structured:
    """Markdown sections; `mapping` folds the history sections into another layout (the turn prefix)."""

    def __init__(self, mapping: dict[str, str] | None = None) -> None:
        self.mapping = mapping

    def __call__(self, lines: list[_Line], show_empty: bool) -> str:
        if self.mapping is None:
            return _render(lines, show_empty=show_empty)
        groups: dict[str, list[str]] = {s: [] for s in dict.fromkeys(self.mapping.values())}
        for line in sorted(lines, key=lambda x: x.seq):
            bucket = groups[self.mapping[line.section]]
            if line.text not in bucket:
                bucket.append(line.text)
        out: list[str] = []
        for section, items in groups.items():
            if items or show_empty:
                out += [section, *(f"- {t}" for t in items or ["(none)"]), ""]
        return "\n".join(out).strip()


_TURN_PREFIX_LAYOUT = {
    "## Goal": "## Original Request",
    "### In Progress": "## Original Request",
    "## Constraints & Preferences": "## Early Progress",
    "### Done": "## Early Progress",
    "## Key Decisions": "## Early Progress",
    "### Blocked": "## Early Progress",
    "## Next Steps": "## Context for Suffix",
    "## Critical Context": "## Context for Suffix",
    "## Exact identifiers": "## Context for Suffix",
}


class _Plain:
    """Plain text for the lossless engine's leaf/condensed nodes, ending with the expand footer."""

    LABELS = (
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

    def __init__(self, files: list[str], topics: list[str]) -> None:
        self.files = files
        self.topics = topics

    def __call__(self, lines: list[_Line], show_empty: bool) -> str:
        by_section: dict[str, list[str]] = {}
        for line in sorted(lines, key=lambda x: x.seq):
            bucket = by_section.setdefault(line.section, [])
            if line.text not in bucket:
                bucket.append(line.text)
        out = []
        for section, label in self.LABELS:
            items = by_section.get(section)
            if items:
                sep = ", " if section == "## Exact identifiers" else "; "
                out.append(f"{label}: {sep.join(items)}")
        out.append("Files: " + (", ".join(self.files) if self.files else "none"))
        out.append("Expand for details about: " + (", ".join(self.topics) if self.topics else "this segment"))
        return "\n".join(out)


class ExtractiveSummarizer:
    """The embedded default summarizer (`extractive-v1`): deterministic, offline, no model."""

    name = NAME

    def __init__(self, counter: TokenCounter | None = None) -> None:
        self._counter = counter

    @property
    def counter(self) -> TokenCounter:
        """The token counter used to fit the target length."""
        return self._counter or get_counter()

    async def summarize(self, request: SummaryRequest) -> SummaryOutput:
        """Summarise `request.source_text`, merged with `request.previous_summary`, within `target_tokens`."""
        counter = self.counter
        text = self.summarize_text(request)
        return SummaryOutput(
            text=text,
            summarizer=NAME,
            input_tokens=counter.count(request.source_text),
            output_tokens=counter.count(text),
        )

    def summarize_text(self, request: SummaryRequest) -> str:
        """The synchronous core of :meth:`summarize`."""
        counter = self.counter
        target = max(32, request.target_tokens)
        ex = extract(request.source_text)
        previous = request.previous_summary or ""
        prior_sections = _parse_previous(previous) if previous else {}
        prior_ids = prior_sections.pop("## Exact identifiers", []) + extract_identifiers(_FILE_TAGS.sub("", previous))
        lines = _plan_lines(ex, prior_sections, prior_ids)
        if request.kind in ("leaf", "condensed"):
            files = [i for i in ex.identifiers if "://" not in i and ("/" in i or re.search(r"\.\w{1,5}$", i))][:12]
            topics = list(dict.fromkeys([*ex.tools, *(f.rsplit("/", 1)[-1] for f in files)]))[:10]
            return _fit(lines, target, counter, _Plain(files, topics or ["conversation segment"]))
        layout = _TURN_PREFIX_LAYOUT if request.kind == "turn_prefix" else None
        return _fit(lines, target, counter, _Structured(layout))
