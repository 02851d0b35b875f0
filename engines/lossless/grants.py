"""Delegated expansion grants: which child session may expand what, how much, until when.

A grant is created when a sub-agent is spawned for recall (``prepare_subagent_spawn``) and revoked
when it ends (``on_subagent_ended``). It is persisted in ``engine_state`` (engine ``lossless-claw``,
session key = the child's key, name ``grant``), so it survives a restart and expires by TTL. A child
never gets more than its parent: when the parent is itself a delegated child, the new grant's scope,
token cap, depth and expiry are clipped to what the parent has left.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from pydantic import BaseModel, ConfigDict

from openclaw_ctx._ids import LOSSLESS_ENGINE_ID
from openclaw_ctx.contract import PrepareSubagentSpawnParams, SubagentEndedParams, SubagentSpawnPreparation
from openclaw_ctx.errors import OpenClawCtxError
from openclaw_ctx.store import repo
from openclaw_ctx.store.store import Store

__all__ = [
    "DEFAULT_TTL_MS",
    "ENGINE_ID",
    "Grant",
    "GrantError",
    "GrantStore",
    "end_grant",
    "prepare_grant",
]

ENGINE_ID = LOSSLESS_ENGINE_ID
STATE_NAME = "grant"
DEFAULT_TTL_MS = 5 * 60 * 1000
MAX_DEPTH = 64


class GrantError(OpenClawCtxError):
    """Delegated recall refused: no grant, expired, revoked, out of scope, or over its cap."""


def _now_ms() -> int:
    return int(time.time() * 1000)


class Grant(BaseModel):
    """One child session's right to expand summaries of `allowed_session_keys`.

    Stored as its fields' snake_case names (the ``engine_state`` value), as grants always were.
    """

    model_config = ConfigDict(frozen=True)

    child_session_key: str
    parent_session_key: str
    allowed_session_keys: tuple[str, ...]
    token_cap: int
    max_depth: int
    created_at_ms: int
    expires_at_ms: int
    tokens_used: int = 0
    revoked_at_ms: int | None = None
    revoked_reason: str | None = None

    @property
    def remaining_tokens(self) -> int:
        """Tokens the child may still pull through expansion."""
        return max(0, self.token_cap - self.tokens_used)

    def live(self, now_ms: int) -> bool:
        """True while neither revoked nor expired."""
        return self.revoked_at_ms is None and now_ms < self.expires_at_ms

    def why_not_live(self, now_ms: int) -> str | None:
        """Why the grant cannot be used now, or None when it can."""
        if self.revoked_at_ms is not None:
            return f"the grant for {self.child_session_key} was revoked ({self.revoked_reason or 'no reason'})"
        if now_ms >= self.expires_at_ms:
            return f"the grant for {self.child_session_key} expired"
        return None

    def allows(self, session_key: str) -> bool:
        """True when `session_key`'s history is in scope."""
        return session_key in self.allowed_session_keys

    def to_json(self) -> dict[str, Any]:
        """The engine_state value."""
        return self.model_dump(mode="json")

    @classmethod
    def from_json(cls, value: dict[str, Any]) -> Grant:
        """Rebuild from an engine_state value."""
        return cls.model_validate(value)


def _positive(name: str, value: object, upper: int | None = None) -> int:
    if not isinstance(value, int) or isinstance(value, bool) or value < 1 or (upper is not None and value > upper):
        bound = f"from 1 to {upper}" if upper else "of at least 1"
        raise GrantError(f"{name} must be an integer {bound}, got {value!r}")
    return value


class GrantStore:
    """Create, read, consume and revoke grants in the store.

    Args:
        store: the shared Store.
        clock: epoch milliseconds now (tests pass a controllable clock).
    """

    def __init__(self, store: Store, *, clock: Callable[[], int] | None = None) -> None:
        self.store = store
        self.clock = clock or _now_ms

    async def create(
        self,
        parent_session_key: str,
        child_session_key: str,
        *,
        token_cap: int,
        max_depth: int,
        ttl_ms: int,
        allowed_session_keys: list[str] | None = None,
    ) -> Grant:
        """Grant `child_session_key` expansion over `allowed_session_keys` (default: the parent's key).

        When the parent holds a grant itself, the child's scope is intersected with the parent's and
        its cap, depth and expiry are clipped to the parent's remaining ones.

        Raises:
            GrantError: bad numbers, the child is the parent, or the parent's own grant is not live.
        """
        _positive("token_cap", token_cap)
        _positive("max_depth", max_depth, MAX_DEPTH)
        _positive("ttl_ms", ttl_ms)
        if parent_session_key == child_session_key:
            raise GrantError("a session cannot grant itself: parent and child keys are the same")
        now = self.clock()
        wanted = tuple(dict.fromkeys(allowed_session_keys or [parent_session_key]))
        grant = Grant(
            child_session_key=child_session_key,
            parent_session_key=parent_session_key,
            allowed_session_keys=wanted,
            token_cap=token_cap,
            max_depth=max_depth,
            created_at_ms=now,
            expires_at_ms=now + ttl_ms,
        )
        async with self.store.transaction() as conn:
            raw = await repo.get_engine_state(conn, ENGINE_ID, parent_session_key, STATE_NAME)
            if raw is not None:
                parent = Grant.from_json(raw)
                reason = parent.why_not_live(now)
                if reason is not None:
                    raise GrantError(f"cannot delegate: {reason}")
                if parent.remaining_tokens == 0:
                    raise GrantError(f"cannot delegate: the grant for {parent_session_key} has no tokens left")
                scope = (
                    tuple(k for k in wanted if parent.allows(k))
                    if allowed_session_keys
                    else parent.allowed_session_keys
                )
                if not scope:
                    raise GrantError(f"cannot delegate keys outside the parent's grant: {', '.join(wanted)}")
                grant = grant.model_copy(
                    update={
                        "allowed_session_keys": scope,
                        "token_cap": min(token_cap, parent.remaining_tokens),
                        "max_depth": min(max_depth, parent.max_depth),
                        "expires_at_ms": min(grant.expires_at_ms, parent.expires_at_ms),
                    }
                )
            await repo.set_engine_state(conn, ENGINE_ID, child_session_key, STATE_NAME, grant.to_json())
        return grant

    async def get(self, child_session_key: str) -> Grant | None:
        """The stored grant of a child key (live or not), or None."""
        async with self.store.read() as conn:
            raw = await repo.get_engine_state(conn, ENGINE_ID, child_session_key, STATE_NAME)
        return Grant.from_json(raw) if raw is not None else None

    async def require(self, child_session_key: str) -> Grant:
        """The live grant of a child key.

        Raises:
            GrantError: there is none, or it expired or was revoked.
        """
        grant = await self.get(child_session_key)
        if grant is None:
            raise GrantError(
                f"session {child_session_key} has no expansion grant (lcm_expand is for delegated sub-agents)"
            )
        reason = grant.why_not_live(self.clock())
        if reason is not None:
            raise GrantError(reason)
        return grant

    async def consume(self, child_session_key: str, tokens: int) -> Grant:
        """Record `tokens` pulled through expansion (capped at the grant's cap)."""
        async with self.store.transaction() as conn:
            raw = await repo.get_engine_state(conn, ENGINE_ID, child_session_key, STATE_NAME)
            if raw is None:
                raise GrantError(f"session {child_session_key} has no expansion grant")
            grant = Grant.from_json(raw)
            grant = grant.model_copy(update={"tokens_used": min(grant.token_cap, grant.tokens_used + max(0, tokens))})
            await repo.set_engine_state(conn, ENGINE_ID, child_session_key, STATE_NAME, grant.to_json())
        return grant

    async def revoke(self, child_session_key: str, reason: str) -> Grant | None:
        """Revoke the child's grant (kept, marked, for the audit); None when there was none."""
        async with self.store.transaction() as conn:
            raw = await repo.get_engine_state(conn, ENGINE_ID, child_session_key, STATE_NAME)
            if raw is None:
                return None
            grant = Grant.from_json(raw)
            if grant.revoked_at_ms is None:
                grant = grant.model_copy(update={"revoked_at_ms": self.clock(), "revoked_reason": reason})
                await repo.set_engine_state(conn, ENGINE_ID, child_session_key, STATE_NAME, grant.to_json())
        return grant


async def prepare_grant(
    store: Store,
    params: PrepareSubagentSpawnParams,
    *,
    token_cap: int,
    max_depth: int = 3,
    default_ttl_ms: int = DEFAULT_TTL_MS,
    grants: GrantStore | None = None,
) -> SubagentSpawnPreparation:
    """``prepare_subagent_spawn`` for the engine: grant the child, and revoke it if the spawn fails."""
    grant_store = grants or GrantStore(store)
    await grant_store.create(
        params.parent_session_key,
        params.child_session_key,
        token_cap=token_cap,
        max_depth=max_depth,
        ttl_ms=params.ttl_ms or default_ttl_ms,
    )

    async def rollback() -> None:
        await grant_store.revoke(params.child_session_key, "spawn failed")

    return SubagentSpawnPreparation(rollback)


async def end_grant(store: Store, params: SubagentEndedParams, *, grants: GrantStore | None = None) -> None:
    """``on_subagent_ended`` for the engine: revoke the child's grant."""
    await (grants or GrantStore(store)).revoke(params.child_session_key, f"subagent {params.reason}")
