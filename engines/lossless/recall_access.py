"""lossless-claw's recall for the model and its sub-agents: the tools, and the grants a child receives.

Mixed into :class:`engines.lossless.engine.LosslessContextEngine`: `prepare_subagent_spawn` grants a
child scoped, token-capped recall over its parent's session, `on_subagent_ended` revokes it, and
`tools` builds lcm_grep, lcm_describe, lcm_expand and lcm_expand_query over core recall.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from engines.lossless.config import LosslessConfig
from openclaw_ctx.contract import PrepareSubagentSpawnParams, SubagentEndedParams, SubagentSpawnPreparation
from openclaw_ctx.contract.model import ToolSpec
from openclaw_ctx.store.store import Store

if TYPE_CHECKING:
    from engines.lossless.grants import GrantStore
    from engines.lossless.tools import SpawnCallback

__all__ = ["RecallAccess"]

_SUBAGENT_MAX_DEPTH = 3
_SUBAGENT_TTL_MS = 300_000


class RecallAccess:
    """The recall tools and sub-agent grants (see the module docstring)."""

    store: Store
    config: LosslessConfig
    _grants: GrantStore | None

    def _grant_store(self) -> GrantStore:
        if self._grants is None:
            from engines.lossless.grants import GrantStore

            self._grants = GrantStore(self.store)
        return self._grants

    async def prepare_subagent_spawn(self, params: PrepareSubagentSpawnParams) -> SubagentSpawnPreparation:
        """Grant the child scoped, token-capped recall over the parent's session; rollback revokes it.

        A child that `lcm_expand_query` delegates to already holds the grant the tool made for it (its
        token cap is the call's); that one is kept, not widened to the defaults.
        """
        grants = self._grant_store()
        child = params.child_session_key
        existing = await grants.get(child)
        if (
            existing is None
            or existing.parent_session_key != params.parent_session_key
            or not existing.live(grants.clock())
        ):
            await grants.create(
                params.parent_session_key,
                child,
                token_cap=self.config.max_expand_tokens,
                max_depth=_SUBAGENT_MAX_DEPTH,
                ttl_ms=params.ttl_ms or _SUBAGENT_TTL_MS,
            )

        async def rollback() -> None:
            await grants.revoke(child, "spawn-rollback")

        return SubagentSpawnPreparation(rollback)

    async def on_subagent_ended(self, params: SubagentEndedParams) -> None:
        """Revoke the child's grant."""
        await self._grant_store().revoke(params.child_session_key, params.reason)

    def tools(self, session_key: str, *, spawn: SpawnCallback | None = None) -> list[ToolSpec]:
        """The recall tools (lcm_grep, lcm_describe, lcm_expand, lcm_expand_query) for a session.

        `spawn` runs a recall sub-agent through the host (``Runtime.run_subagent``); without it,
        ``lcm_expand_query`` expands in-process under a delegated grant.
        """
        from engines.lossless.tools import build_tools

        return build_tools(
            self.store, session_key=session_key, config=self.config, grant_store=self._grant_store(), spawn=spawn
        )
