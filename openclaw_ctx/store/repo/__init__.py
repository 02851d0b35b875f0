"""Data access shared by the host and every engine: sessions, messages, context items, summaries.

Plain functions over an :class:`AsyncConnection` (pass the one from ``store.transaction()`` or
``store.read()``). Hot paths use Core statements and column selects, a few awaits per operation,
never a loop of awaits. This face re-exports every public name of the modules beside it, so
``from openclaw_ctx.store import repo; repo.append_messages(...)`` is how callers reach them.
"""

from openclaw_ctx._ids import new_session_id, new_summary_id
from openclaw_ctx._time import utc_now
from openclaw_ctx.store.repo.audit import (
    CompactionRecord,
    commit_compaction,
    last_turn,
    mark_turn_compacted,
    prompt_tokens_after,
    record_compaction,
    record_turn,
)
from openclaw_ctx.store.repo.context import (
    ItemRef,
    ItemType,
    MessageItem,
    ResolvedItem,
    SummaryItem,
    SummaryRef,
    context_item_count,
    context_tokens,
    load_context,
    set_message_item_tokens,
)
from openclaw_ctx.store.repo.conversation import conversation_messages, retract_newest
from openclaw_ctx.store.repo.driver import Driver
from openclaw_ctx.store.repo.engine_state import engine_states, get_engine_state, set_engine_state
from openclaw_ctx.store.repo.messages import (
    AppendResult,
    NewMessage,
    append_messages,
    load_messages,
    message_token_count,
    stored_entry_ids,
)
from openclaw_ctx.store.repo.sessions import (
    HOST_ROTATION_REASON,
    SessionRow,
    active_session,
    ensure_session,
    get_session,
    require_active_session,
    rotate_session,
    session_chain,
    start_fresh_session,
    successor_session_file,
)
from openclaw_ctx.store.repo.summaries import (
    NewSummary,
    SummaryProvenance,
    discard_unpublished_summaries,
    insert_summary,
    latest_summary,
)
from openclaw_ctx.store.repo.turns import (
    TurnCommit,
    commit_host_turn,
    commit_turn,
    turn_key,
    turn_messages,
)

__all__ = [
    "HOST_ROTATION_REASON",
    "discard_unpublished_summaries",
    "set_message_item_tokens",
    "AppendResult",
    "CompactionRecord",
    "Driver",
    "ItemRef",
    "ItemType",
    "MessageItem",
    "NewMessage",
    "NewSummary",
    "ResolvedItem",
    "SessionRow",
    "SummaryItem",
    "SummaryProvenance",
    "SummaryRef",
    "active_session",
    "append_messages",
    "commit_compaction",
    "context_item_count",
    "context_tokens",
    "conversation_messages",
    "ensure_session",
    "engine_states",
    "get_engine_state",
    "get_session",
    "require_active_session",
    "retract_newest",
    "insert_summary",
    "latest_summary",
    "load_context",
    "load_messages",
    "stored_entry_ids",
    "mark_turn_compacted",
    "message_token_count",
    "new_session_id",
    "new_summary_id",
    "record_compaction",
    "record_turn",
    "TurnCommit",
    "commit_turn",
    "commit_host_turn",
    "turn_key",
    "turn_messages",
    "last_turn",
    "prompt_tokens_after",
    "rotate_session",
    "session_chain",
    "set_engine_state",
    "start_fresh_session",
    "successor_session_file",
    "utc_now",
]
