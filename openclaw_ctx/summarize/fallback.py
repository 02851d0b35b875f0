"""The deterministic fallback summary: what is written when no summarizer produced one.

Truncates the source to a token cap (at least 64), replaces directive-shaped sentences (prompt
injection that would otherwise be replayed to the model as a trusted summary) with an omission
marker, and appends markers that `doctor` can find later (lossless-claw §3 "Escalation and fallback").
"""

from __future__ import annotations

import re

from openclaw_ctx.tokens import TokenCounter

__all__ = [
    "DIRECTIVE_MARKER",
    "MIN_FALLBACK_TOKENS",
    "OMISSION_MARKER",
    "deterministic_fallback",
    "is_directive",
    "truncate_to_tokens",
]

MIN_FALLBACK_TOKENS = 64
OMISSION_MARKER = "[directive-shaped content omitted]"
DIRECTIVE_MARKER = "[LCM fallback summary; directive-shaped untrusted content omitted]"

_DIRECTIVES = [
    re.compile(p, re.IGNORECASE)
    for p in (
        r"\b(ignore|disregard|forget|override)\b[^.!?\n]{0,40}\b(previous|prior|above|earlier|all|your)\b"
        r"[^.!?\n]{0,30}\b(instructions?|prompts?|rules|messages|directives|guidelines)\b",
        r"\byou are now\b",
        r"\bsystem prompt\s*:",
        r"\bdo anything now\b",
        r"\bjailbreak",
        r"\bdeveloper mode\b",
        r"\bnew instructions\s*:",
        r"\bact as (an? )?(unrestricted|unfiltered|different)\b",
        r"\bpretend (that )?you\b",
        r"\bfrom now on,? you\b",
        r"<\s*/?\s*(system|instructions?)\s*>",
    )
]
# "DAN" is only a directive in capitals (the jailbreak persona), not the name Dan.
_DAN = re.compile(r"\bDAN\b")
_SENTENCE = re.compile(r"[^.!?\n]*(?:[.!?]+|\n|$)")


def is_directive(sentence: str) -> bool:
    """True when a sentence reads like an instruction aimed at the model rather than content."""
    return bool(_DAN.search(sentence)) or any(p.search(sentence) for p in _DIRECTIVES)


def _strip_directives(text: str) -> tuple[str, bool]:
    parts: list[str] = []
    dropped = False
    for match in _SENTENCE.finditer(text):
        sentence = match.group(0)
        if not sentence:
            continue
        if sentence.strip() and is_directive(sentence):
            dropped = True
            # Collapse consecutive omissions into one marker.
            if not (parts and parts[-1].strip() == OMISSION_MARKER):
                lead = sentence[: len(sentence) - len(sentence.lstrip())]
                parts.append(lead + OMISSION_MARKER + ("\n" if sentence.endswith("\n") else ""))
            continue
        parts.append(sentence)
    return "".join(parts).strip(), dropped


def truncate_to_tokens(text: str, max_tokens: int, counter: TokenCounter) -> str:
    """The longest prefix of `text` (cut at a character) that counts at most `max_tokens`."""
    if max_tokens <= 0:
        return ""
    if counter.count(text) <= max_tokens:
        return text
    lo, hi = 0, len(text)
    # Binary search on the character length: O(log n) counts instead of one per character.
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if counter.count(text[:mid]) <= max_tokens:
            lo = mid
        else:
            hi = mid - 1
    return text[:lo]


def deterministic_fallback(text: str, max_tokens: int, counter: TokenCounter) -> str:
    """A summary that needs no model: cleaned, truncated source plus markers.

    The output never exceeds ``max(max_tokens, 64)`` tokens, markers included, and is the same for
    the same input.

    Args:
        text: The source (serialized conversation or summaries).
        max_tokens: Token cap for the whole output (raised to 64 if smaller).
        counter: Counts tokens.

    Returns:
        The fallback summary, ending with ``[Truncated from N tokens]`` and, when directive-shaped
        sentences were removed, the LCM fallback marker.
    """
    cap = max(MIN_FALLBACK_TOKENS, max_tokens)
    source_tokens = counter.count(text)
    cleaned, dropped = _strip_directives(text)
    markers = [f"[Truncated from {source_tokens} tokens]"]
    if dropped:
        markers.append(DIRECTIVE_MARKER)
    tail = "\n\n" + "\n".join(markers)
    body_budget = max(0, cap - counter.count(tail) - 1)
    body = truncate_to_tokens(cleaned, body_budget, counter).rstrip()
    out = (body + tail) if body else tail.lstrip()
    # Token counts are not additive across a join; trim until the whole fits.
    while counter.count(out) > cap and body:
        body = body[: max(0, len(body) - max(1, len(body) // 20))].rstrip()
        out = (body + tail) if body else tail.lstrip()
    return out
