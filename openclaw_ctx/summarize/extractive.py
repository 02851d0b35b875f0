"""The embedded summarizer: deterministic, offline, no model.

It reads any summarizer source (the legacy serialization, the lossless engine's leaf and condensed
sources; see :mod:`openclaw_ctx.summarize.records`), picks sentences by cues (requests, constraints,
decisions, completed work, errors) and keeps *facts*: prose sentences scored by who said them and how
specific they are. It keeps the identifiers said in prose or passed to tools ahead of those seen only
in tool output, merges with the previous summary (re-scoring its facts on the same scale), and trims
the lowest-value lines until the result fits the target. It is named ``extractive-v2`` wherever it is
used (``extractive-v1`` kept every number and backticked phrase and dropped unmarked facts).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from openclaw_ctx.summarize.base import SummaryOutput, SummaryRequest
from openclaw_ctx.summarize.extract import Extract, extract, extract_identifiers, score_facts
from openclaw_ctx.summarize.fallback import truncate_to_tokens
from openclaw_ctx.summarize.records import FILE_TAGS, PLAIN_LABELS, SECTIONS, read_summary
from openclaw_ctx.tokens import TokenCounter, get_counter

__all__ = ["ExtractiveSummarizer"]

NAME = "extractive-v2"
SOURCE_SHARE = 0.8


# --- the structured summary -------------------------------------------------------------------------

_SAID_ID = 100
"""The priority of identifiers said in prose or passed to tools (`_fit` caps how many keep it)."""
_PREFIX = {"### Done": "- [x] ", "### In Progress": "- [ ] "}
_CONTINUE = "Continue with the latest request:"


@dataclass(order=True)
class _Line:
    priority: int
    seq: int
    section: str = field(compare=False)
    text: str = field(compare=False)


def _fact_priority(score: int) -> int:
    """Facts rank by salience, from just above completed work to just below the current request."""
    return max(45, min(84, 40 + 4 * score))


def _still_identifier(value: str) -> bool:
    """An identifier a previous summary listed that today's rules still call one (not a year, not a phrase)."""
    return extract_identifiers(value) == [value] or extract_identifiers(f"`{value}`") == [value]


def _plan_lines(ex: Extract, previous: dict[str, list[str]], prior_ids: list[str]) -> list[_Line]:
    lines: list[_Line] = []
    # "Continue with …" is derived from the latest request each time, never carried.
    previous = {k: [t for t in v if not t.startswith(_CONTINUE)] for k, v in previous.items()}

    def put(section: str, texts: list[str], priority: int) -> None:
        for t in texts:
            lines.append(_Line(priority, len(lines), section, t))

    # The session's original goal outlives every update; later requests show up as current work.
    goals = previous.get("## Goal", []) or ex.requests[:1]
    put("## Goal", goals[:1], 95)
    for score, goal in score_facts([("user", g) for g in goals[1:]]):
        put("## Goal", [goal], _fact_priority(score) - 10)
    put("## Constraints & Preferences", previous.get("## Constraints & Preferences", []) + ex.constraints, 65)
    put("### Done", previous.get("### Done", []) + ex.done, 40)
    put("### In Progress", previous.get("### In Progress", [])[-2:] if not ex.requests else [], 50)
    tools = [f"{name}: {', '.join(args[:6])}" if args else name for name, args in ex.tools.items()]
    put("### Done", tools, 35)
    if ex.requests:
        put("### In Progress", [ex.requests[-1]], 85)
    put("### Blocked", previous.get("### Blocked", []) + ex.errors[-5:], 55)
    put("## Key Decisions", previous.get("## Key Decisions", []) + ex.decisions, 60)
    steps = ex.next_steps[-3:] or previous.get("## Next Steps", [])
    if ex.requests:
        steps = [*steps, f"{_CONTINUE} {ex.requests[-1]}"]
    put("## Next Steps", steps, 50)
    # Facts carried from earlier summaries compete with new ones on the same salience scale.
    for score, fact in score_facts([("user", f) for f in previous.get("## Critical Context", [])]):
        put("## Critical Context", [fact], _fact_priority(score))
    put("## Critical Context", ex.errors[:5] + ([ex.last_statement] if ex.last_statement else []), 70)
    for score, fact in ex.facts:
        put("## Critical Context", [fact], _fact_priority(score))
    # An identifier the goal or the current request already spells out costs nothing to keep.
    always = " ".join([*goals[:1], *ex.requests[-1:]])
    ids = [i for i in dict.fromkeys([i for i in prior_ids if _still_identifier(i)] + ex.identifiers) if i not in always]
    put("## Exact identifiers", ids, _SAID_ID)
    listed = set(ids)
    put("## Exact identifiers", [i for i in ex.output_identifiers if i not in listed], 45)
    return lines


def _group(lines: list[_Line], order: Sequence[str], mapping: dict[str, str] | None = None) -> dict[str, list[str]]:
    """Line texts by (mapped) section in source order, each text shown once, in the first section that has it."""
    by_section: dict[str, list[str]] = {s: [] for s in order}
    for line in sorted(lines, key=lambda x: x.seq):
        by_section[mapping[line.section] if mapping else line.section].append(line.text)
    shown: set[str] = set()
    for section in order:
        items = list(dict.fromkeys(t for t in by_section[section] if t not in shown))
        shown.update(items)
        by_section[section] = items
    return by_section


def _render(lines: list[_Line], *, show_empty: bool) -> str:
    by_section = _group(lines, SECTIONS)
    out: list[str] = []
    for section in SECTIONS:
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


def _without_repeats(lines: list[_Line]) -> list[_Line]:
    """Context lines the goal already contains add nothing: a history summary's goal is carried into every
    later one. (A turn prefix's or a node's first request is not, so there the fact stays on its own line.)"""
    goal = [x.text for x in lines if x.section == "## Goal" and x.priority >= 95]
    return [x for x in lines if x.section != "## Critical Context" or not any(x.text in g for g in goal)]


def _fit(lines: list[_Line], target: int, counter: TokenCounter, render: Callable[[list[_Line], bool], str]) -> str:
    """Drop the lowest-value lines (oldest first within a priority) until the rendering fits."""
    cost = {id(line): counter.count(line.text) + 3 for line in lines}
    # Identifiers said in prose outrank everything, the newest up to a third of the target; older
    # ones beyond that rank with the facts, so a long history of paths cannot crowd out what was said.
    share = 0
    said = [x for x in lines if x.section == "## Exact identifiers" and x.priority == _SAID_ID]
    for line in sorted(said, key=lambda x: -x.seq):
        share += cost[id(line)]
        if share > target / 3:
            line.priority = 62
    # Empty sections are shown only when their headers leave room for content.
    show_empty = counter.count(render([], True)) <= target // 4
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
        groups = _group(lines, list(dict.fromkeys(self.mapping.values())), self.mapping)
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

    def __init__(self, files: list[str], topics: list[str]) -> None:
        self.files = files
        self.topics = topics

    def __call__(self, lines: list[_Line], show_empty: bool) -> str:
        by_section = _group(lines, [section for section, _ in PLAIN_LABELS])
        out = []
        for section, label in PLAIN_LABELS:
            items = by_section.get(section)
            if not items:
                continue
            if section == "## Exact identifiers":
                out.append(f"{label}: {', '.join(items)}")
            else:
                out += [f"{label}:", *(f"- {t}" for t in items)]
        out.append("Files: " + (", ".join(self.files) if self.files else "none"))
        out.append("Expand for details about: " + (", ".join(self.topics) if self.topics else "this segment"))
        return "\n".join(out)


class ExtractiveSummarizer:
    """The embedded default summarizer (`extractive-v2`): deterministic, offline, no model."""

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
        if request.kind in ("leaf", "condensed"):
            # A node must shrink what it covers; an extract as long as its source is no summary.
            target = min(target, max(48, int(SOURCE_SHARE * counter.count(request.source_text))))
        ex = extract(request.source_text)
        previous = request.previous_summary or ""
        earlier = read_summary(previous) if previous else {}
        for section, items in ex.earlier.items():
            earlier.setdefault(section, []).extend(items)
        prior_ids = earlier.pop("## Exact identifiers", []) + extract_identifiers(FILE_TAGS.sub("", previous))
        lines = _plan_lines(ex, earlier, prior_ids)
        if request.kind == "history":
            lines = _without_repeats(lines)
        if request.kind in ("leaf", "condensed"):
            seen = [*ex.identifiers, *ex.output_identifiers, *prior_ids]
            files = [i for i in dict.fromkeys(seen) if "://" not in i and ("/" in i or re.search(r"\.\w{1,5}$", i))]
            files = files[:12]
            topics = list(dict.fromkeys([*ex.tools, *(f.rsplit("/", 1)[-1] for f in files)]))[:10]
            return _fit(lines, target, counter, _Plain(files, topics or ["conversation segment"]))
        layout = _TURN_PREFIX_LAYOUT if request.kind == "turn_prefix" else None
        return _fit(lines, target, counter, _Structured(layout))
