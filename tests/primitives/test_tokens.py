"""Token counting: exact tiktoken counts offline on a fresh machine, selectable encodings, the loud fallback.

The fresh-machine tests run in a subprocess (the counters are process-wide) with HOME pointing at an
empty directory and every proxy pointing at a closed port, so any download attempt would fail.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from openclaw_ctx.tokens import HeuristicCounter, get_counter, tokenizer_status

SAMPLES = [
    "hello world",
    '{"tool": "bash", "args": {"command": "ls -la /tmp && echo done"}}',
    "上下文引擎把每条消息都存进 SQLite。",
    "emoji 🦞🦀 and accents: café, naïve",
    "def f(x):\n    return x ** 2\n",
    "<|endoftext|> is ordinary text here",
]

_PROBE = """
import hashlib, json, os, sys
from pathlib import Path
from openclaw_ctx.tokens import get_counter, tokenizer_status
samples = json.loads(sys.argv[1])
out = {}
for name in ("o200k_base", "cl100k_base"):
    counter = get_counter(name)
    status = tokenizer_status(name)
    vocab = Path(status.vocab_path) if status.vocab_path else None
    out[name] = {"name": counter.name, "exact": counter.exact, "counts": [counter.count(s) for s in samples],
                 "vocab_path": status.vocab_path,
                 "sha256": hashlib.sha256(vocab.read_bytes()).hexdigest() if vocab else None}
    # tiktoken itself, loading the very same vocabulary file from its cache directory
    os.environ["TIKTOKEN_CACHE_DIR"] = str(Path(status.vocab_path).parent)
    import tiktoken
    enc = tiktoken.get_encoding(name)
    out[name]["reference"] = [len(enc.encode_ordinary(s)) for s in samples]
    out[name]["hello_ids"] = enc.encode_ordinary("hello world")
print(json.dumps(out))
"""

# tiktoken's published sha256 of each vocabulary (tiktoken_ext/openai_public.py).
SHA256 = {
    "o200k_base": "446a9538cb6c348e3516120d7c08b09f57c36495e2acfffe59a5bf8b0cfb1a2d",
    "cl100k_base": "223921b76ee99bde995b7ff738513eef100fb51d18c93597a113bcffe865b2a7",
}


def fresh_env(home: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TIKTOKEN", "XDG_", "OPENCLAW_CTX_"))}
    closed = "http://127.0.0.1:9"
    env.update(HOME=str(home), HTTP_PROXY=closed, HTTPS_PROXY=closed, http_proxy=closed, https_proxy=closed)
    env.pop("NO_PROXY", None)
    env.pop("no_proxy", None)
    env.update(extra)
    return env


def run_python(
    code: str, env: dict[str, str], *args: str, flags: tuple[str, ...] = ()
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, *flags, "-c", code, *args], env=env, capture_output=True, text=True, timeout=120, check=False
    )


@pytest.fixture(scope="module")
def fresh_machine(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    home = tmp_path_factory.mktemp("empty-home")
    proc = run_python(_PROBE, fresh_env(home), json.dumps(SAMPLES))
    assert proc.returncode == 0, proc.stderr
    result: dict[str, Any] = json.loads(proc.stdout)
    result["home"] = str(home)
    result["stderr"] = proc.stderr
    return result


@pytest.mark.parametrize("name", ["o200k_base", "cl100k_base"])
def test_fresh_machine_counts_exactly_offline(fresh_machine: dict[str, Any], name: str) -> None:
    got = fresh_machine[name]
    assert got["exact"] is True
    assert got["name"] == f"tiktoken:{name}"
    assert got["counts"] == got["reference"]
    assert all(n > 0 for n in got["counts"])
    # The vocabulary was unpacked under the empty HOME and is tiktoken's own file, byte for byte.
    assert got["vocab_path"].startswith(fresh_machine["home"])
    assert got["sha256"] == SHA256[name]
    assert "WARNING" not in fresh_machine["stderr"]


def test_fresh_machine_vocabularies_are_the_real_ones(fresh_machine: dict[str, Any]) -> None:
    # Published token ids of "hello world" for each encoding.
    assert fresh_machine["cl100k_base"]["hello_ids"] == [15339, 1917]
    assert fresh_machine["o200k_base"]["hello_ids"] == [24912, 2375]
    # The two encodings really differ (CJK text in particular).
    assert fresh_machine["o200k_base"]["counts"] != fresh_machine["cl100k_base"]["counts"]


def test_default_is_o200k_and_cl100k_is_selectable(monkeypatch: pytest.MonkeyPatch) -> None:
    assert get_counter().name == "tiktoken:o200k_base"
    assert get_counter("cl100k_base").name == "tiktoken:cl100k_base"
    monkeypatch.setenv("OPENCLAW_CTX_ENCODING", "cl100k_base")
    assert get_counter() is get_counter("cl100k_base")
    assert tokenizer_status().counter == "tiktoken:cl100k_base"


def test_heuristic_is_selectable(monkeypatch: pytest.MonkeyPatch) -> None:
    counter = get_counter("heuristic")
    assert isinstance(counter, HeuristicCounter) and counter.exact is False
    assert [counter.count(s) for s in ("", "abcd", "abcde", "abcdefgh", "abcdefghi")] == [0, 1, 2, 2, 3]
    monkeypatch.setenv("OPENCLAW_CTX_ENCODING", "heuristic")
    status = tokenizer_status()
    assert status.exact is False and status.counter == "heuristic:chars/4"


def test_unknown_encoding_is_refused_with_the_choices() -> None:
    with pytest.raises(ValueError, match=r"unknown encoding 'p50k'.*o200k_base, cl100k_base, heuristic"):
        get_counter("p50k")


def test_exact_counter_handles_lone_surrogates() -> None:
    assert get_counter().count("broken \ud800 surrogate") > 0


_FALLBACK = """
import sys
from openclaw_ctx.tokens import get_counter, tokenizer_status
a = get_counter(); b = get_counter(); c = get_counter("cl100k_base")
status = tokenizer_status()
print(a.name, a.exact, c.exact, a is b, status.exact, sep="|")
print("count", a.count("abcdefgh"))
"""


def test_fallback_warns_once_and_is_reported(tmp_path: Path) -> None:
    blocker = tmp_path / "not-a-dir"
    blocker.write_text("a file where the cache directory should be")
    proc = run_python(_FALLBACK, fresh_env(tmp_path, XDG_CACHE_HOME=str(blocker)))
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines() == ["heuristic:chars/4|False|False|True|False", "count 2"]
    warnings = [line for line in proc.stderr.splitlines() if "openclaw-ctx: WARNING" in line]
    assert len(warnings) == 1, proc.stderr
    assert "chars/4" in warnings[0] and "o200k_base" in warnings[0]


def test_vocab_in_cache_is_checked_against_sha256(tmp_path: Path) -> None:
    """A tampered cached vocabulary is replaced by the shipped one, not trusted."""
    probe = "from openclaw_ctx.tokens import tokenizer_status; print(tokenizer_status().vocab_path)"
    env = fresh_env(tmp_path)
    first = run_python(probe, env)
    path = Path(first.stdout.strip())
    original = hashlib.sha256(path.read_bytes()).hexdigest()
    path.write_bytes(b"tampered")
    second = run_python(probe + "; from openclaw_ctx.tokens import get_counter; print(get_counter().exact)", env)
    assert second.returncode == 0, second.stderr
    assert second.stdout.split()[-1] == "True"
    assert hashlib.sha256(path.read_bytes()).hexdigest() == original == SHA256["o200k_base"]


def test_loading_survives_warnings_as_errors(tmp_path: Path) -> None:
    """Regression: importing bpe_openai raised a DeprecationWarning; under -W error the counter fell back."""
    code = "from openclaw_ctx.tokens import get_counter; print(get_counter('cl100k_base').name, get_counter().name)"
    proc = run_python(code, fresh_env(tmp_path), flags=("-W", "error"))
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split() == ["tiktoken:cl100k_base", "tiktoken:o200k_base"]
    assert "WARNING" not in proc.stderr
