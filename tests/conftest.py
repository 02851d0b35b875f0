"""Shared fixtures: every test gets its own state dir and a real SQLite file through the real Store."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from pathlib import Path

import pytest
from typer.testing import Result

from openclaw_ctx.store.store import Store


@pytest.fixture(autouse=True)
def isolated_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Point OpenClaw's state dir, config and database at the test's own tmp dir."""
    state = tmp_path / "state"
    state.mkdir()
    monkeypatch.setenv("OPENCLAW_STATE_DIR", str(state))
    monkeypatch.delenv("OPENCLAW_CONFIG_PATH", raising=False)
    monkeypatch.delenv("OPENCLAW_CTX_DB", raising=False)
    monkeypatch.delenv("OPENCLAW_CTX_ENCODING", raising=False)
    for name in (
        "OPENAI_API_KEY",
        "OPENAI_BASE_URL",
        "ANTHROPIC_API_KEY",
        "ANTHROPIC_BASE_URL",
        "LCM_SUMMARY_MODEL",
        "LCM_SUMMARY_PROVIDER",
        "LCM_SUMMARY_BASE_URL",
        "LCM_FALLBACK_PROVIDERS",
    ):
        monkeypatch.delenv(name, raising=False)
    return state


@pytest.fixture
def db_path(tmp_path: Path) -> Path:
    """A fresh database file path."""
    return tmp_path / "ctx.db"


@pytest.fixture
async def store(db_path: Path) -> AsyncIterator[Store]:
    """A migrated Store on a real SQLite file."""
    s = await Store.open(db_path)
    try:
        yield s
    finally:
        await s.close()


@pytest.fixture
def cli_invoke() -> Callable[..., Result]:
    """Run the real `openclaw-ctx` app in-process (commands loaded once, as `main()` does)."""
    from typer.testing import CliRunner

    import openclaw_ctx.cli.app as cli

    if not any(c.name == "doctor" for c in cli.app.registered_commands):
        cli._load_commands()

    def invoke(*args: str, input: str | None = None) -> Result:
        return CliRunner().invoke(cli.app, list(args), input=input)

    return invoke
