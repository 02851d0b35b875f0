"""LLMSummarizer and settings resolution, against the loopback server."""

from __future__ import annotations

import pickle
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from loopback import Empty, LoopbackServer, RecordingSleep, Reply, Status, serve
from sqlalchemy import text

from openclaw_ctx.compaction import compact_session
from openclaw_ctx.config import CompactionSettings, OpenClawConfig, load_config
from openclaw_ctx.contract.model import Model, ModelRequest
from openclaw_ctx.errors import ConfigError, SummarizerAuthError, SummarizerError
from openclaw_ctx.messages import AssistantMessage, TextContent, UserMessage
from openclaw_ctx.providers import AnthropicClient, OpenAIClient, RetryPolicy, Secret
from openclaw_ctx.providers.settings import resolve_model, resolve_summary_specs
from openclaw_ctx.store import repo
from openclaw_ctx.store.store import Store
from openclaw_ctx.summarize.base import Summarizer, SummaryRequest
from openclaw_ctx.summarize.llm import LLMSummarizer, strip_reasoning
from openclaw_ctx.summarize.settings import resolve_summarizer


@pytest.fixture
def loopback() -> Iterator[LoopbackServer]:
    with serve() as server:
        yield server


FAST: dict[str, Any] = {"retry": RetryPolicy(base_delay_s=0.01, max_delay_s=0.02), "sleep": RecordingSleep()}
REQUEST = SummaryRequest(
    kind="leaf",
    source_text="[user] fix the parser\n[assistant] fixed it in parse.py",
    target_tokens=300,
    system_prompt="You are a context-compaction summarization engine.",
    prompt="Summarize this SEGMENT:\n<conversation_segment>...</conversation_segment>",
    metadata={"session_key": "agent:main:main"},
)


def openai(loopback: LoopbackServer, **kw: Any) -> OpenAIClient:
    return OpenAIClient(base_url=loopback.openai_url, api_key="sk-summ", **{**FAST, **kw})


async def test_sends_system_prompt_and_prompt_and_names_the_model(loopback: LoopbackServer) -> None:
    loopback.script(Reply(text="Fixed the parser in parse.py.\nExpand for details about: nothing", usage=(400, 30)))
    summarizer = LLMSummarizer(openai(loopback, provider="vllm"), "qwen3-32b")
    assert isinstance(summarizer, Summarizer) and summarizer.name == "vllm"
    out = await summarizer.summarize(REQUEST)
    assert out.text.startswith("Fixed the parser")
    assert (out.summarizer, out.model, out.input_tokens, out.output_tokens) == ("vllm", "qwen3-32b", 400, 30)
    body = loopback.requests[0].body
    assert body["messages"] == [
        {"role": "system", "content": REQUEST.system_prompt},
        {"role": "user", "content": REQUEST.prompt},
    ]
    assert body["max_tokens"] == 300 + 2048


async def test_anthropic_summary(loopback: LoopbackServer) -> None:
    client = AnthropicClient(base_url=loopback.base_url, api_key="ak", **FAST)
    out = await LLMSummarizer(client, "claude-haiku").summarize(REQUEST)
    assert (out.text, out.summarizer, out.model) == ("ok", "anthropic", "claude-haiku")
    assert loopback.requests[0].body["system"] == REQUEST.system_prompt


async def test_reasoning_leaks_are_stripped(loopback: LoopbackServer) -> None:
    loopback.script(Reply(text="<think>the user wants brevity</think>\nThe summary.", thinking="hidden reasoning"))
    out = await LLMSummarizer(openai(loopback), "m").summarize(REQUEST)
    assert out.text == "The summary."


@pytest.mark.parametrize(
    ("raw", "clean"),
    [
        ("<thinking>a\nb</thinking>Done.", "Done."),
        ("reasoning without an opener</think>\nDone.", "Done."),
        ("Done.\n<reasoning>cut off mid-thought", "Done."),
        ("No tags at all.", "No tags at all."),
    ],
)
def test_strip_reasoning(raw: str, clean: str) -> None:
    assert strip_reasoning(raw) == clean


async def test_empty_reply_is_retried_once_with_more_room(loopback: LoopbackServer) -> None:
    loopback.script(Empty(), Reply(text="Second try."))
    out = await LLMSummarizer(openai(loopback), "m").summarize(REQUEST)
    assert out.text == "Second try."
    assert [r.body["max_tokens"] for r in loopback.requests] == [2348, 4696]


async def test_reasoning_only_reply_counts_as_empty(loopback: LoopbackServer) -> None:
    loopback.default = Reply(text="<think>only thoughts</think>")
    with pytest.raises(SummarizerError, match="empty summary") as info:
        await LLMSummarizer(openai(loopback), "m").summarize(REQUEST)
    assert not isinstance(info.value, SummarizerAuthError)
    assert len(loopback.requests) == 2


async def test_auth_failure_raises_summarizer_auth_error(loopback: LoopbackServer) -> None:
    loopback.default = Status(401, "invalid x-api-key", "authentication_error")
    client = AnthropicClient(base_url=loopback.base_url, api_key="ak-bad", **FAST)
    with pytest.raises(SummarizerAuthError, match="rejected the credentials"):
        await LLMSummarizer(client, "claude").summarize(REQUEST)
    assert len(loopback.requests) == 1


@pytest.mark.parametrize("behaviour", [Status(500), Status(400, "bad"), Status(429, headers={"Retry-After": "999"})])
async def test_other_failures_raise_summarizer_error(loopback: LoopbackServer, behaviour: Any) -> None:
    loopback.default = behaviour
    with pytest.raises(SummarizerError) as info:
        await LLMSummarizer(openai(loopback), "m").summarize(REQUEST)
    assert not isinstance(info.value, SummarizerAuthError)


async def test_fallback_provider_names_itself(loopback: LoopbackServer) -> None:
    loopback.script(Status(503, "down"), Status(503, "down"), Status(503, "down"))
    backup = AnthropicClient(base_url=loopback.base_url, api_key="ak", **FAST)
    out = await LLMSummarizer(openai(loopback), "gpt", fallbacks=[(backup, "claude-backup")]).summarize(REQUEST)
    assert (out.summarizer, out.model) == ("anthropic", "claude-backup")
    assert [r.path for r in loopback.requests] == ["/v1/chat/completions"] * 3 + ["/v1/messages"]


async def test_prompt_falls_back_to_the_raw_material(loopback: LoopbackServer) -> None:
    bare = SummaryRequest(kind="leaf", source_text="alpha beta", target_tokens=50, custom_instructions="keep ids")
    await LLMSummarizer(openai(loopback), "m").summarize(bare)
    system, user = loopback.requests[0].body["messages"]
    assert "summarization engine" in system["content"]
    assert "alpha beta" in user["content"] and "keep ids" in user["content"]


# --- settings ----------------------------------------------------------------------------------------


def config_from(tmp_path: Path, text: str) -> OpenClawConfig:
    path = tmp_path / "openclaw.json"
    path.write_text(text, encoding="utf-8")
    return load_config(path)


def test_nothing_configured_is_none() -> None:
    assert resolve_summarizer(OpenClawConfig(), env={}) is None
    assert resolve_model(OpenClawConfig(), env={}) is None
    # a key alone does not turn on paid summaries
    assert resolve_summarizer(OpenClawConfig(), env={"OPENAI_API_KEY": "sk-x"}) is None


def test_summary_resolution_order(tmp_path: Path) -> None:
    config = config_from(
        tmp_path,
        """{
          agents: {defaults: {model: "openai/gpt-session", compaction: {model: "gpt-compaction", provider: "ollama"}}},
          plugins: {entries: {"lossless-claw": {config: {summaryModel: "anthropic/claude-plugin"}}}},
        }""",
    )
    env = {"ANTHROPIC_API_KEY": "ak-1", "OPENAI_API_KEY": "sk-1"}
    (spec,) = resolve_summary_specs(config, env=env)
    assert (spec.provider, spec.model, spec.api) == ("anthropic", "claude-plugin", "anthropic")
    assert spec.source.endswith("summaryModel")
    (spec,) = resolve_summary_specs(
        config, env={**env, "LCM_SUMMARY_MODEL": "llama3.1", "LCM_SUMMARY_PROVIDER": "ollama"}
    )
    assert (spec.provider, spec.model, spec.base_url, spec.api_key) == (
        "ollama",
        "llama3.1",
        "http://127.0.0.1:11434/v1",
        None,
    )
    (spec,) = resolve_summary_specs(config, env=env, model="openai/gpt-arg")
    assert (spec.provider, spec.model, spec.source) == ("openai", "gpt-arg", "argument")
    # a provider named in a higher layer applies to the model of a lower one
    (spec,) = resolve_summary_specs(config, env={**env, "LCM_SUMMARY_PROVIDER": "ollama"})
    assert (spec.provider, spec.model) == ("ollama", "anthropic/claude-plugin")


def test_unknown_prefix_stays_in_the_model_id_and_base_url_env_applies() -> None:
    env = {"LCM_SUMMARY_MODEL": "meta-llama/Llama-3.1-8B", "OPENAI_BASE_URL": "http://127.0.0.1:9/v1"}
    (spec,) = resolve_summary_specs(OpenClawConfig(), env=env)
    assert (spec.provider, spec.model, spec.base_url) == ("openai", "meta-llama/Llama-3.1-8B", "http://127.0.0.1:9/v1")
    (spec,) = resolve_summary_specs(OpenClawConfig(), env={**env, "LCM_SUMMARY_BASE_URL": "http://127.0.0.1:10/v1"})
    assert spec.base_url == "http://127.0.0.1:10/v1"


def test_cloud_provider_without_key_is_a_clear_error() -> None:
    with pytest.raises(ConfigError, match="ANTHROPIC_API_KEY"):
        resolve_summarizer(OpenClawConfig(), env={"LCM_SUMMARY_MODEL": "claude-sonnet"})
    with pytest.raises(ConfigError, match="OPENAI_API_KEY"):
        resolve_model(OpenClawConfig(), env={}, model="gpt-4o")


def test_keys_stay_out_of_reprs_and_cannot_be_pickled() -> None:
    env = {"LCM_SUMMARY_MODEL": "claude-x", "ANTHROPIC_API_KEY": "ak-very-secret"}
    (spec,) = resolve_summary_specs(OpenClawConfig(), env=env)
    summarizer = resolve_summarizer(OpenClawConfig(), env=env)
    for shown in (repr(spec), str(spec), repr(summarizer), repr(spec.client()), repr(spec.api_key)):
        assert "ak-very-secret" not in shown
    with pytest.raises(TypeError):
        pickle.dumps(Secret("ak-very-secret"))


async def test_resolved_summarizer_end_to_end_with_fallbacks_and_spend_guard(
    tmp_path: Path, loopback: LoopbackServer
) -> None:
    config = config_from(
        tmp_path,
        f"""{{
          models: {{providers: {{local: {{baseUrl: "{loopback.openai_url}", api: "openai-completions"}},
                                 claude: {{baseUrl: "{loopback.base_url}", api: "anthropic-messages",
                                           apiKey: "ak-cfg"}}}}}},
          plugins: {{entries: {{"lossless-claw": {{config: {{
            summaryModel: "local/qwen3", fallbackProviders: ["claude/claude-haiku"], summaryMaxCallsPerWindow: 2,
          }}}}}}}},
        }}""",
    )
    summarizer = resolve_summarizer(config, env={}, **FAST)
    assert isinstance(summarizer, LLMSummarizer) and summarizer.name == "local"
    loopback.script(Status(500), Status(500), Status(500))
    out = await summarizer.summarize(REQUEST)
    assert (out.summarizer, out.model) == ("claude", "claude-haiku")
    assert loopback.requests[-1].headers["x-api-key"] == "ak-cfg"
    await summarizer.summarize(REQUEST)
    with pytest.raises(SummarizerError, match="spend guard"):
        await summarizer.summarize(REQUEST)
    summarizer.reset_spend_guard("agent:main:main")  # a manual /compact clears the backoff
    assert (await summarizer.summarize(REQUEST)).summarizer == "local"


async def test_resolve_model_builds_a_working_model(tmp_path: Path, loopback: LoopbackServer) -> None:
    config = config_from(tmp_path, '{agents: {defaults: {model: "anthropic/claude-turn", contextWindow: 50000}}}')
    model = resolve_model(config, env={"ANTHROPIC_API_KEY": "ak-t", "ANTHROPIC_BASE_URL": loopback.base_url})
    assert isinstance(model, Model)
    assert (model.name, model.provider, model.context_window) == ("claude-turn", "anthropic", 50000)
    reply = await model.complete(ModelRequest("", [UserMessage(content="hi")]))
    assert reply.model == "claude-turn" and loopback.requests[0].headers["x-api-key"] == "ak-t"
    ollama = resolve_model(OpenClawConfig(), env={}, model="qwen3", provider="ollama")
    assert ollama is not None and (ollama.provider, ollama.context_window) == ("ollama", 128_000)


def test_non_numeric_plugin_setting_is_named() -> None:
    env = {"LCM_SUMMARY_MODEL": "m", "OPENAI_BASE_URL": "http://127.0.0.1:9/v1", "LCM_SUMMARY_TIMEOUT_MS": "soon"}
    with pytest.raises(ConfigError, match="LCM_SUMMARY_TIMEOUT_MS"):
        resolve_summarizer(OpenClawConfig(), env=env)


# --- a real compaction through each provider ---------------------------------------------------------


async def seed_session(store: Store) -> str:
    async with store.transaction() as conn:
        session = await repo.ensure_session(conn, "agent:main:llm", engine_id="legacy")
        items = [
            repo.NewMessage(m, entry_id=f"e{i}")
            for i, m in enumerate(
                message
                for n in range(8)
                for message in (
                    UserMessage(content=f"Step {n}: check /srv/app/mod{n}.py please. " + "detail " * 40),
                    AssistantMessage(content=[TextContent(text=f"Checked mod{n}.py; decision {n} stands. " * 5)]),
                )
            )
        ]
        await repo.append_messages(conn, session, items, store.counter)
    return session.session_id


def summarizer_for(api: str, loopback: LoopbackServer, model: str) -> LLMSummarizer:
    if api == "anthropic":
        return LLMSummarizer(AnthropicClient(base_url=loopback.base_url, api_key="ak", **FAST), model)
    return LLMSummarizer(OpenAIClient(base_url=loopback.openai_url, provider="ollama", **FAST), model)


async def compact(store: Store, session_id: str, summarizer: LLMSummarizer) -> Any:
    return await compact_session(
        store,
        session_id,
        settings=CompactionSettings(keep_recent_tokens=200, reserve_tokens=500, reserve_tokens_floor=0),
        summarizer=summarizer,
        token_budget=2000,
        custom_instructions=None,
        force=True,
        trigger="manual",
    )


async def summary_rows(store: Store) -> list[Any]:
    async with store.read() as conn:
        result = await conn.execute(text("SELECT summarizer, model, fallback_level, content FROM summaries"))
        return list(result.all())


@pytest.mark.parametrize(("api", "provider"), [("openai", "ollama"), ("anthropic", "anthropic")])
async def test_compaction_stores_a_summary_naming_provider_and_model(
    store: Store, loopback: LoopbackServer, api: str, provider: str
) -> None:
    loopback.default = Reply(text="Steps 0-5 checked mod files; decisions stand.\nExpand for details about: steps")
    result = await compact(store, await seed_session(store), summarizer_for(api, loopback, "summary-model-1"))
    assert result.ok and result.compacted
    ((summarizer, model, level, content),) = await summary_rows(store)
    assert (summarizer, model, level) == (provider, "summary-model-1", "none")
    assert "decisions stand" in content
    sent = loopback.requests[0].body
    prompt = sent["messages"][-1]["content"]
    assert "mod0.py" in prompt, "the rendered prompt carries the conversation"


async def test_auth_failure_writes_no_summary(store: Store, loopback: LoopbackServer) -> None:
    loopback.default = Status(401, "invalid x-api-key", "authentication_error")
    result = await compact(store, await seed_session(store), summarizer_for("anthropic", loopback, "m"))
    assert not result.ok and not result.compacted and "auth" in (result.reason or "")
    assert await summary_rows(store) == []


async def test_provider_failure_falls_back_to_the_marked_deterministic_summary(
    store: Store, loopback: LoopbackServer
) -> None:
    loopback.default = Status(503, "overloaded")
    result = await compact(store, await seed_session(store), summarizer_for("openai", loopback, "m"))
    assert result.ok and result.compacted
    ((summarizer, model, level, _content),) = await summary_rows(store)
    assert level == "deterministic" and summarizer != "ollama" and model is None
