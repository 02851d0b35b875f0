"""The lossless DAG-summary engine (`lossless-claw`): leaf and condensed summaries, fresh tail, recall.

Registered through the entry-point group ``openclaw_ctx.engines`` like any plugin.
"""

from __future__ import annotations

from typing import Any

from engines.lossless.engine import LosslessContextEngine, create_engine
from engines.lossless.large_content import register_file_describer

__all__ = ["LosslessContextEngine", "create_engine", "register"]


def register(api: Any) -> None:
    """Entry point: register the factory under ``lossless-claw``, and core recall's describer of ``file_…`` ids."""
    api.register_context_engine("lossless-claw", create_engine)
    register_file_describer()
