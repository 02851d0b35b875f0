"""Execution hosts and the host-requirement check that fails closed (OpenClaw's ``host-compat.ts``).

An engine may declare, per operation, capabilities it needs from the host
(``info.host_requirements``). Before starting work the host calls :func:`assert_host_support`; a host
that lacks a required capability raises :class:`~openclaw_ctx.errors.HostRequirementError` before any
process starts. Host-requirement failures are never quarantined: the run simply does not start.

Also home of :func:`build_memory_system_prompt_addition`, the helper an engine uses to turn memory
guidance lines into a ready-to-prepend ``systemPromptAddition``.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from openclaw_ctx.contract.hooks import HOOKS
from openclaw_ctx.contract.params import EngineInfo, HostCapability, Operation
from openclaw_ctx.errors import HostRequirementError

__all__ = [
    "CAPABILITY_ORDER",
    "CODEX_HOST",
    "EMBEDDED_HOST",
    "HOOK_CAPABILITIES",
    "HostInfo",
    "HostSupport",
    "assert_host_support",
    "build_memory_system_prompt_addition",
    "cli_host",
    "evaluate_host_support",
    "format_host_requirement_error",
]

CAPABILITY_ORDER: tuple[HostCapability, ...] = (
    "bootstrap",
    "assemble-before-prompt",
    "reference-context",
    "after-turn",
    "maintain",
    "compact",
    "runtime-llm-complete",
    "thread-bootstrap-projection",
)
"""Every host capability in OpenClaw's order, so that messages list them the same way every time."""

HOOK_CAPABILITIES: frozenset[HostCapability] = frozenset(h.capability for h in HOOKS if h.capability is not None)
"""What a host needs to call the hooks of the table (``bootstrap``, ``after-turn``, …)."""

# Services the host offers beside the hook calls themselves.
_EMBEDDED_SERVICES: frozenset[HostCapability] = frozenset({"reference-context", "runtime-llm-complete"})


def _ordered(capabilities: Iterable[str]) -> list[str]:
    known: dict[str, int] = {c: i for i, c in enumerate(CAPABILITY_ORDER)}
    return sorted(set(capabilities), key=lambda c: (known.get(c, len(known)), c))


@dataclass(frozen=True)
class HostInfo:
    """A surface that calls engine hooks: its id, its human label, and what it can do."""

    id: str
    label: str
    """Used in error messages, e.g. ``OpenClaw embedded runner`` or ``CLI backend "claude-cli"``."""
    capabilities: frozenset[HostCapability]


# Every hook and the in-process services; only the persistent-thread projection is missing.
_EMBEDDED_CAPABILITIES = HOOK_CAPABILITIES | _EMBEDDED_SERVICES

EMBEDDED_HOST = HostInfo("openclaw-embedded", "OpenClaw embedded runner", _EMBEDDED_CAPABILITIES)
"""The in-process runner (this package's runtime)."""

CODEX_HOST = HostInfo(
    "codex-app-server", "Codex app-server", _EMBEDDED_CAPABILITIES | frozenset({"thread-bootstrap-projection"})
)
"""A persistent-thread backend that projects assembled context into its thread."""


def cli_host(backend_id: str) -> HostInfo:
    """A generic CLI backend: it can bootstrap, run after-turn work and maintain, nothing more.

    In particular it cannot assemble before the prompt, so an engine requiring
    ``assemble-before-prompt`` fails closed before the CLI process starts.
    """
    return HostInfo(
        f"cli:{backend_id}", f'CLI backend "{backend_id}"', frozenset({"bootstrap", "after-turn", "maintain"})
    )


@dataclass(frozen=True)
class HostSupport:
    """Outcome of :func:`evaluate_host_support`."""

    ok: bool
    operation: Operation
    host_id: str
    required_capabilities: tuple[str, ...] = ()
    missing_capabilities: tuple[str, ...] = ()
    unsupported_message: str | None = None


def evaluate_host_support(info: EngineInfo, operation: Operation, host: HostInfo) -> HostSupport:
    """Whether `host` satisfies what `info` requires for `operation` (no requirements = ok anywhere)."""
    requirements = (info.host_requirements or {}).get(operation)
    if requirements is None:
        return HostSupport(ok=True, operation=operation, host_id=host.id)
    required = tuple(_ordered(requirements.required_capabilities))
    missing = tuple(c for c in required if c not in host.capabilities)
    return HostSupport(
        ok=not missing,
        operation=operation,
        host_id=host.id,
        required_capabilities=required,
        missing_capabilities=missing,
        unsupported_message=requirements.unsupported_message,
    )


def format_host_requirement_error(info: EngineInfo, support: HostSupport, host: HostInfo) -> str:
    """OpenClaw's explanatory message for an unsupported host."""
    host_caps = ", ".join(_ordered(host.capabilities)) or "(none)"
    message = (
        f'Context engine "{info.id}" cannot run operation "{support.operation}" on {host.label}. '
        f"Missing host capabilities: {', '.join(support.missing_capabilities)}. "
        f"Required capabilities: {', '.join(support.required_capabilities)}. "
        f"Host capabilities: {host_caps}."
    )
    extra = (support.unsupported_message or "").strip()
    return f"{message} {extra}" if extra else message


def assert_host_support(info: EngineInfo, operation: Operation, host: HostInfo) -> HostSupport:
    """Fail closed when `host` cannot run `operation` for the engine described by `info`.

    Returns:
        The (successful) evaluation.

    Raises:
        HostRequirementError: a required capability is missing; the message names the engine, the
            operation, the host, and the missing, required and available capabilities.
    """
    support = evaluate_host_support(info, operation, host)
    if not support.ok:
        raise HostRequirementError(format_host_requirement_error(info, support, host))
    return support


def build_memory_system_prompt_addition(lines: Iterable[str | None]) -> str | None:
    """Join memory-guidance lines into a ``systemPromptAddition``; ``None`` when nothing was contributed.

    Lines are joined with newlines; trailing whitespace of each line and blank lines at either end
    are trimmed (``["## Memory Recall", "citations=off", ""]`` → ``"## Memory Recall\\ncitations=off"``).
    """
    cleaned = [line.rstrip() for line in lines if line is not None]
    while cleaned and not cleaned[-1]:
        cleaned.pop()
    while cleaned and not cleaned[0]:
        cleaned.pop(0)
    return "\n".join(cleaned) if cleaned else None
