"""What lossless-claw says about itself to a host."""

from __future__ import annotations

from engines.lossless.ingest import ENGINE_ID
from openclaw_ctx._version import __version__
from openclaw_ctx.contract import DURABLE_TURNS, EngineInfo, HostRequirements

__all__ = ["lossless_info"]


def lossless_info() -> EngineInfo:
    """Owns compaction, maintains in the background, needs assemble-before-prompt for agent runs, and
    takes part in OpenClaw 2026.9's durable turns (``commitTurn``)."""
    return EngineInfo(
        id=ENGINE_ID,
        name="Lossless Context Management",
        version=__version__,
        owns_compaction=True,
        turn_maintenance_mode="background",
        transcript_semantics=DURABLE_TURNS,
        host_requirements={
            "agent-run": HostRequirements(
                required_capabilities=["assemble-before-prompt"],
                unsupported_message=(
                    "lossless-claw assembles the prompt from its store before every run; this host "
                    "cannot call assemble before the prompt, so running it would desynchronise the "
                    "session. Use an embedded agent run or select the legacy engine."
                ),
            )
        },
    )
