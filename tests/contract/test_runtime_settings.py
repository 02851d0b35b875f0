"""runtimeSettings v1 (OpenClaw RFC 0008): schema version, modes, nulls, reason-code normalisation."""

from __future__ import annotations

import math

import pytest
from pydantic import ValidationError

from openclaw_ctx.contract.settings import RuntimeSettings, build_runtime_settings, normalize_reason_code

EXPECTED_SHAPE = {
    "schemaVersion": 1,
    "runtime": {"host": "openclaw", "mode": "normal", "harnessId": None, "runtimeId": None},
    "model": {"requested": None, "resolved": None, "provider": None, "family": None},
    "contextEngineSelection": {"selectedId": None, "source": "unknown"},
    "executionHost": {"id": None, "label": None},
    "limits": {"promptTokenBudget": None, "maxOutputTokens": None},
    "diagnostics": {"fallbackReason": None, "degradedReason": None},
}


def test_empty_builder_gives_schema_version_1_with_every_field_null_and_discriminators_set() -> None:
    wire = build_runtime_settings().model_dump(by_alias=True, mode="json")
    assert wire == EXPECTED_SHAPE


def test_full_snapshot_round_trips_through_json() -> None:
    settings = build_runtime_settings(
        selected_engine_id=" lossless-claw ",
        selection_source="configured",
        requested_model="gpt-5",
        resolved_model="gpt-5",
        provider="openai",
        model_family="gpt",
        harness_id="pi",
        runtime_id="embedded",
        execution_host_id="openclaw-embedded",
        execution_host_label="OpenClaw embedded runner",
        prompt_token_budget=120_000,
        max_output_tokens=8192.0,
    )
    wire = settings.model_dump(by_alias=True, mode="json")
    assert wire["contextEngineSelection"] == {"selectedId": "lossless-claw", "source": "configured"}
    assert wire["limits"] == {"promptTokenBudget": 120000, "maxOutputTokens": 8192}
    assert wire["runtime"]["mode"] == "normal"
    assert RuntimeSettings.model_validate_json(settings.model_dump_json(by_alias=True)) == settings


def test_mode_normal_when_nothing_went_wrong() -> None:
    settings = build_runtime_settings(requested_model="m", resolved_model="m")
    assert settings.runtime.mode == "normal"
    assert (settings.diagnostics.fallback_reason, settings.diagnostics.degraded_reason) == (None, None)


def test_mode_fallback_from_a_fallback_reason() -> None:
    settings = build_runtime_settings(fallback_reason="Provider request timed out after 30s")
    assert settings.runtime.mode == "fallback"
    assert settings.diagnostics.fallback_reason == "provider_timeout"


def test_mode_fallback_when_requested_and_resolved_models_differ() -> None:
    settings = build_runtime_settings(requested_model="big", resolved_model="small")
    assert settings.runtime.mode == "fallback" and settings.diagnostics.fallback_reason is None


def test_mode_degraded_wins_and_reasons_stay_in_their_own_mode() -> None:
    settings = build_runtime_settings(degraded_reason="context pressure", fallback_reason="429 from provider")
    assert settings.runtime.mode == "degraded"
    assert settings.diagnostics.degraded_reason == "context_overflow"
    assert settings.diagnostics.fallback_reason is None, "fallbackReason is null unless mode is fallback"


def test_explicit_mode_is_kept() -> None:
    settings = build_runtime_settings(mode="normal", fallback_reason="rate limited")
    assert settings.runtime.mode == "normal" and settings.diagnostics.fallback_reason is None


@pytest.mark.parametrize(
    ("value", "expected"),
    [(None, None), ("", None), ("   ", None), ("  hello  ", "hello"), (42, None)],
)
def test_strings_are_trimmed_and_empty_ones_become_null(value: object, expected: str | None) -> None:
    settings = build_runtime_settings(provider=value)  # type: ignore[arg-type]
    assert settings.model.provider == expected


@pytest.mark.parametrize("value", [math.inf, -math.inf, math.nan, True, "100", None])
def test_non_finite_or_non_numeric_limits_become_null(value: object) -> None:
    settings = build_runtime_settings(prompt_token_budget=value)  # type: ignore[arg-type]
    assert settings.limits.prompt_token_budget is None


def test_selection_source_defaults() -> None:
    assert build_runtime_settings(selected_engine_id="legacy").context_engine_selection.source == "configured"
    assert build_runtime_settings().context_engine_selection.source == "unknown"
    default = build_runtime_settings(selected_engine_id="legacy", selection_source="default")
    assert default.context_engine_selection.source == "default"


@pytest.mark.parametrize(
    ("text", "code"),
    [
        ("Request timeout", "provider_timeout"),
        ("connection timed out", "provider_timeout"),
        ("rate limited by upstream", "rate_limited"),
        ("quota limit reached", "rate_limited"),
        ("HTTP 429", "rate_limited"),
        ("context overflow", "context_overflow"),
        ("prompt too long for context window", "context_overflow"),
        ("memory pressure", "context_overflow"),
        ("runtime crashed", "runtime_unavailable"),
        ("provider down", "provider_unavailable"),
        ("primary model failed", "provider_unavailable"),
        ("service unavailable", "provider_unavailable"),
        ("something odd", "unknown"),
        ("RATE_LIMITED", "rate_limited"),
        ("unknown", "unknown"),
        (None, None),
        ("  ", None),
    ],
)
def test_reason_normalization_maps_free_text_to_closed_codes(text: str | None, code: str | None) -> None:
    assert normalize_reason_code(text) == code


def test_raw_error_text_never_reaches_the_snapshot() -> None:
    raw = "Traceback: secret-token-123 exploded at /home/user/app.py"
    wire = build_runtime_settings(fallback_reason=raw).model_dump_json(by_alias=True)
    assert "secret-token-123" not in wire and '"fallbackReason":"unknown"' in wire


def test_snapshot_is_read_only() -> None:
    settings = build_runtime_settings()
    with pytest.raises(ValidationError):
        settings.schema_version = 2  # type: ignore[misc,assignment]
    with pytest.raises(ValidationError):
        settings.runtime.mode = "fallback"  # type: ignore[misc]
