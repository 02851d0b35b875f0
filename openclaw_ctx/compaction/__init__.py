"""The built-in (legacy) summarising compaction, and the bridge engines call to reach it."""

from openclaw_ctx.compaction.builtin import (
    FALLBACK_SUMMARIZER,
    SUMMARY_TIME_SHARE,
    compact_session,
    delegate_compaction_to_runtime,
    should_compact,
    summary_item_tokens,
)

__all__ = [
    "FALLBACK_SUMMARIZER",
    "SUMMARY_TIME_SHARE",
    "compact_session",
    "delegate_compaction_to_runtime",
    "should_compact",
    "summary_item_tokens",
]
