"""Sub-agents: a child run on its own session key, prepared by the engine and rolled back if it fails to start."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Literal, TypeVar

from openclaw_ctx.contract import DelegationTask
from openclaw_ctx.messages import AssistantMessage, flatten_text

if TYPE_CHECKING:
    from openclaw_ctx.host.runtime import Runtime

__all__ = ["Subagents"]

T = TypeVar("T")


class Subagents:
    """The runtime's child runs."""

    def __init__(self, runtime: Runtime) -> None:
        self._runtime = runtime

    async def spawn(
        self,
        parent_session_key: str,
        child_session_key: str,
        start: Callable[[], Awaitable[T]],
        *,
        context_mode: Literal["isolated", "fork"],
        light_context: bool,
        ttl_ms: int | None,
    ) -> T:
        """Prepare engine state for a child run, start it, and roll back if starting fails.

        A light-context isolated spawn skips `prepareSubagentSpawn` on purpose (the child starts
        from a light bootstrap context).
        """
        preparation = None
        if not (light_context and context_mode == "isolated"):
            preparation = await self._runtime.hooks.prepare_subagent_spawn(
                parent_session_key, child_session_key, context_mode, ttl_ms
            )
        try:
            return await start()
        except BaseException:
            if preparation is not None:
                await preparation.rollback()
            raise

    async def run(self, parent_session_key: str, child_session_key: str, prompt: str) -> str:
        """Run a child agent for one turn on its own key and return its final reply's text.

        The engine is told when it ends (`onSubagentEnded`, reason ``completed`` whether it answered
        or failed: the contract has no failure reason).
        """
        if parent_session_key == child_session_key:
            raise ValueError("a sub-agent needs its own session key")
        runtime = self._runtime
        try:
            result = await self.spawn(
                parent_session_key,
                child_session_key,
                lambda: runtime.run_turn(child_session_key, prompt),
                context_mode="isolated",
                light_context=False,
                ttl_ms=None,
            )
        finally:
            await runtime.hooks.subagent_ended(child_session_key, "completed")
            # A child key is used once: let go of its maintenance and its lock.
            await runtime.scheduler.settle(child_session_key)
            runtime.scheduler.forget(child_session_key)
        replies = [m for m in result.new_messages if isinstance(m, AssistantMessage)]
        return flatten_text(replies[-1]) if replies else ""

    async def run_delegated(self, task: DelegationTask) -> str:
        """The engine's delegation task (lossless-claw's expansion) as a child run through this host."""
        return await self.run(task.parent_session_key, task.child_session_key, task.prompt)
