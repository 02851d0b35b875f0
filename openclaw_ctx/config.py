"""`openclaw.json` (JSON5): the engine slot, plugin entries, compaction settings, and default paths.

Resolution order for the config file: ``--config`` flag → ``OPENCLAW_CONFIG_PATH`` →
``$OPENCLAW_STATE_DIR/openclaw.json`` (state dir defaults to ``~/.openclaw``). A missing file is an
empty config (legacy engine, built-in defaults). Keys this code does not know are kept, untouched.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Annotated, Any, Literal

import json5
from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, ValidationError
from pydantic.alias_generators import to_camel

from openclaw_ctx.errors import ConfigError

__all__ = [
    "CompactionSettings",
    "OpenClawConfig",
    "default_config_path",
    "default_db_path",
    "default_state_dir",
    "load_config",
]

DEFAULT_ENGINE_ID = "legacy"


class _Model(BaseModel):
    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True, extra="allow")


class PluginEntry(_Model):
    """`plugins.entries.<id>`: whether the plugin is enabled and its own config."""

    enabled: bool = True
    config: dict[str, Any] = Field(default_factory=dict)


class PluginSlots(_Model):
    """`plugins.slots`: exclusive selections."""

    context_engine: str | None = None
    memory: str | None = None


class PluginsConfig(_Model):
    """`plugins`."""

    enabled: bool = True
    slots: PluginSlots = Field(default_factory=PluginSlots)
    entries: dict[str, PluginEntry] = Field(default_factory=dict)
    allow: list[str] | None = None
    deny: list[str] = Field(default_factory=list)


def _primary_model(value: Any) -> Any:
    # OpenClaw writes a model either as "provider/model" or as {"primary": "provider/model", "fallbacks": [...]}.
    if isinstance(value, dict):
        return value.get("primary")
    return value


ModelRef = Annotated[str | None, BeforeValidator(_primary_model)]
"""A model setting: its ``provider/model`` string (the primary one when OpenClaw lists fallbacks)."""


class CompactionSettings(_Model):
    """`agents.defaults.compaction`: the built-in compaction's knobs (OpenClaw's names and defaults)."""

    enabled: bool = True
    mode: Literal["default", "safeguard"] = "default"
    reserve_tokens: int = Field(16384, ge=0)
    reserve_tokens_floor: int = Field(20000, ge=0)
    keep_recent_tokens: int = Field(20000, ge=0)
    timeout_seconds: float = Field(900, gt=0)
    identifier_policy: Literal["strict", "off", "custom"] = "strict"
    identifier_instructions: str | None = None
    model: ModelRef = None
    provider: str | None = None

    def effective_reserve(self) -> int:
        """`reserveTokens` floored at `reserveTokensFloor` (0 disables the floor)."""
        return max(self.reserve_tokens, self.reserve_tokens_floor) if self.reserve_tokens_floor else self.reserve_tokens


class AgentDefaults(_Model):
    """`agents.defaults`."""

    compaction: CompactionSettings = Field(default_factory=CompactionSettings)
    context_window: int | None = None
    model: ModelRef = None


class AgentsConfig(_Model):
    """`agents`."""

    defaults: AgentDefaults = Field(default_factory=AgentDefaults)


class OpenClawConfig(_Model):
    """The parts of openclaw.json this project reads; everything else is preserved as extra keys."""

    plugins: PluginsConfig = Field(default_factory=PluginsConfig)
    agents: AgentsConfig = Field(default_factory=AgentsConfig)
    source_path: str | None = Field(default=None, exclude=True)

    def slot_engine(self) -> tuple[str, Literal["configured", "default"]]:
        """The engine id the slot selects and whether it came from configuration."""
        raw = self.plugins.slots.context_engine
        if isinstance(raw, str) and raw.strip():
            return raw.strip(), "configured"
        return DEFAULT_ENGINE_ID, "default"

    def with_engine(self, engine_id: str) -> OpenClawConfig:
        """A copy whose slot selects `engine_id` (with an enabled entry for a plugin engine)."""
        config = self.model_copy(deep=True)
        config.plugins.slots.context_engine = engine_id
        if engine_id != DEFAULT_ENGINE_ID and engine_id not in config.plugins.entries:
            config.plugins.entries[engine_id] = PluginEntry(enabled=True)
        return config

    def entry(self, plugin_id: str) -> PluginEntry | None:
        """The plugin entry for `plugin_id`, if configured."""
        return self.plugins.entries.get(plugin_id)

    def plugin_enabled(self, plugin_id: str) -> bool:
        """False when plugins are off globally, the plugin is denied, not allowed, or its entry is disabled."""
        plugins = self.plugins
        if not plugins.enabled or plugin_id in plugins.deny:
            return False
        if plugins.allow is not None and plugin_id not in plugins.allow:
            return False
        entry = plugins.entries.get(plugin_id)
        return entry.enabled if entry is not None else True


def default_state_dir() -> Path:
    """OpenClaw's state directory: ``$OPENCLAW_STATE_DIR`` or ``~/.openclaw``."""
    return Path(os.environ.get("OPENCLAW_STATE_DIR") or Path.home() / ".openclaw").expanduser()


def default_config_path() -> Path:
    """``$OPENCLAW_CONFIG_PATH`` or ``<state dir>/openclaw.json``."""
    explicit = os.environ.get("OPENCLAW_CONFIG_PATH")
    return Path(explicit).expanduser() if explicit else default_state_dir() / "openclaw.json"


def default_db_path() -> Path:
    """``$OPENCLAW_CTX_DB`` or ``<state dir>/openclaw-ctx.db``."""
    explicit = os.environ.get("OPENCLAW_CTX_DB")
    return Path(explicit).expanduser() if explicit else default_state_dir() / "openclaw-ctx.db"


def load_config(path: str | Path | None = None) -> OpenClawConfig:
    """Read and validate openclaw.json; a missing file (at the default path) is an empty config.

    Raises:
        ConfigError: the file is not JSON5, or a known key has the wrong type (the key is named).
    """
    explicit = path is not None
    file = Path(path).expanduser() if path is not None else default_config_path()
    if not file.exists():
        if explicit:
            raise ConfigError(f"{file}: config file not found")
        return OpenClawConfig()
    try:
        data = json5.loads(file.read_text(encoding="utf-8"))
    except (ValueError, UnicodeDecodeError) as exc:
        raise ConfigError(f"{file}: not valid JSON5 ({exc})") from exc
    if not isinstance(data, dict):
        raise ConfigError(f"{file}: expected an object at the top level, got {type(data).__name__}")
    try:
        # Strict, as OpenClaw's own schema is: "yes" is not a boolean and "1000" is not a number.
        config = OpenClawConfig.model_validate(data, strict=True)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"])
        got = repr(first.get("input"))
        raise ConfigError(f"{file}: {where}: {first['msg']} (got {got[:80]})") from exc
    config.source_path = str(file)
    return config


ENGINES_ENV = "OPENCLAW_CTX_ENGINES"
"""Comma-separated engine ids whose entry points may load (engines and their transcript entry kinds)."""


def engines_allowed_by_env() -> frozenset[str] | None:
    """The engine ids ``OPENCLAW_CTX_ENGINES`` allows (``None``: unset or blank, no restriction)."""
    raw = os.environ.get(ENGINES_ENV)
    if raw is None or not raw.strip():
        return None
    return frozenset(part.strip() for part in raw.split(",") if part.strip())
