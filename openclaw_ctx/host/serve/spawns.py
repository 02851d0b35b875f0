"""Sub-agent spawn rollbacks across the wire: a preparation's ``rollback`` is a function, so serve keeps it.

``prepareSubagentSpawn`` answers ``{prepared: true, rollbackId}``; the plugin's ``rollback`` sends
``rollbackSubagentSpawn({rollbackId, childSessionKey})``, which runs the engine's rollback (lossless-claw
revokes the recall grant it gave the child). A preparation is held until it is rolled back, the child
ends (``onSubagentEnded``), or it is the oldest of more than :data:`HELD_LIMIT`.
"""

from __future__ import annotations

import itertools
from collections import OrderedDict
from typing import Any

from openclaw_ctx.contract import SubagentSpawnPreparation
from openclaw_ctx.host.serve.protocol import INVALID_PARAMS, RpcError

__all__ = ["HELD_LIMIT", "ROLLBACK_METHOD", "SpawnPreparations"]

ROLLBACK_METHOD = "rollbackSubagentSpawn"
HELD_LIMIT = 256


class SpawnPreparations:
    """The rollbacks of the spawns this process prepared, by the id their answer carried."""

    def __init__(self, limit: int = HELD_LIMIT) -> None:
        self._limit = limit
        self._held: OrderedDict[str, tuple[str, SubagentSpawnPreparation]] = OrderedDict()
        self._ids = itertools.count(1)

    def __len__(self) -> int:
        return len(self._held)

    def keep(self, child_session_key: str, preparation: SubagentSpawnPreparation) -> str:
        """Hold `preparation` and return the id its wire answer names (the oldest beyond the limit is let go)."""
        rollback_id = f"spawn-{next(self._ids)}"
        self._held[rollback_id] = (child_session_key, preparation)
        while len(self._held) > self._limit:
            self._held.popitem(last=False)
        return rollback_id

    def forget_child(self, child_session_key: str) -> None:
        """The child ended: its preparations can no longer be rolled back."""
        for rollback_id in [i for i, (child, _) in self._held.items() if child == child_session_key]:
            del self._held[rollback_id]

    async def rollback(self, params: Any) -> dict[str, bool]:
        """``rollbackSubagentSpawn``: run the held rollback once; ``rolledBack: false`` when none is held."""
        rollback_id = params.get("rollbackId") if isinstance(params, dict) else None
        if not isinstance(rollback_id, str) or not rollback_id:
            raise RpcError(
                INVALID_PARAMS, f"{ROLLBACK_METHOD}: invalid params", {"errors": ["rollbackId: a string is required"]}
            )
        held = self._held.pop(rollback_id, None)
        if held is None:
            return {"rolledBack": False}
        await held[1].rollback()
        return {"rolledBack": True}
