"""`chat`: an interactive terminal chat through the runtime, durable in the store.

Every turn goes through :class:`~openclaw_ctx.host.runtime.Runtime` with the chosen engine and a real provider
model (``--model`` or ``agents.defaults.model``); summaries use the configured summary model, else the
chat model. Quit and start again with the same ``--db`` and ``--key``: the conversation continues from
the store. Lines are read with plain ``input()``, so it works on a terminal and on piped stdin.

The event loop lives across the whole chat (one :class:`asyncio.Runner`) but runs only while a turn or
a command is working: Ctrl-C while typing leaves the chat, Ctrl-C during a turn cancels just that turn.
"""

from __future__ import annotations

import asyncio
import contextlib
import shlex
import sys
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, NoReturn

import typer
from rich.markup import escape

from openclaw_ctx import recall
from openclaw_ctx.cli.app import CliState, console, err_console, known_engine, open_store, state_of
from openclaw_ctx.cli.commands.recall import print_expansion, print_grep_hits
from openclaw_ctx.config import OpenClawConfig
from openclaw_ctx.errors import OpenClawCtxError, ProviderError
from openclaw_ctx.messages import AgentMessage, AssistantMessage, TextContent, ToolCall, ToolResultMessage

if TYPE_CHECKING:
    from openclaw_ctx.contract.model import Model
    from openclaw_ctx.host.runtime import Runtime
    from openclaw_ctx.store.store import Store
    from openclaw_ctx.summarize.base import Summarizer

__all__ = ["EXIT_NOT_CONFIGURED", "register"]

EXIT_NOT_CONFIGURED = 2
DEFAULT_SYSTEM_PROMPT = "You are a helpful assistant in a terminal chat. Answer concisely."
HELP = """commands:
  /compact [instructions]  summarise the conversation now (optional focus for the summary)
  /new, /reset             start a fresh session for this key (history stays in the store)
  /grep PATTERN            search this key's whole history (every session)
  /expand SUMMARY_ID [--messages]
                           open a summary down to its sources (and the original messages)
  /status                  engine, session id, context tokens vs budget
  /help                    this list
  /quit, /exit             leave (Ctrl-D too); the conversation continues next time"""


def register(app: typer.Typer) -> None:
    """Add `chat` to `app`."""
    app.command("chat")(chat)


def chat(
    ctx: typer.Context,
    key: str = typer.Option(..., "--key", "-k", help="Session key; the same key continues the conversation."),
    engine: str = typer.Option(
        None, "--engine", "-e", help="Override the configured engine slot.", callback=known_engine
    ),
    model: str = typer.Option(
        None,
        "--model",
        "-m",
        help="provider/model, e.g. openai/gpt-4o-mini, anthropic/claude-sonnet-4-5, ollama/llama3.1 "
        "\\[default: agents.defaults.model].",
        show_default=False,
    ),
    budget: int = typer.Option(
        None, "--budget", "-b", min=1_000, help="Context window in tokens \\[default: the model's].", show_default=False
    ),
    system: str = typer.Option(DEFAULT_SYSTEM_PROMPT, "--system", help="System prompt."),
) -> None:
    """Chat with a model through the runtime; /compact, /new, /reset, /grep, /expand, /status inside."""
    state = state_of(ctx)
    try:
        config = _chat_config(state, engine, model)
        turn_model, summarizer = _providers(config)
    except OpenClawCtxError as exc:
        _fail(exc)
    if turn_model is None:
        from openclaw_ctx.providers.settings import CONFIGURE_HELP

        err_console.print(escape(CONFIGURE_HELP), highlight=False, soft_wrap=True)
        raise typer.Exit(EXIT_NOT_CONFIGURED)
    with asyncio.Runner() as runner:
        try:
            session = runner.run(ChatSession.open(state, config, turn_model, summarizer, key, budget, system))
        except OpenClawCtxError as exc:
            _fail(exc)
        try:
            runner.run(session.banner())
            _loop(runner, session)
        except OpenClawCtxError as exc:
            _fail(exc)
        finally:
            runner.run(session.close())


def _fail(exc: OpenClawCtxError) -> NoReturn:
    err_console.print(f"[bold red]error:[/] {escape(exc.detail)}", highlight=False, soft_wrap=True)
    raise typer.Exit(1) from exc


def _chat_config(state: CliState, engine: str | None, model: str | None) -> OpenClawConfig:
    config = state.config()
    if engine:
        config = config.with_engine(engine)
    if model:
        # The chat model takes the place of agents.defaults.model: turns use it, and so do summaries
        # unless a summary model is configured (OpenClaw compacts with the session's model by default).
        config = config.model_copy(deep=True)
        config.agents.defaults.model = model
    return config


def _providers(config: OpenClawConfig) -> tuple[Model | None, Summarizer]:
    """The turn model (None: nothing configured) and the summarizer.

    Raises:
        ConfigError: a configured provider cannot be used as written.
    """
    from openclaw_ctx.providers.settings import resolve_model
    from openclaw_ctx.summarize import default_summarizer
    from openclaw_ctx.summarize.settings import resolve_summarizer

    turn_model = resolve_model(config)
    if turn_model is None:
        return None, default_summarizer()
    return turn_model, resolve_summarizer(config) or default_summarizer()


def _loop(runner: asyncio.Runner, session: ChatSession) -> None:
    if sys.stdin.isatty():
        with contextlib.suppress(ImportError):
            import readline  # noqa: F401 - line editing and history for input() on a terminal
    while True:
        try:
            line = input("you> ")
        except (EOFError, KeyboardInterrupt):
            console.print()
            return
        line = line.strip()
        if not line:
            continue
        try:
            if not runner.run(session.handle(line)):
                return
        except KeyboardInterrupt:
            err_console.print("[yellow]interrupted:[/] the turn was cancelled")


@dataclass
class ChatSession:
    """One chat: the store, the runtime and the key; `handle` takes a line, False means leave."""

    store: Store
    runtime: Runtime
    model: Model
    key: str
    summarizer: Summarizer

    @classmethod
    async def open(
        cls,
        state: CliState,
        config: OpenClawConfig,
        model: Model,
        summarizer: Summarizer,
        key: str,
        budget: int | None,
        system: str,
    ) -> ChatSession:
        """Open the store and build the runtime."""
        from openclaw_ctx.host.runtime import Runtime

        store = await open_store(state)
        try:
            runtime = await Runtime.create(
                store, config=config, model=model, summarizer=summarizer, context_window=budget, system_prompt=system
            )
        except BaseException:
            await store.close()
            raise
        return cls(store, runtime, model, key, summarizer)

    async def close(self) -> None:
        """Release the engine and close the store."""
        try:
            await self.runtime.dispose()
        finally:
            await self.store.close()

    async def banner(self) -> None:
        """Who is talking to whom, and whether the conversation continues."""
        from openclaw_ctx.store import repo

        session = await self.runtime.session(self.key)
        async with self.store.read() as conn:
            stored = await repo.context_item_count(conn, session.session_id)
        model = self.model
        where = (
            f"continuing session {session.session_id} ({stored} items in context)"
            if stored
            else (f"new session {session.session_id}")
        )
        console.print(
            f"chat on [bold]{escape(self.key)}[/] · engine {self.runtime.engine.info.id} · "
            f"model {escape(model.provider)}/{escape(model.name)}",
            highlight=False,
            soft_wrap=True,
        )
        console.print(f"{where}. /help lists commands, /quit leaves.", highlight=False, soft_wrap=True)

    async def handle(self, line: str) -> bool:
        """Run a slash command or a turn; False when the user asked to leave."""
        if line.startswith("/"):
            name, _, rest = line[1:].partition(" ")
            if name in ("quit", "exit"):
                return False
            command = self._commands().get(name)
            if command is None:
                err_console.print(f"unknown command /{escape(name)}; /help lists them", highlight=False, soft_wrap=True)
                return True
            await self._guarded(command(rest.strip()))
            return True
        await self._guarded(self.turn(line))
        return True

    def _commands(self) -> dict[str, Callable[[str], Awaitable[None]]]:
        return {
            "help": self.help,
            "compact": self.compact,
            "new": self.new,
            "reset": self.reset,
            "grep": self.grep,
            "expand": self.expand,
            "status": self.status,
        }

    async def _guarded(self, work: Awaitable[None]) -> None:
        """Run `work`; any failure is one clear line and the chat goes on."""
        try:
            await work
        except ProviderError as exc:
            hint = " (check the provider's API key)" if exc.kind == "auth" else ""
            err_console.print(f"[bold red]error:[/] {escape(exc.detail)}{hint}", highlight=False, soft_wrap=True)
        except OpenClawCtxError as exc:
            err_console.print(f"[bold red]error:[/] {escape(exc.detail)}", highlight=False, soft_wrap=True)
        except Exception as exc:  # the chat outlives any one failed turn
            err_console.print(
                f"[bold red]error:[/] {type(exc).__name__}: {escape(str(exc))}", highlight=False, soft_wrap=True
            )

    # --- a turn ---------------------------------------------------------------------------------

    async def turn(self, text: str) -> None:
        """One user turn; prints the replies (and tool calls) it produced."""
        result = await self.runtime.run_turn(self.key, text)
        for message in result.new_messages[1:]:
            _print_message(message)
        for compaction in result.compactions:
            if compaction.compacted and compaction.result is not None:
                detail = compaction.result
                console.print(
                    f"[dim](compacted: {detail.tokens_before:,} → {detail.tokens_after or 0:,} tokens)[/]",
                    highlight=False,
                    soft_wrap=True,
                )

    # --- commands ---------------------------------------------------------------------------------

    async def help(self, _args: str) -> None:
        """List the commands."""
        console.print(HELP, markup=False, highlight=False, soft_wrap=True)

    async def compact(self, instructions: str) -> None:
        """`/compact [instructions]`."""
        # A compaction deferred from the last turn runs first (the key's lock waits for it); say so,
        # or the manual one's "nothing to compact" would hide that the context just shrank.
        for background in await self.runtime.settle(self.key):
            if background.ok and background.compacted and background.result is not None:
                done = background.result
                console.print(
                    f"background compaction (deferred from the last turn): {done.tokens_before:,} → "
                    f"{done.tokens_after or 0:,} tokens; session {done.session_id}",
                    highlight=False,
                    soft_wrap=True,
                )
        result = await self.runtime.compact(self.key, instructions=instructions or None)
        if not result.ok:
            err_console.print(
                f"[bold red]compaction failed:[/] {escape(result.reason or 'unknown')}", highlight=False, soft_wrap=True
            )
            return
        if not result.compacted or result.result is None:
            console.print(f"nothing compacted: {escape(result.reason or '')}", highlight=False, soft_wrap=True)
            return
        detail = result.result
        who = await self._latest_summary()
        console.print(
            f"compacted: {detail.tokens_before:,} → {detail.tokens_after or 0:,} tokens{who}; "
            f"session {detail.session_id or (await self.runtime.session(self.key)).session_id}",
            highlight=False,
            soft_wrap=True,
        )

    async def _latest_summary(self) -> str:
        from openclaw_ctx.store import repo

        async with self.store.read() as conn:
            latest = await repo.latest_summary(conn, self.key)
        if latest is None:
            return ""
        by = f"{latest.summarizer} ({latest.model})" if latest.model else latest.summarizer
        marked = f", {latest.fallback_level} fallback" if latest.fallback_level != "none" else ""
        return f"; summary {latest.summary_id} by {escape(by)}{marked}"

    async def new(self, _args: str) -> None:
        """`/new`: a fresh session for the key."""
        await self._fresh("new")

    async def reset(self, _args: str) -> None:
        """`/reset`: the same as `/new` (OpenClaw's meaning)."""
        await self._fresh("reset")

    async def _fresh(self, reason: str) -> None:
        old = await self.runtime.session(self.key)
        fresh = await self.runtime.new_session(self.key, reason=reason)
        console.print(
            f"new session {fresh.session_id} for {escape(self.key)}; "
            f"the previous one ({old.session_id}) stays in the store (/grep finds it)",
            highlight=False,
            soft_wrap=True,
        )

    async def grep(self, pattern: str) -> None:
        """`/grep PATTERN`: recall across every session of the key."""
        if not pattern:
            err_console.print("usage: /grep PATTERN")
            return
        hits = await recall.grep(self.store, pattern, session_key=self.key, limit=20)
        print_grep_hits(hits, pattern)

    async def expand(self, args: str) -> None:
        """`/expand SUMMARY_ID [--messages]`."""
        words = shlex.split(args)
        refs = [w for w in words if not w.startswith("--")]
        if len(refs) != 1 or any(w not in ("--messages",) for w in words if w.startswith("--")):
            err_console.print("usage: /expand SUMMARY_ID [--messages]")
            return
        result = await recall.expand(self.store, refs[0], include_messages="--messages" in words)
        print_expansion(result)

    async def status(self, _args: str) -> None:
        """`/status`: engine, session id, context tokens vs budget."""
        from openclaw_ctx.store import repo

        runtime = self.runtime
        session = await runtime.session(self.key)
        async with self.store.read() as conn:
            tokens = await repo.context_tokens(conn, session.session_id)
            sessions = len(await repo.session_chain(conn, self.key))
        summarizer: Any = self.summarizer
        summary_model = getattr(summarizer, "model", None)
        lines = [
            ("engine", runtime.engine.info.id),
            ("session key", self.key),
            ("session id", session.session_id),
            ("sessions of this key", f"{sessions}"),
            ("model", f"{self.model.provider}/{self.model.name}"),
            ("summarizer", summarizer.name + (f" ({summary_model})" if summary_model else "")),
            (
                "context",
                f"{tokens:,} / {runtime.prompt_budget:,} tokens "
                f"({100 * tokens / runtime.prompt_budget:.0f}% of the budget; window {runtime.context_window:,})",
            ),
        ]
        for label, value in lines:
            console.print(f"{label + ':':22} {escape(value)}", highlight=False, soft_wrap=True)


def _print_message(message: AgentMessage) -> None:
    if isinstance(message, AssistantMessage):
        for block in message.content:
            if isinstance(block, TextContent) and block.text.strip():
                console.print(block.text, markup=False, highlight=False, soft_wrap=True)
            elif isinstance(block, ToolCall):
                console.print(f"[dim]→ {escape(block.name)} {escape(str(block.arguments))}[/]", soft_wrap=True)
        if message.error_message:
            err_console.print(f"[bold red]error:[/] {escape(message.error_message)}", highlight=False, soft_wrap=True)
    elif isinstance(message, ToolResultMessage):
        size = sum(len(b.text) for b in message.content if isinstance(b, TextContent))
        state = "failed" if message.is_error else "done"
        console.print(f"[dim]← {escape(message.tool_name or 'tool')} {state} ({size:,} chars)[/]", soft_wrap=True)
