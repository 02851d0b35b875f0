"""The Summarizer protocol: one request in, one summary out.

Callers (the built-in compaction, the lossless engine) render the full prompt themselves and also
pass the raw material, so a model-backed summarizer sends `system_prompt` + `prompt`, while the
embedded extractive summarizer works from `source_text` / `previous_summary` directly.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal, Protocol, runtime_checkable

__all__ = ["Summarizer", "SummaryKind", "SummaryOutput", "SummaryRequest", "reset_spend_guard"]

SummaryKind = Literal["history", "turn_prefix", "merge", "leaf", "condensed"]


@dataclass(frozen=True)
class SummaryRequest:
    """Everything a summarizer may need for one call."""

    kind: SummaryKind
    source_text: str
    """The serialized conversation segment (or the summaries being condensed)."""
    target_tokens: int
    system_prompt: str = ""
    prompt: str = ""
    """The fully rendered user prompt (model-backed summarizers send this)."""
    previous_summary: str | None = None
    custom_instructions: str | None = None
    depth: int = 0
    aggressive: bool = False
    timeout_s: float | None = None
    metadata: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class SummaryOutput:
    """A summary and who made it (stored on the summary row)."""

    text: str
    summarizer: str
    """e.g. ``extractive-v2`` or ``openai``; named honestly in output and in the row."""
    model: str | None = None
    input_tokens: int | None = None
    output_tokens: int | None = None


@runtime_checkable
class Summarizer(Protocol):
    """Turns a SummaryRequest into a SummaryOutput.

    Raises:
        SummarizerAuthError: credentials rejected (callers write nothing).
        SummarizerError: any other failure (callers fall back to the deterministic summary).
    """

    name: str

    async def summarize(self, request: SummaryRequest) -> SummaryOutput:
        """Summarise `request`."""
        ...


def reset_spend_guard(summarizer: Summarizer, session_key: str | None) -> None:
    """Clear the provider spend guard of `session_key`, if `summarizer` has one.

    A manual ``/compact`` does this: it is the operator's explicit call, not a runaway loop.
    """
    reset = getattr(summarizer, "reset_spend_guard", None)
    if callable(reset):
        reset(session_key)
