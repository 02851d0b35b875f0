"""The host: the runtime that drives turns through the selected engine, its precheck and replay."""

from openclaw_ctx.host.runtime import OVERFLOW_MESSAGE, Runtime, TurnResult

__all__ = ["OVERFLOW_MESSAGE", "Runtime", "TurnResult"]
