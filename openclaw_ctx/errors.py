"""The one error tree of openclaw-ctx.

::

    OpenClawCtxError
    ├── ConfigError                     bad openclaw.json, unknown or ill-typed engine config
    ├── InvalidMessageError             a message that is not an AgentMessage (names the field)
    ├── InvalidSessionKeyError          a new session key that is empty, huge, or holds control characters
    ├── EngineError
    │   ├── EngineNotFoundError         the slot names an engine nobody registered
    │   ├── EngineContractError         a factory returned something that is not a ContextEngine
    │   └── HostRequirementError        the host cannot satisfy the engine's requirements (fails closed)
    ├── StoreError
    │   ├── DatabaseCorruptError        not an SQLite file, or a damaged one
    │   ├── SchemaTooNewError           written by a newer openclaw-ctx; never touched
    │   ├── MigrationRequiredError      older schema and auto-upgrade is off
    │   ├── ReadOnlyViolationError      a write statement sent to the read-only SQL surface
    │   ├── ReadOnlyStorageError        a write asked of a store on storage this process cannot write
    │   ├── TurnConflictError           a committed turn that contradicts what is stored (names both sides)
    │   └── NotFoundError               no such session / summary / message
    ├── SummarizerError
    │   └── SummarizerAuthError         never produces a summary row
    ├── CompactionError
    ├── ContextOverflowError            the prompt cannot be made to fit
    ├── RecallQueryError                a recall request that cannot run as written (names the limit it breaks)
    ├── ProviderError                   a model provider call failed; `kind` says how (auth, rate_limit, …)
    ├── AbortError                      the caller aborted the operation (never quarantines)
    ├── OutputPathError                 an output would overwrite a file unasked, or the database itself
    ├── HostStoreError                  the host's own agent store cannot be read (names the file and why)
    └── MissingDependencyError          an optional outside tool or package is not installed (says how to get it)
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal

__all__ = [
    "AbortError",
    "CompactionError",
    "ConfigError",
    "ContextOverflowError",
    "DatabaseCorruptError",
    "EngineContractError",
    "EngineError",
    "EngineNotFoundError",
    "ForeignDatabaseError",
    "HostRequirementError",
    "HostStoreError",
    "InvalidMessageError",
    "InvalidSessionKeyError",
    "MigrationRequiredError",
    "MissingDependencyError",
    "NotFoundError",
    "OpenClawCtxError",
    "OutputPathError",
    "ProviderError",
    "ProviderErrorKind",
    "ReadOnlyStorageError",
    "ReadOnlyViolationError",
    "RecallQueryError",
    "SchemaTooNewError",
    "StoreError",
    "SummarizerAuthError",
    "SummarizerError",
    "TurnConflictError",
]


class OpenClawCtxError(Exception):
    """Root of every error this package raises on purpose."""

    def __init__(self, detail: str) -> None:
        super().__init__(detail)
        self.detail = detail


class ConfigError(OpenClawCtxError):
    """Configuration that cannot be used as written."""


class InvalidMessageError(OpenClawCtxError, ValueError):
    """A message that does not validate as an AgentMessage; `detail` names the field."""


class InvalidSessionKeyError(OpenClawCtxError, ValueError):
    """A session key that cannot start a session; `detail` says which character or limit."""


class EngineError(OpenClawCtxError):
    """A context engine could not be resolved or used."""


class EngineNotFoundError(EngineError):
    """No engine is registered under the requested id."""


class EngineContractError(EngineError):
    """A factory returned an object that does not satisfy the ContextEngine contract."""


class HostRequirementError(EngineError):
    """The selected engine requires host capabilities this host lacks; the run fails closed."""


class StoreError(OpenClawCtxError):
    """The SQL store refused or failed an operation."""


class DatabaseCorruptError(StoreError):
    """The file is not an SQLite database, or it is damaged."""


class SchemaTooNewError(StoreError):
    """The database was migrated by a newer version of openclaw-ctx."""


class ForeignDatabaseError(StoreError):
    """The file is an SQLite database some other program made (lossless-claw's lcm.db, OpenClaw's agent store)."""


class MigrationRequiredError(StoreError):
    """The database schema is older than the code and automatic upgrade is disabled."""


class ReadOnlyViolationError(StoreError):
    """A statement that would write was sent through the read-only SQL surface."""


class ReadOnlyStorageError(StoreError):
    """A write asked of a store opened from storage this process cannot write."""


class TurnConflictError(StoreError):
    """A ``commitTurn`` that contradicts what is stored: nothing of it is written, and the host retries it."""


class NotFoundError(StoreError):
    """The requested row does not exist."""


class SummarizerError(OpenClawCtxError):
    """A summarizer failed to produce a summary."""


class SummarizerAuthError(SummarizerError):
    """The summarizer's provider rejected the credentials; nothing must be written."""


class CompactionError(OpenClawCtxError):
    """Compaction could not complete; the store is as it was before."""


class ContextOverflowError(OpenClawCtxError):
    """The prompt is too large for the model even after recovery."""

    def __init__(self, detail: str, kind: str = "context_overflow") -> None:
        super().__init__(detail)
        self.kind = kind


ProviderErrorKind = Literal[
    "auth",
    "quota",
    "rate_limit",
    "server",
    "connection",
    "timeout",
    "malformed",
    "bad_request",
    "context_overflow",
    "circuit_open",
    "spend_limit",
    "empty",
]


class RecallQueryError(OpenClawCtxError, ValueError):
    """A recall request that cannot run as written (empty pattern, invalid regex, bad argument, over a limit)."""


class ProviderError(OpenClawCtxError):
    """A provider call failed; `kind` classifies it, `attempts` holds every candidate's error after a fallback.

    The fault policy for each kind (retried? trips the breaker? worth a fallback?) is in
    ``openclaw_ctx.providers.resilience``.
    """

    def __init__(
        self,
        detail: str,
        *,
        kind: ProviderErrorKind,
        provider: str,
        status: int | None = None,
        retry_after: float | None = None,
        attempts: Sequence[ProviderError] = (),
    ) -> None:
        super().__init__(detail)
        self.kind: ProviderErrorKind = kind
        self.provider = provider
        self.status = status
        self.retry_after = retry_after
        self.attempts = list(attempts)


class AbortError(OpenClawCtxError):
    """The operation was aborted by its caller."""


class OutputPathError(OpenClawCtxError):
    """An output path the command will not write: an existing file without --force, or the database."""


class HostStoreError(OpenClawCtxError):
    """OpenClaw's agent store (``openclaw-agent.sqlite``) is missing, not SQLite, not an agent store, or undecodable."""


class MissingDependencyError(OpenClawCtxError, ImportError):
    """An optional tool or package is not installed; the detail says how to install it."""
