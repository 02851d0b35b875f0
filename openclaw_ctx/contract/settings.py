"""runtimeSettings, schema version 1 (OpenClaw RFC 0008): a read-only snapshot the host hands to hooks.

Every field is present; unknown ones are ``None``. Discriminators (`runtime.mode`,
`contextEngineSelection.source`) are never ``None``. Reasons are closed codes, never raw error text.
"""

from __future__ import annotations

import math
from typing import Literal

from pydantic import BaseModel, ConfigDict
from pydantic.alias_generators import to_camel

__all__ = [
    "ReasonCode",
    "RuntimeSettings",
    "build_runtime_settings",
    "normalize_reason_code",
]

ReasonCode = Literal[
    "provider_timeout",
    "provider_unavailable",
    "rate_limited",
    "context_overflow",
    "runtime_unavailable",
    "unknown",
]
RuntimeMode = Literal["normal", "fallback", "degraded"]
SelectionSource = Literal["configured", "default", "unknown"]
_REASON_CODES: tuple[str, ...] = ReasonCode.__args__  # type: ignore[attr-defined]


class _Frozen(BaseModel):
    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True, frozen=True, extra="forbid")


class RuntimeInfo(_Frozen):
    host: Literal["openclaw"] = "openclaw"
    mode: RuntimeMode
    harness_id: str | None
    runtime_id: str | None


class ModelInfo(_Frozen):
    requested: str | None
    resolved: str | None
    provider: str | None
    family: str | None


class SelectionInfo(_Frozen):
    selected_id: str | None
    source: SelectionSource


class ExecutionHostInfo(_Frozen):
    id: str | None
    label: str | None


class LimitsInfo(_Frozen):
    prompt_token_budget: int | None
    max_output_tokens: int | None


class DiagnosticsInfo(_Frozen):
    fallback_reason: ReasonCode | None
    degraded_reason: ReasonCode | None


class RuntimeSettings(_Frozen):
    """The versioned runtimeSettings snapshot."""

    schema_version: Literal[1] = 1
    runtime: RuntimeInfo
    model: ModelInfo
    context_engine_selection: SelectionInfo
    execution_host: ExecutionHostInfo
    limits: LimitsInfo
    diagnostics: DiagnosticsInfo


def _text(value: object) -> str | None:
    if not isinstance(value, str):
        return None
    value = value.strip()
    return value or None


def _number(value: object) -> int | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    if not math.isfinite(value):
        return None
    return int(value)


def normalize_reason_code(reason: str | None) -> ReasonCode | None:
    """Map free text (or an already-closed code) to a reason code; ``None`` stays ``None``."""
    text = _text(reason)
    if text is None:
        return None
    lowered = text.lower()
    if lowered in _REASON_CODES:
        return lowered  # type: ignore[return-value]
    if "timeout" in lowered or "timed out" in lowered:
        return "provider_timeout"
    if "rate" in lowered or "limit" in lowered or "429" in lowered:
        return "rate_limited"
    if "overflow" in lowered or "context" in lowered or "pressure" in lowered:
        return "context_overflow"
    if "runtime" in lowered:
        return "runtime_unavailable"
    if "provider" in lowered or "primary" in lowered or "unavailable" in lowered:
        return "provider_unavailable"
    return "unknown"


def build_runtime_settings(
    *,
    selected_engine_id: str | None = None,
    selection_source: SelectionSource | None = None,
    requested_model: str | None = None,
    resolved_model: str | None = None,
    provider: str | None = None,
    model_family: str | None = None,
    harness_id: str | None = None,
    runtime_id: str | None = None,
    execution_host_id: str | None = None,
    execution_host_label: str | None = None,
    prompt_token_budget: float | None = None,
    max_output_tokens: float | None = None,
    fallback_reason: str | None = None,
    degraded_reason: str | None = None,
    mode: RuntimeMode | None = None,
) -> RuntimeSettings:
    """Build the snapshot the way OpenClaw's `buildContextEngineRuntimeSettings` does."""
    requested, resolved = _text(requested_model), _text(resolved_model)
    fallback, degraded = normalize_reason_code(fallback_reason), normalize_reason_code(degraded_reason)
    if mode is None:
        if degraded:
            mode = "degraded"
        elif fallback or (requested and resolved and requested != resolved):
            mode = "fallback"
        else:
            mode = "normal"
    selected = _text(selected_engine_id)
    source: SelectionSource = selection_source or ("configured" if selected else "unknown")
    return RuntimeSettings(
        runtime=RuntimeInfo(mode=mode, harness_id=_text(harness_id), runtime_id=_text(runtime_id)),
        model=ModelInfo(requested=requested, resolved=resolved, provider=_text(provider), family=_text(model_family)),
        context_engine_selection=SelectionInfo(selected_id=selected, source=source),
        execution_host=ExecutionHostInfo(id=_text(execution_host_id), label=_text(execution_host_label)),
        limits=LimitsInfo(
            prompt_token_budget=_number(prompt_token_budget), max_output_tokens=_number(max_output_tokens)
        ),
        # A reason is only meaningful in its own mode (RFC invariant).
        diagnostics=DiagnosticsInfo(
            fallback_reason=fallback if mode == "fallback" else None,
            degraded_reason=degraded if mode == "degraded" else None,
        ),
    )
