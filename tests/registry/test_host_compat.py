"""Host requirements fail closed (OpenClaw's host-compat tests) and the memory prompt-addition helper."""

from __future__ import annotations

import pytest
from test_registry import FakeEngine, make_registry, slot

from openclaw_ctx.contract import EngineInfo, HostRequirements
from openclaw_ctx.contract.host import (
    CODEX_HOST,
    EMBEDDED_HOST,
    HostInfo,
    assert_host_support,
    build_memory_system_prompt_addition,
    cli_host,
    evaluate_host_support,
)
from openclaw_ctx.errors import EngineError, HostRequirementError

ALL_HOSTS = [EMBEDDED_HOST, CODEX_HOST, cli_host("claude-cli"), HostInfo("bare", "a bare host", frozenset())]


def requiring(*capabilities: str, message: str | None = None, operation: str = "agent-run") -> EngineInfo:
    reqs = HostRequirements.model_validate({"requiredCapabilities": list(capabilities), "unsupportedMessage": message})
    return EngineInfo.model_validate({"id": "needy", "name": "Needy", "hostRequirements": {operation: reqs}})


@pytest.mark.parametrize("host", ALL_HOSTS, ids=lambda h: h.id)
def test_no_requirements_is_ok_on_any_host(host: HostInfo) -> None:
    info = EngineInfo(id="plain", name="Plain")
    assert evaluate_host_support(info, "agent-run", host).ok
    assert assert_host_support(info, "manual-compact", host).ok


def test_missing_capability_throws_the_explanatory_message_on_a_cli_backend() -> None:
    info = requiring("assemble-before-prompt", message="Use the embedded runner.")
    with pytest.raises(HostRequirementError) as caught:
        assert_host_support(info, "agent-run", cli_host("claude-cli"))
    assert str(caught.value) == (
        'Context engine "needy" cannot run operation "agent-run" on CLI backend "claude-cli". '
        "Missing host capabilities: assemble-before-prompt. "
        "Required capabilities: assemble-before-prompt. "
        "Host capabilities: bootstrap, after-turn, maintain. "
        "Use the embedded runner."
    )
    assert isinstance(caught.value, EngineError)


def test_host_without_capabilities_lists_none() -> None:
    info = requiring("compact", "maintain")
    with pytest.raises(HostRequirementError) as caught:
        assert_host_support(info, "agent-run", HostInfo("bare", "a bare host", frozenset()))
    assert str(caught.value) == (
        'Context engine "needy" cannot run operation "agent-run" on a bare host. '
        "Missing host capabilities: maintain, compact. Required capabilities: maintain, compact. "
        "Host capabilities: (none)."
    )


def test_evaluate_returns_not_ok_with_the_missing_capabilities() -> None:
    info = requiring("bootstrap", "runtime-llm-complete", "assemble-before-prompt")
    support = evaluate_host_support(info, "agent-run", cli_host("codex-cli"))
    assert support.ok is False
    assert support.missing_capabilities == ("assemble-before-prompt", "runtime-llm-complete")
    assert support.required_capabilities == ("bootstrap", "assemble-before-prompt", "runtime-llm-complete")
    # Requirements of one operation say nothing about another.
    assert evaluate_host_support(info, "subagent-spawn", cli_host("codex-cli")).ok


@pytest.mark.parametrize("host", [EMBEDDED_HOST, CODEX_HOST], ids=lambda h: h.id)
def test_embedded_and_codex_satisfy_assemble_before_prompt(host: HostInfo) -> None:
    assert assert_host_support(requiring("assemble-before-prompt"), "agent-run", host).ok


def test_codex_satisfies_thread_bootstrap_projection_and_embedded_does_not() -> None:
    info = requiring("thread-bootstrap-projection")
    assert evaluate_host_support(info, "agent-run", CODEX_HOST).ok
    assert evaluate_host_support(info, "agent-run", EMBEDDED_HOST).missing_capabilities == (
        "thread-bootstrap-projection",
    )


def test_host_ids_and_labels() -> None:
    assert (EMBEDDED_HOST.id, EMBEDDED_HOST.label) == ("openclaw-embedded", "OpenClaw embedded runner")
    assert CODEX_HOST.id == "codex-app-server" and CODEX_HOST.capabilities > EMBEDDED_HOST.capabilities
    cli = cli_host("gemini")
    assert (cli.id, cli.label, cli.capabilities) == (
        "cli:gemini",
        'CLI backend "gemini"',
        frozenset({"bootstrap", "after-turn", "maintain"}),
    )


async def test_host_requirement_failure_is_not_quarantined() -> None:
    class Needy(FakeEngine):
        @property
        def info(self) -> EngineInfo:
            return requiring("runtime-llm-complete")

    reg = make_registry()
    reg.register_for_owner("needy", lambda: Needy("needy"), "plugin:needy")
    resolved = await reg.resolve(slot("needy"))
    with pytest.raises(HostRequirementError):
        assert_host_support(resolved.engine.info, "agent-run", cli_host("claude-cli"))
    assert reg.list_quarantines() == []
    again = await reg.resolve(slot("needy"))
    assert again.engine.info.id == "needy"
    assert_host_support(again.engine.info, "agent-run", EMBEDDED_HOST)


# --- buildMemorySystemPromptAddition -------------------------------------------------------------


def test_memory_prompt_addition_normalizes_lines() -> None:
    assert build_memory_system_prompt_addition(["## Memory Recall", "citations=off", ""]) == (
        "## Memory Recall\ncitations=off"
    )
    assert build_memory_system_prompt_addition(["", "  ", "## A  ", None, "b", "", ""]) == "## A\nb"


@pytest.mark.parametrize("lines", [[], [""], ["   ", "\t"], [None]])
def test_memory_prompt_addition_is_none_when_nothing_was_contributed(lines: list[str | None]) -> None:
    assert build_memory_system_prompt_addition(lines) is None
