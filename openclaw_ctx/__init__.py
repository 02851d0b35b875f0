"""openclaw-ctx: persistent, SQL-backed context engines for LLM agents.

The public API, for programs that use the runtime as a library::

    from openclaw_ctx import Runtime, Store, UserMessage, default_summarizer

Every name below is importable from here; where it lives inside the package may change, this list
is what stays. Names load on first use (PEP 562 ``__getattr__``), so ``openclaw-ctx --help`` and the
engines, which import ``openclaw_ctx.*`` submodules, do not pay for the runtime they do not use.
Nothing inside the project imports this module. Test helpers (a scripted model, message factories,
a fake summarizer) are in :mod:`openclaw_ctx.testing`.
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

from openclaw_ctx._version import __version__

if TYPE_CHECKING:
    from openclaw_ctx.config import OpenClawConfig
    from openclaw_ctx.contract import (
        AbortSignal,
        AfterTurnParams,
        AssembleParams,
        AssembleResult,
        BootstrapParams,
        BootstrapResult,
        CompactParams,
        CompactResult,
        CompactResultDetail,
        ContextEngine,
        EngineContext,
        EngineFactory,
        EngineInfo,
        HostRequirements,
        IngestBatchParams,
        IngestBatchResult,
        IngestParams,
        IngestResult,
        PrepareSubagentSpawnParams,
        SubagentEndedParams,
        SubagentSpawnPreparation,
    )
    from openclaw_ctx.contract.model import Model, ModelRequest, ToolExecutor, ToolSpec
    from openclaw_ctx.contract.settings import RuntimeSettings
    from openclaw_ctx.errors import (
        AbortError,
        CompactionError,
        ConfigError,
        ContextOverflowError,
        DatabaseCorruptError,
        EngineContractError,
        EngineError,
        EngineNotFoundError,
        HostRequirementError,
        InvalidMessageError,
        MigrationRequiredError,
        MissingDependencyError,
        NotFoundError,
        OpenClawCtxError,
        ProviderError,
        ReadOnlyStorageError,
        ReadOnlyViolationError,
        SchemaTooNewError,
        StoreError,
        SummarizerAuthError,
        SummarizerError,
    )
    from openclaw_ctx.host import Runtime, TurnResult
    from openclaw_ctx.messages import (
        AgentMessage,
        AssistantMessage,
        BashExecutionMessage,
        BranchSummaryMessage,
        CompactionSummaryMessage,
        CustomMessage,
        ImageContent,
        TextContent,
        ThinkingContent,
        ToolCall,
        ToolResultMessage,
        Usage,
        UserMessage,
        flatten_text,
        parse_message,
        to_wire,
    )
    from openclaw_ctx.store import Store
    from openclaw_ctx.summarize import (
        ExtractiveSummarizer,
        Summarizer,
        SummaryOutput,
        SummaryRequest,
        default_summarizer,
    )

# Where each public name is imported from on first use: package faces, which stay put while the
# modules behind them move. Kept equal to the TYPE_CHECKING imports above (tests/project/test_public_api.py).
_SOURCES: dict[str, tuple[str, ...]] = {
    "openclaw_ctx.config": ("OpenClawConfig",),
    "openclaw_ctx.contract": (
        "AbortSignal",
        "AfterTurnParams",
        "AssembleParams",
        "AssembleResult",
        "BootstrapParams",
        "BootstrapResult",
        "CompactParams",
        "CompactResult",
        "CompactResultDetail",
        "ContextEngine",
        "EngineContext",
        "EngineFactory",
        "EngineInfo",
        "HostRequirements",
        "IngestBatchParams",
        "IngestBatchResult",
        "IngestParams",
        "IngestResult",
        "PrepareSubagentSpawnParams",
        "SubagentEndedParams",
        "SubagentSpawnPreparation",
    ),
    "openclaw_ctx.contract.model": ("Model", "ModelRequest", "ToolExecutor", "ToolSpec"),
    "openclaw_ctx.contract.settings": ("RuntimeSettings",),
    "openclaw_ctx.errors": (
        "AbortError",
        "CompactionError",
        "ConfigError",
        "ContextOverflowError",
        "DatabaseCorruptError",
        "EngineContractError",
        "EngineError",
        "EngineNotFoundError",
        "HostRequirementError",
        "InvalidMessageError",
        "MigrationRequiredError",
        "MissingDependencyError",
        "NotFoundError",
        "OpenClawCtxError",
        "ProviderError",
        "ReadOnlyStorageError",
        "ReadOnlyViolationError",
        "SchemaTooNewError",
        "StoreError",
        "SummarizerAuthError",
        "SummarizerError",
    ),
    "openclaw_ctx.host": ("Runtime", "TurnResult"),
    "openclaw_ctx.messages": (
        "AgentMessage",
        "AssistantMessage",
        "BashExecutionMessage",
        "BranchSummaryMessage",
        "CompactionSummaryMessage",
        "CustomMessage",
        "ImageContent",
        "TextContent",
        "ThinkingContent",
        "ToolCall",
        "ToolResultMessage",
        "Usage",
        "UserMessage",
        "flatten_text",
        "parse_message",
        "to_wire",
    ),
    "openclaw_ctx.store": ("Store",),
    "openclaw_ctx.summarize": (
        "ExtractiveSummarizer",
        "Summarizer",
        "SummaryOutput",
        "SummaryRequest",
        "default_summarizer",
    ),
}
_SOURCE_OF = {name: module for module, names in _SOURCES.items() for name in names}

__all__ = [
    "AbortError",
    "AbortSignal",
    "AfterTurnParams",
    "AgentMessage",
    "AssembleParams",
    "AssembleResult",
    "AssistantMessage",
    "BashExecutionMessage",
    "BootstrapParams",
    "BootstrapResult",
    "BranchSummaryMessage",
    "CompactParams",
    "CompactResult",
    "CompactResultDetail",
    "CompactionError",
    "CompactionSummaryMessage",
    "ConfigError",
    "ContextEngine",
    "ContextOverflowError",
    "CustomMessage",
    "DatabaseCorruptError",
    "EngineContext",
    "EngineContractError",
    "EngineError",
    "EngineFactory",
    "EngineInfo",
    "EngineNotFoundError",
    "ExtractiveSummarizer",
    "HostRequirementError",
    "HostRequirements",
    "ImageContent",
    "IngestBatchParams",
    "IngestBatchResult",
    "IngestParams",
    "IngestResult",
    "InvalidMessageError",
    "MigrationRequiredError",
    "MissingDependencyError",
    "Model",
    "ModelRequest",
    "NotFoundError",
    "OpenClawConfig",
    "OpenClawCtxError",
    "PrepareSubagentSpawnParams",
    "ProviderError",
    "ReadOnlyStorageError",
    "ReadOnlyViolationError",
    "Runtime",
    "RuntimeSettings",
    "SchemaTooNewError",
    "Store",
    "StoreError",
    "SubagentEndedParams",
    "SubagentSpawnPreparation",
    "Summarizer",
    "SummarizerAuthError",
    "SummarizerError",
    "SummaryOutput",
    "SummaryRequest",
    "TextContent",
    "ThinkingContent",
    "ToolCall",
    "ToolExecutor",
    "ToolResultMessage",
    "ToolSpec",
    "TurnResult",
    "Usage",
    "UserMessage",
    "__version__",
    "default_summarizer",
    "flatten_text",
    "parse_message",
    "to_wire",
]


def __getattr__(name: str) -> Any:
    """Import a public name from its package on first use, and keep it here."""
    module = _SOURCE_OF.get(name)
    if module is None:
        raise AttributeError(f"module 'openclaw_ctx' has no attribute {name!r}")
    value = getattr(import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
