"""`openclaw-ctx chat` end to end: the real CLI in a subprocess, talking to the loopback server.

Lines go in on stdin (and once through a pseudo-terminal); the assertions read stdout/stderr, what went
over the wire, and the SQLite rows.
"""

from __future__ import annotations

import os
import re
import select
import signal
import socket
import sqlite3
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from loopback import LoopbackServer, Reply, Slow, Status, serve

pytestmark = pytest.mark.slow

PLANTED = "the vault code is zanzibar-42"


@pytest.fixture
def loopback() -> Iterator[LoopbackServer]:
    with serve() as server:
        server.default = Reply(text=answer)
        yield server


def _system(body: dict[str, Any]) -> str:
    if isinstance(body.get("system"), str):
        return str(body["system"])
    return " ".join(str(m.get("content")) for m in body.get("messages", []) if m.get("role") == "system")


def answer(body: dict[str, Any]) -> str:
    """Summary calls get a summary that keeps the planted fact; turns get an echo of the last user line."""
    if "summarization" in _system(body):
        return "Summary: the user said " + PLANTED + " and discussed modules."
    users = [m for m in body.get("messages", []) if m.get("role") == "user"]
    content = users[-1]["content"] if users else ""
    if isinstance(content, list):
        content = " ".join(p.get("text", "") for p in content if p.get("type") == "text")
    return f"echo: {str(content)[:50]}"


def provider_env(api: str, loopback: LoopbackServer) -> dict[str, str]:
    if api == "anthropic":
        return {"ANTHROPIC_API_KEY": "ak-chat-secret", "ANTHROPIC_BASE_URL": loopback.base_url}
    return {"OPENAI_API_KEY": "sk-chat-secret", "OPENAI_BASE_URL": loopback.openai_url}


def chat(db: Path, lines: list[str], env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    """Run `openclaw-ctx --db DB chat ARGS` with `lines` on stdin (the timeout only guards against a hang)."""
    return subprocess.run(
        [sys.executable, "-m", "openclaw_ctx", "--db", str(db), "chat", *args],
        input="".join(f"{line}\n" for line in lines),
        capture_output=True,
        text=True,
        env={**os.environ, "COLUMNS": "200", **env},
        timeout=180,
        check=False,
    )


def rows(db: Path, sql: str, *params: Any) -> list[tuple[Any, ...]]:
    with sqlite3.connect(db) as conn:
        return conn.execute(sql, params).fetchall()


def sent_texts(loopback: LoopbackServer, start: int = 0) -> list[str]:
    """The request bodies of turn calls (not summary calls) from request number `start` on, as text."""
    return [str(r.body) for r in loopback.requests[start:] if "summarization" not in _system(r.body)]


@pytest.mark.parametrize(("api", "ref"), [("openai", "openai/gpt-chat-1"), ("anthropic", "anthropic/claude-chat-1")])
def test_chat_is_durable_compacts_through_the_provider_and_runs_every_command(
    db_path: Path, loopback: LoopbackServer, api: str, ref: str
) -> None:
    env = provider_env(api, loopback)
    model_id = ref.split("/", 1)[1]
    args = ("--key", "agent:main:chat", "--model", ref, "--budget", "3000")

    first = chat(db_path, [f"Remember this: {PLANTED}.", "/status", "/quit"], env, *args)
    assert first.returncode == 0, first.stderr
    assert "new session" in first.stdout and "echo: Remember this" in first.stdout
    assert re.search(r"engine:\s+legacy", first.stdout)
    assert re.search(r"context:\s+\d+ / 2,250 tokens", first.stdout), first.stdout
    (session_one,) = rows(db_path, "SELECT session_id FROM sessions WHERE status = 'active'")[0]
    assert f"session id:            {session_one}" in first.stdout
    assert "Traceback" not in first.stderr and "chat-secret" not in first.stdout + first.stderr

    # Restart: the conversation continues from the store, and the model sees the first run's turn.
    before = len(loopback.requests)
    talk = [f"Turn {n}: look at /srv/app/mod{n}.py and keep notes. " + "detail " * 80 for n in range(8)]
    second = chat(db_path, ["What was the code?", *talk, "/compact keep the vault code", "/status"], env, *args)
    assert second.returncode == 0, second.stderr
    assert f"continuing session {session_one}" in second.stdout
    assert PLANTED in sent_texts(loopback, before)[0], "the restarted chat sent the earlier turn to the model"
    summary = rows(db_path, "SELECT summary_id, summarizer, model, fallback_level, content FROM summaries")
    assert len(summary) == 1
    summary_id, summarizer, model, level, content = summary[0]
    assert (summarizer, model, level) == (api, model_id, "none")
    assert PLANTED in content
    assert f"summary {summary_id} by {api} ({model_id})" in second.stdout
    active = rows(db_path, "SELECT session_id, parent_session_id FROM sessions WHERE status = 'active'")
    assert active[0][1] == session_one and active[0][0] != session_one, "compaction rotated to a successor"
    assert f"session id:            {active[0][0]}" in second.stdout

    # /grep and /expand find the history; /new and /reset each start a fresh session the model sees empty.
    before = len(loopback.requests)
    third = chat(
        db_path,
        ["/grep zanzibar", f"/expand {summary_id} --messages", "/new", "Hello again", "/reset", "/status"]
        + ["/help", "/nope"],
        env,
        *args,
    )
    assert third.returncode == 0, third.stderr
    assert "hit(s) for 'zanzibar'" in third.stdout and summary_id in third.stdout
    expansion = third.stdout.split(f"expand {summary_id}:")[1]
    assert "### msg_1 (user, seq 1)" in expansion and f"Remember this: {PLANTED}." in expansion
    sessions = rows(db_path, "SELECT status, rotation_reason, parent_session_id FROM sessions ORDER BY created_at")
    assert [s[0] for s in sessions] == ["rotated", "archived", "archived", "active"]
    assert [s[1] for s in sessions[2:]] == ["new", "reset"] and sessions[3][2] is None
    (fresh_turn,) = sent_texts(loopback, before)
    assert "Hello again" in fresh_turn and PLANTED not in fresh_turn and "mod7.py" not in fresh_turn
    assert re.search(r"context:\s+0 / 2,250 tokens", third.stdout)
    assert re.search(r"sessions of this key:\s+4", third.stdout)
    assert "/compact [instructions]" in third.stdout
    assert "unknown command /nope" in third.stderr
    messages = rows(db_path, "SELECT count(*), count(DISTINCT session_id) FROM messages")[0]
    assert messages == (2 * 10 + 2, 2), "every turn is stored, nothing deleted"


def test_lossless_engine_chat_compacts_and_recalls(db_path: Path, loopback: LoopbackServer) -> None:
    env = provider_env("openai", loopback)
    talk = [f"Note {n}: {PLANTED if n == 0 else 'filler'} in /srv/x{n}.py. " + "words " * 80 for n in range(10)]
    args = ("--key", "k", "--engine", "lossless-claw", "--model", "openai/gpt-lossless", "--budget", "3000")
    result = chat(db_path, [*talk, "/compact", "/status", "/grep zanzibar"], env, *args)
    assert result.returncode == 0, result.stderr
    assert re.search(r"engine:\s+lossless-claw", result.stdout)
    summaries = rows(db_path, "SELECT summarizer, model FROM summaries")
    assert summaries and set(summaries) == {("openai", "gpt-lossless")}
    assert "hit(s) for 'zanzibar'" in result.stdout


def test_without_a_provider_it_says_how_to_configure_one(db_path: Path) -> None:
    result = chat(db_path, ["hello"], {}, "--key", "k")
    assert result.returncode == 2
    for name in ("OPENAI_API_KEY", "OPENAI_BASE_URL", "ANTHROPIC_API_KEY", "agents.defaults.model", "--model"):
        assert name in result.stderr
    assert "Traceback" not in result.stderr and not db_path.exists()


def test_a_cloud_provider_without_a_key_is_one_clear_line(db_path: Path) -> None:
    result = chat(db_path, ["hello"], {}, "--key", "k", "--model", "openai/gpt-4o-mini")
    assert result.returncode == 1
    assert "OPENAI_API_KEY" in result.stderr and "Traceback" not in result.stderr


def test_auth_failure_and_provider_down_are_one_line_each_and_the_chat_goes_on(
    db_path: Path, loopback: LoopbackServer
) -> None:
    loopback.script(Status(401, "Incorrect API key provided", "invalid_request_error"))
    env = provider_env("openai", loopback)
    result = chat(db_path, ["first try", "second try", "/quit"], env, "--key", "k", "--model", "openai/m")
    assert result.returncode == 0
    errors = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(errors) == 1 and "HTTP 401" in errors[0] and "API key" in errors[0]
    assert "echo: second try" in result.stdout and "echo: first try" not in result.stdout
    assert "sk-chat-secret" not in result.stdout + result.stderr
    assert len(loopback.requests) == 2, "a 401 is not retried"

    with socket.socket() as probe:  # a port nobody listens on: the provider is down
        probe.bind(("127.0.0.1", 0))
        dead = f"http://127.0.0.1:{probe.getsockname()[1]}/v1"
    down = chat(db_path, ["anyone there?", "/status"], {**env, "OPENAI_BASE_URL": dead}, "--key", "k", "--model", "m")
    assert down.returncode == 0
    errors = [line for line in down.stderr.splitlines() if line.strip()]
    assert len(errors) == 1 and "connection failed" in errors[0] and "Traceback" not in down.stderr
    assert "session id:" in down.stdout, "the chat kept going after the failed turn"
    # A failed turn keeps what the user said (as an overflowed one does); nothing else is invented.
    stored = rows(db_path, "SELECT text FROM messages ORDER BY seq")
    assert [t for (t,) in stored] == ["first try", "second try", "echo: second try", "anyone there?"]


def test_chat_on_a_pseudo_terminal(db_path: Path, loopback: LoopbackServer) -> None:
    leader, follower = os.openpty()
    env = {**os.environ, **provider_env("anthropic", loopback), "TERM": "dumb", "NO_COLOR": "1"}
    proc = subprocess.Popen(
        [sys.executable, "-m", "openclaw_ctx", "--db", str(db_path), "chat", "--key", "tty", "--model", "claude-tty"],
        stdin=follower,
        stdout=follower,
        stderr=follower,
        env=env,
        close_fds=True,
    )
    os.close(follower)
    seen = b""

    def read_until(marker: bytes, count: int = 1) -> None:
        nonlocal seen
        deadline = time.monotonic() + 120  # a hang guard, not a timing assertion
        while seen.count(marker) < count and time.monotonic() < deadline:
            ready, _, _ = select.select([leader], [], [], 1.0)
            if ready:
                try:
                    seen += os.read(leader, 65536)
                except OSError:
                    return

    try:
        read_until(b"you> ")
        os.write(leader, b"hello from a terminal\n")
        read_until(b"you> ", 2)
        os.write(leader, b"/status\n")
        read_until(b"you> ", 3)
        os.write(leader, b"\x04")  # Ctrl-D leaves
        proc.wait(timeout=60)
        read_until(b"\x00")  # drain what is left
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        os.close(leader)
    text = seen.decode("utf-8", "replace")
    assert proc.returncode == 0, text
    assert "echo: hello from a terminal" in text
    assert re.search(r"engine:\s+legacy", text)
    assert rows(db_path, "SELECT role, text FROM messages ORDER BY seq") == [
        ("user", "hello from a terminal"),
        ("assistant", "echo: hello from a terminal"),
    ]


def test_ctrl_c_cancels_the_turn_not_the_chat(db_path: Path, loopback: LoopbackServer) -> None:
    loopback.script(Slow(60))
    proc = subprocess.Popen(
        [sys.executable, "-m", "openclaw_ctx", "--db", str(db_path), "chat", "--key", "k", "--model", "openai/m"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "COLUMNS": "200", **provider_env("openai", loopback)},
    )
    assert proc.stdin is not None
    try:
        proc.stdin.write("this one hangs\n")
        proc.stdin.flush()
        deadline = time.monotonic() + 120  # a hang guard, not a timing assertion
        while not loopback.requests and time.monotonic() < deadline:
            time.sleep(0.05)
        assert loopback.requests, "the turn reached the provider"
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate("after the interrupt\n", timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 0, err
    assert "interrupted: the turn was cancelled" in err and "Traceback" not in err
    assert "echo: after the interrupt" in out
    assert rows(db_path, "SELECT text FROM messages ORDER BY seq") == [
        ("after the interrupt",),
        ("echo: after the interrupt",),
    ]


def test_the_model_uses_the_engines_recall_tools_through_the_chat(db_path: Path, loopback: LoopbackServer) -> None:
    loopback.script(
        Reply(text=answer),
        Reply(text="", tool_calls=[("toolu_1", "lcm_grep", {"pattern": "zanzibar"})]),
        Reply(text="Found it in your first message."),
    )
    env = provider_env("anthropic", loopback)
    args = ("--key", "tools", "--engine", "lossless-claw", "--model", "anthropic/claude-tools")
    result = chat(db_path, [f"Remember: {PLANTED}", "What was the vault code?"], env, *args)
    assert result.returncode == 0, result.stderr
    assert "→ lcm_grep {'pattern': 'zanzibar'}" in result.stdout
    assert "← lcm_grep done" in result.stdout and "Found it in your first message." in result.stdout
    tool_result = loopback.requests[2].body["messages"][-1]
    assert tool_result["role"] == "user" and tool_result["content"][0]["type"] == "tool_result"
    assert "zanzibar" in str(tool_result["content"][0]["content"])
    roles = [r for (r,) in rows(db_path, "SELECT role FROM messages ORDER BY seq")]
    assert roles == ["user", "assistant", "user", "assistant", "toolResult", "assistant"]


def test_a_damaged_database_is_one_clear_line(db_path: Path, loopback: LoopbackServer) -> None:
    db_path.write_bytes(b"this is not an sqlite database, just text" * 100)
    result = chat(db_path, ["hello"], provider_env("openai", loopback), "--key", "k", "--model", "openai/m")
    assert result.returncode == 1
    errors = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(errors) == 1 and errors[0].startswith("error:") and "Traceback" not in result.stderr
    assert loopback.requests == []


def test_the_model_and_provider_can_come_from_openclaw_json(
    tmp_path: Path, db_path: Path, loopback: LoopbackServer
) -> None:
    config = tmp_path / "openclaw.json"
    config.write_text(
        f"""{{
          agents: {{defaults: {{model: "local/qwen3-chat", contextWindow: 3000}}}},
          models: {{providers: {{local: {{baseUrl: "{loopback.openai_url}", api: "openai-completions",
                                          apiKey: "sk-from-config"}}}}}},
        }}""",
        encoding="utf-8",
    )
    result = subprocess.run(
        [sys.executable, "-m", "openclaw_ctx", "--db", str(db_path), "--config", str(config), "chat", "--key", "c"],
        input="hi from config\n/status\n",
        capture_output=True,
        text=True,
        env={**os.environ, "COLUMNS": "200"},
        timeout=180,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    assert "model local/qwen3-chat" in result.stdout and "echo: hi from config" in result.stdout
    assert re.search(r"summarizer:\s+local \(qwen3-chat\)", result.stdout)
    assert re.search(r"context:\s+\d+ / 2,250 tokens", result.stdout)
    assert loopback.requests[0].headers["authorization"] == "Bearer sk-from-config"
    assert "sk-from-config" not in result.stdout + result.stderr


def test_openai_base_url_reaches_the_local_openai_compatible_servers(db_path: Path, loopback: LoopbackServer) -> None:
    # The README's Ollama line: a server on a non-default port, named only by OPENAI_BASE_URL.
    env = {"OPENAI_BASE_URL": loopback.openai_url}
    result = chat(db_path, ["hello ollama", "/quit"], env, "--key", "agent:main:main", "--model", "ollama/llama3.1")
    assert result.returncode == 0, result.stderr
    assert "echo: hello ollama" in result.stdout
    assert len(loopback.requests) == 1 and loopback.requests[0].body["model"] == "llama3.1"


def test_compact_reports_the_background_compaction_it_waited_for(db_path: Path, loopback: LoopbackServer) -> None:
    # A low threshold: every turn leaves a debt, paid after its reply, the last one's when /compact waits.
    env = {**provider_env("openai", loopback), "LCM_CONTEXT_THRESHOLD": "0.2", "LCM_FRESH_TAIL_COUNT": "2"}
    talk = [f"Note {n} about /srv/y{n}.py. " + "words " * 90 for n in range(7)]
    args = ("--key", "bg", "--engine", "lossless-claw", "--model", "openai/gpt-lossless", "--budget", "3000")
    result = chat(db_path, [*talk, "/compact"], env, *args)
    assert result.returncode == 0, result.stderr
    after_compact = result.stdout.rsplit("echo: Note 6", 1)[1]
    # Every compaction that ran after the last turn's reply is named in what /compact printed.
    (last_turn_at,) = rows(db_path, "SELECT max(at) FROM turns WHERE session_key = 'bg'")[0]
    later = rows(db_path, "SELECT trigger FROM compactions WHERE session_key = 'bg' AND started_at > ?", last_turn_at)
    background = [t for (t,) in later if t != "manual"]
    assert background, "the scenario leaves a debt after the last turn"
    assert after_compact.count("background compaction") == len(background), (after_compact, later)
