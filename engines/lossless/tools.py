"""The recall tools an agent sees: ``lcm_grep``, ``lcm_recall``, ``lcm_describe``, ``lcm_expand``, ``lcm_expand_query``.

They are the lossless engine's face of core recall (:mod:`openclaw_ctx.recall`). Tools search the
calling session key's whole history (every rotated session of it); ``allSessions`` searches every
key. ``lcm_expand`` is for delegated sub-agents only: it refuses a session without a live grant and
spends the grant's token budget. ``lcm_expand_query`` is the main agent's door to expansion
(:mod:`engines.lossless.expand_query`). Handlers never raise for bad input: they return ``error: …``.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from engines.lossless.expand_query import ExpandQuery
from engines.lossless.grants import GrantError, GrantStore
from engines.lossless.large_content import register_file_describer
from engines.lossless.tool_access import ExpansionTask, RecallAccess, SpawnCallback
from engines.lossless.tool_schemas import DESCRIPTIONS, SCHEMAS, ArgumentError, validate
from openclaw_ctx.contract.model import ToolSpec
from openclaw_ctx.errors import NotFoundError, RecallQueryError
from openclaw_ctx.store.store import Store

__all__ = ["SCHEMAS", "ExpansionTask", "SpawnCallback", "build_tools"]


def build_tools(
    store: Store,
    *,
    session_key: str,
    config: object | None = None,
    grant_store: GrantStore | None = None,
    spawn: SpawnCallback | None = None,
) -> list[ToolSpec]:
    """The five recall tools for one calling session key.

    Args:
        store: the shared Store.
        session_key: the calling session's key (a sub-agent's key for a delegated child).
        config: engine config; ``max_expand_tokens`` and ``delegation_timeout_ms`` are read when present.
        grant_store: where grants live (default: a GrantStore over `store`).
        spawn: runs a recall sub-agent for ``lcm_expand_query`` and returns its reply text; without it the
            expansion runs in-process under a delegated grant.

    Returns:
        ToolSpecs for lcm_grep, lcm_recall, lcm_describe, lcm_expand and lcm_expand_query.
    """
    register_file_describer()  # lcm_describe answers for file_… ids even when no entry point loaded the engine
    recall = RecallAccess(store, session_key, config, grant_store or GrantStore(store), spawn)
    impls: dict[str, Callable[[dict[str, Any]], Awaitable[str]]] = {
        "lcm_grep": recall.grep,
        "lcm_recall": recall.ask,
        "lcm_describe": recall.describe,
        "lcm_expand": recall.expand,
        "lcm_expand_query": ExpandQuery(recall),
    }
    return [ToolSpec(name, DESCRIPTIONS[name], SCHEMAS[name], _guarded(name, impl)) for name, impl in impls.items()]


def _guarded(name: str, impl: Callable[[dict[str, Any]], Awaitable[str]]) -> Callable[[dict[str, Any]], Awaitable[str]]:
    async def handle(args: dict[str, Any]) -> str:
        try:
            return await impl(validate(name, args))
        except (ArgumentError, RecallQueryError) as exc:
            return f"error: {name}: {exc}"
        except (NotFoundError, GrantError) as exc:
            return f"error: {name}: {exc.detail}"

    return handle
