"""Statistics of one session key: context tokens per turn and compactions over time.

The runtime writes one `turns` row per turn (the prompt tokens it sent the model, budget, compacted
flag); the series is `turns.prompt_tokens`, the figure `replay`'s report shows too. Turns recorded
before that column (or that never reached the model) have none and are counted, not drawn. History
that never ran through the runtime (imported transcripts) has no turn rows; its series then comes
from the `compactions` table: the context size before and after each compaction.
"""

from __future__ import annotations

import statistics
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, SerializerFunctionWrapHandler, computed_field, model_serializer
from pydantic.alias_generators import to_camel
from sqlalchemy import text

from openclaw_ctx.errors import NotFoundError
from openclaw_ctx.store.store import Store

__all__ = ["CompactionPoint", "KeyStats", "TurnPoint", "key_stats"]


class TurnPoint(BaseModel):
    """One turn: what the model was sent, against which budget, and whether it compacted."""

    model_config = ConfigDict(frozen=True)

    turn: int
    session_id: str
    assembled_tokens: int
    prompt_tokens: int | None
    """The largest prompt the turn's model calls were sent (None: recorded before the column, or no call)."""
    budget: int
    compacted: bool
    at: str


class CompactionPoint(BaseModel):
    """One compaction that changed the context."""

    model_config = ConfigDict(frozen=True)

    at: str
    trigger: str
    engine_id: str
    tokens_before: int
    tokens_after: int | None
    summaries_created: int


class KeyStats(BaseModel):
    """Everything `openclaw-ctx stats` shows for a key; its JSON (:meth:`to_json`) has camelCase keys."""

    model_config = ConfigDict(frozen=True, alias_generator=to_camel, populate_by_name=True)

    session_key: str
    source: Literal["turns", "compactions"]
    engine_id: str | None = Field(alias="engine")
    sessions: int
    messages: int
    stored_tokens: int
    context_tokens: int
    summaries: int
    max_depth: int | None
    turns: list[TurnPoint] = Field(default_factory=list)
    compactions: list[CompactionPoint] = Field(default_factory=list)

    @computed_field  # type: ignore[prop-decorator]
    @property
    def series(self) -> list[int]:
        """Prompt tokens sent per turn (turns with the figure); without turn rows, compactions, then now."""
        if self.source == "turns":
            return [t.prompt_tokens for t in self.turns if t.prompt_tokens is not None]
        points: list[int] = []
        for c in self.compactions:
            points.append(c.tokens_before)
            if c.tokens_after is not None:
                points.append(c.tokens_after)
        return [*points, self.context_tokens]

    @property
    def compacted(self) -> list[bool]:
        """Per point of :attr:`series`: did a compaction happen there."""
        if self.source == "turns":
            return [t.compacted for t in self.turns if t.prompt_tokens is not None]
        marks: list[bool] = []
        for c in self.compactions:
            marks += [False, True] if c.tokens_after is not None else [True]
        return [*marks, False]

    @computed_field  # type: ignore[prop-decorator]
    @property
    def turns_without_prompt_tokens(self) -> int:
        """Turns with no `prompt_tokens` (recorded before revision 0005, or the model was never called)."""
        return sum(1 for t in self.turns if t.prompt_tokens is None)

    @computed_field  # type: ignore[prop-decorator]
    @property
    def series_summary(self) -> dict[str, int]:
        """Min, median and max of the series."""
        values = self.series
        if not values:
            return {"min": 0, "median": 0, "max": 0}
        return {"min": min(values), "median": int(statistics.median(values)), "max": max(values)}

    @model_serializer(mode="wrap")
    def _points_last(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        # The per-point lists close the document, after the series, as the JSON has always had them.
        data: dict[str, Any] = handler(self)
        turns, compactions = data.pop("turns"), data.pop("compactions")
        return {**data, "turns": turns, "compactions": compactions}

    def to_json(self) -> dict[str, Any]:
        """A JSON-ready dict (camelCase keys; each turn's and compaction's own keys as stored)."""
        return self.model_dump(mode="json", by_alias=True)


_TOTALS = text(
    """
    SELECT (SELECT count(*) FROM sessions WHERE session_key = :k) AS sessions,
           (SELECT count(*) FROM messages WHERE session_key = :k) AS messages,
           (SELECT coalesce(sum(token_count), 0) FROM messages WHERE session_key = :k) AS stored_tokens,
           (SELECT coalesce(sum(token_count), 0) FROM active_context WHERE session_key = :k) AS context_tokens,
           (SELECT count(*) FROM summaries WHERE session_key = :k) AS summaries,
           (SELECT max(depth) FROM summaries WHERE session_key = :k) AS max_depth,
           (SELECT engine_id FROM sessions WHERE session_key = :k AND status = 'active') AS engine_id
    """
)
_TURNS = text(
    "SELECT turn, session_id, assembled_tokens, prompt_tokens, budget, compacted, at FROM turns "
    "WHERE session_key = :k ORDER BY turn"
)
_COMPACTIONS = text(
    "SELECT started_at AS at, trigger, engine_id, tokens_before, tokens_after, summaries_created FROM compactions "
    "WHERE session_key = :k AND compacted = 1 ORDER BY started_at, compaction_id"
)


async def key_stats(store: Store, session_key: str) -> KeyStats:
    """Load a key's statistics with a few indexed queries.

    Raises:
        NotFoundError: the key has no sessions.
    """
    async with store.read() as conn:
        totals = (await conn.execute(_TOTALS, {"k": session_key})).one()
        if totals.sessions == 0:
            raise NotFoundError(f"session key {session_key!r} has no sessions")
        turns = [TurnPoint.model_validate(dict(r._mapping)) for r in await conn.execute(_TURNS, {"k": session_key})]
        compactions = [
            CompactionPoint.model_validate(dict(r._mapping))
            for r in await conn.execute(_COMPACTIONS, {"k": session_key})
        ]
    return KeyStats(
        session_key=session_key,
        source="turns" if turns else "compactions",
        sessions=totals.sessions,
        messages=totals.messages,
        stored_tokens=totals.stored_tokens,
        context_tokens=totals.context_tokens,
        summaries=totals.summaries,
        max_depth=totals.max_depth,
        engine_id=totals.engine_id,
        turns=turns,
        compactions=compactions,
    )
