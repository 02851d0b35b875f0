"""Summarizers: the protocol, the embedded extractive default, the deterministic fallback."""

from __future__ import annotations

from openclaw_ctx.summarize.base import Summarizer, SummaryKind, SummaryOutput, SummaryRequest
from openclaw_ctx.summarize.extractive import ExtractiveSummarizer
from openclaw_ctx.summarize.fallback import deterministic_fallback

__all__ = [
    "ExtractiveSummarizer",
    "Summarizer",
    "SummaryKind",
    "SummaryOutput",
    "SummaryRequest",
    "default_summarizer",
    "deterministic_fallback",
]


def default_summarizer() -> Summarizer:
    """The summarizer used when nothing else is configured: the embedded `extractive-v2`."""
    return ExtractiveSummarizer()
