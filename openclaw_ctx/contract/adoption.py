"""Adoption: an engine that can take over a session key's active context as its own projection.

`migrate --to <engine>` and `backfill` reach an engine through this capability, never by importing it:
the host resolves the engine through the registry and asks :func:`supports_adoption`. An engine that
adopts builds its projection (lossless-claw: the DAG, adopting summaries already there) in committed,
resumable batches, then rotates the key's session to a successor it owns; nothing is deleted.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol, TypeGuard, runtime_checkable

from pydantic import BaseModel, ConfigDict, Field
from pydantic.alias_generators import to_camel

__all__ = [
    "DEFAULT_BATCH",
    "AdoptionPreview",
    "AdoptionProgress",
    "AdoptionReport",
    "AdoptsContext",
    "supports_adoption",
]

DEFAULT_BATCH = 2000
"""Context items an adopting engine reads and summarises per committed batch, unless told otherwise."""


@dataclass(frozen=True)
class AdoptionPreview:
    """What adopting a key would keep, for a dry run (computed by the engine's own planner)."""

    kept_messages: int
    """Raw messages the engine would keep verbatim (lossless-claw: its fresh tail)."""
    resumable: bool
    """An interrupted adoption of this very session is pending and would resume."""


@dataclass(frozen=True)
class AdoptionProgress:
    """Where an adoption stands after a committed batch (for a progress bar)."""

    session_key: str
    items_done: int
    items_total: int
    batches: int
    summaries_created: int


class AdoptionReport(BaseModel):
    """What one adoption run did; its JSON (``model_dump(by_alias=True)``) is camelCase."""

    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True)

    session_key: str
    source_session_id: str
    finished: bool
    resumed: bool = False
    batches: int = 0
    summaries_created: int = 0
    items_total: int = 0
    tokens_before: int = 0
    tokens_after: int | None = None
    successor_session_id: str | None = None
    max_depth: int | None = None
    notes: list[str] = Field(default_factory=list)


@runtime_checkable
class AdoptsContext(Protocol):
    """The adoption capability (see the module docstring)."""

    async def preview_adoption(self, session_key: str, *, budget: int) -> AdoptionPreview:
        """What :meth:`adopt_context` would keep for the key; writes nothing."""
        ...

    async def adoption_pending(self, session_key: str) -> bool:
        """True when an interrupted adoption of the key waits to be resumed."""
        ...

    async def adopt_context(
        self,
        session_key: str,
        *,
        budget: int,
        batch: int,
        reason: str,
        stop_after: int | None = None,
        progress: Callable[[AdoptionProgress], None] | None = None,
    ) -> AdoptionReport:
        """Build this engine's projection of the key's context and rotate the key to it (resumable)."""
        ...


def supports_adoption(engine: object) -> TypeGuard[AdoptsContext]:
    """True when `engine` can adopt a key's context (all three methods present)."""
    return isinstance(engine, AdoptsContext)
