"""Realistic, deterministic conversations for the benchmarks.

A seeded generator writes OpenClaw wire messages (plain dicts, the JSON OpenClaw stores): user turns,
assistant turns that often call tools, tool results (JSON, code, log lines), a few thinking blocks.
Text lengths are log-normal with a ~1 KB median and a long tail (up to 24 KB). Words come from a Zipf
vocabulary of pseudo-words, so full-text terms have realistic document frequencies, and every 1000th
message carries a unique needle token (``zqneedle<n>``) for recall queries.

Generation is cheap (slices of a pre-drawn word pool), so a million messages take seconds. The same
seed always gives the same messages.
"""

from __future__ import annotations

import json
import math
import random
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

__all__ = [
    "NEEDLE_EVERY",
    "Corpus",
    "adk_parts",
    "conversation",
    "corpus",
    "needle",
    "openai_items",
    "wire_text",
]

NEEDLE_EVERY = 1000
_SYLLABLES = [
    "ka", "lo", "mi", "ne", "ru", "sa", "ti", "vo", "ze", "ba", "de", "fi", "go", "hu", "ja", "ke",
    "li", "mo", "nu", "pa", "qe", "ri", "so", "tu", "va", "we", "xi", "yo", "zu", "ch", "sh", "th",
]  # fmt: skip
_TOOLS = ["read_file", "bash", "grep", "write_file", "web_fetch", "list_dir"]


def needle(n: int) -> str:
    """The unique token planted in message ``n * NEEDLE_EVERY`` of a stream."""
    return f"zqneedle{n}"


@dataclass(frozen=True)
class Corpus:
    """A Zipf vocabulary and a long pre-drawn pool of words to slice message text from."""

    words: list[str]
    pool: list[str]

    def term(self, rank: int) -> str:
        """The word of a given frequency rank (0 = most common)."""
        return self.words[rank]

    def text(self, rng: random.Random, n_words: int) -> str:
        """`n_words` consecutive words of the pool from a random start."""
        start = rng.randrange(0, len(self.pool) - n_words - 1)
        return " ".join(self.pool[start : start + n_words])


@lru_cache(maxsize=2)
def corpus(seed: int = 1, vocab: int = 30_000, pool_words: int = 1_000_000) -> Corpus:
    """The shared corpus (cached per seed): distinct pseudo-words, Zipf(1.07) weights."""
    rng = random.Random(seed)
    seen: set[str] = set()
    words: list[str] = []
    while len(words) < vocab:
        word = "".join(rng.choice(_SYLLABLES) for _ in range(rng.randint(2, 4)))
        if word not in seen:
            seen.add(word)
            words.append(word)
    weights = [1.0 / (rank + 1) ** 1.07 for rank in range(vocab)]
    pool = rng.choices(words, weights=weights, k=pool_words)
    return Corpus(words, pool)


def _length(rng: random.Random, median: float, sigma: float = 1.0, cap: int = 24_000) -> int:
    return max(16, min(cap, int(math.exp(rng.gauss(math.log(median), sigma)))))


def _words_for(chars: int) -> int:
    return max(2, chars // 7)  # pseudo-words average ~6 characters plus a space


def _prose(rng: random.Random, c: Corpus, median: float) -> str:
    return c.text(rng, _words_for(_length(rng, median)))


def _lines(words: list[str], per_line: int, line: Callable[[int, str], str]) -> str:
    return "\n".join(line(i, " ".join(words[k : k + per_line])) for i, k in enumerate(range(0, len(words), per_line)))


def _tool_output(rng: random.Random, c: Corpus, index: int, scale: float) -> str:
    chars = _length(rng, 1500 * scale, 1.1)
    kind = rng.random()
    if kind < 0.35:
        rows = [{"id": f"{rng.getrandbits(48):012x}", "name": c.text(rng, 2), "score": rng.randint(0, 999)}]
        rows *= max(1, chars // 80)
        return json.dumps({"results": rows, "total": len(rows)})[:chars]
    if kind < 0.65:
        words = c.text(rng, _words_for(chars) // 2).split(" ")
        return _lines(words, 5, lambda i, w: f"def {w[:8]}_{i}(x):\n    return x + {i % 97}  # {w}")
    if kind < 0.8:
        words = c.text(rng, _words_for(chars) * 2 // 3).split(" ")
        base = rng.getrandbits(32)
        return _lines(words, 6, lambda i, w: f"{1_700_000_000 + index * 7 + i} INFO req={base + i:08x} {w}")
    return c.text(rng, _words_for(chars))


def conversation(n: int, *, seed: int = 7, start_ms: int = 1_767_225_600_000) -> list[dict[str, Any]]:
    """`n` wire messages of one conversation: user → assistant (→ tool call → result)* → assistant ..."""
    return list(stream(n, seed=seed, start_ms=start_ms))


def stream(
    n: int, *, seed: int = 7, start_ms: int = 1_767_225_600_000, offset: int = 0, scale: float = 1.0
) -> Iterator[dict[str, Any]]:
    """Like :func:`conversation` but lazy.

    `offset` numbers needles for a slice of a larger stream; `scale` multiplies every text-length
    median (0.2 gives the ~200-character messages of the FTS anchors in spec/benchmarks.md §4.4).
    """
    c = corpus()
    rng = random.Random(seed)
    index = 0
    pending: list[tuple[str, str]] = []  # tool calls awaiting their results
    while index < n:
        ts = start_ms + (offset + index) * 1500
        absolute = offset + index
        plant = f" {needle(absolute // NEEDLE_EVERY)}" if absolute % NEEDLE_EVERY == 0 else ""
        if pending:
            call_id, name = pending.pop(0)
            out = _tool_output(rng, c, absolute, scale) + plant
            msg: dict[str, Any] = {
                "role": "toolResult",
                "toolCallId": call_id,
                "toolName": name,
                "content": [{"type": "text", "text": out}],
                "isError": rng.random() < 0.03,
                "timestamp": ts,
            }
        elif index == 0 or rng.random() < 0.3:
            msg = {"role": "user", "content": _prose(rng, c, 300 * scale) + plant, "timestamp": ts}
        else:
            blocks: list[dict[str, Any]] = []
            if rng.random() < 0.15:
                blocks.append({"type": "thinking", "thinking": _prose(rng, c, 400 * scale)})
            blocks.append({"type": "text", "text": _prose(rng, c, 1100 * scale) + plant})
            calls = 0 if rng.random() < 0.45 else (1 if rng.random() < 0.8 else 2)
            for k in range(calls):
                call_id = f"call_{absolute}_{k}"
                name = rng.choice(_TOOLS)
                blocks.append(
                    {
                        "type": "toolCall",
                        "id": call_id,
                        "name": name,
                        "arguments": {"path": f"src/{c.text(rng, 1)}/{c.text(rng, 1)}.py", "query": c.text(rng, 3)},
                    }
                )
                pending.append((call_id, name))
            msg = {
                "role": "assistant",
                "content": blocks,
                "provider": "openai",
                "model": "gpt-5",
                "usage": {"input": 1000 + absolute, "output": 200, "totalTokens": 1200 + absolute},
                "stopReason": "toolUse" if calls else "stop",
                "timestamp": ts,
            }
        yield msg
        index += 1


def wire_text(msg: dict[str, Any]) -> str:
    """Plain text of a wire message (what full-text search indexes), without pydantic parsing."""
    content = msg.get("content")
    if isinstance(content, str):
        return content
    parts = []
    for block in content or []:
        kind = block.get("type")
        if kind == "text":
            parts.append(block["text"])
        elif kind == "thinking":
            parts.append(block["thinking"])
        elif kind == "toolCall":
            parts.append(f"{block['name']}({json.dumps(block['arguments'], ensure_ascii=False, sort_keys=True)})")
    return "\n".join(p for p in parts if p)


def openai_items(msg: dict[str, Any]) -> list[dict[str, Any]]:
    """The same message as OpenAI Agents SDK input items (what `SQLiteSession.add_items` stores)."""
    role = msg["role"]
    if role == "user":
        return [{"role": "user", "content": msg["content"]}]
    if role == "toolResult":
        return [{"type": "function_call_output", "call_id": msg["toolCallId"], "output": wire_text(msg)}]
    items: list[dict[str, Any]] = []
    text = "\n".join(b.get("text") or b.get("thinking", "") for b in msg["content"] if b["type"] != "toolCall")
    if text:
        items.append({"role": "assistant", "content": text})
    for block in msg["content"]:
        if block["type"] == "toolCall":
            items.append(
                {
                    "type": "function_call",
                    "call_id": block["id"],
                    "name": block["name"],
                    "arguments": json.dumps(block["arguments"]),
                }
            )
    return items


def adk_parts(msg: dict[str, Any]) -> tuple[str, str, list[dict[str, Any]]]:
    """The same message as Google ADK event content: ``(author, role, parts as dicts)``."""
    role = msg["role"]
    if role == "user":
        return "user", "user", [{"text": msg["content"]}]
    if role == "toolResult":
        response = {"output": wire_text(msg)}
        return (
            "agent",
            "user",
            [{"function_response": {"id": msg["toolCallId"], "name": msg["toolName"], "response": response}}],
        )
    parts: list[dict[str, Any]] = []
    for block in msg["content"]:
        if block["type"] == "toolCall":
            parts.append({"function_call": {"id": block["id"], "name": block["name"], "args": block["arguments"]}})
        else:
            parts.append({"text": block.get("text") or block.get("thinking", "")})
    return "agent", "model", parts
