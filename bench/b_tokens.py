"""Token counting (issue 7 item 5): our counting path versus bare tiktoken on the same texts.

Ours: ``get_counter().count(text)`` (the process-wide counter: offline o200k_base through tiktoken,
with the surrogate guard). Baseline: ``len(enc.encode_ordinary(text))`` on a tiktoken Encoding built
directly from the same vocabulary file. Also reported: the full per-message path the store runs at
write time (``message_token_count``: flatten + count) and bpe-openai's raw counter, for reference.
The share of *turn* time spent counting is in the turn benchmark (counts are stored, so near zero).
"""

from __future__ import annotations

import os
import time
import warnings
from collections.abc import Callable
from pathlib import Path

from bench import data
from bench.core import BenchContext, Row, Size, Stat, Target, interleaved, pick
from openclaw_ctx.messages import AgentMessage, flatten_text, parse_message
from openclaw_ctx.store.repo import message_token_count
from openclaw_ctx.tokens import get_counter, tokenizer_status

NAME = "tokens"
TITLE = "Token counting: our counter vs bare tiktoken"
CHUNK = 50


def _bare_encoding() -> Callable[[str], list[int]] | None:
    status = tokenizer_status()
    if not status.exact or status.vocab_path is None:
        return None
    import tiktoken

    # Same vocabulary file, tiktoken's own loader: the baseline is tiktoken with nothing around it.
    previous = os.environ.get("TIKTOKEN_CACHE_DIR")
    os.environ["TIKTOKEN_CACHE_DIR"] = str(Path(status.vocab_path).parent)
    try:
        enc = tiktoken.get_encoding("o200k_base")
    finally:
        if previous is None:
            os.environ.pop("TIKTOKEN_CACHE_DIR", None)
        else:
            os.environ["TIKTOKEN_CACHE_DIR"] = previous
    encode: Callable[[str], list[int]] = enc.encode_ordinary
    return encode


def _time_all(fn: Callable[[str], object], texts: list[str]) -> float:
    start = time.perf_counter()
    for text in texts:
        fn(text)
    return time.perf_counter() - start


def run(size: Size, ctx: BenchContext) -> list[Row]:
    """Run the token-counting benchmark at `size`."""
    n = pick(size, 300, 5000, 20_000)
    messages = [parse_message(m) for m in data.conversation(n, seed=3)]
    texts = [flatten_text(m) for m in messages]
    total_kb = sum(len(t.encode("utf-8")) for t in texts) / 1024
    counter = get_counter()
    encode = _bare_encoding()
    rows: list[Row] = []
    if encode is None:
        ctx.log(f"tokens: no exact vocabulary ({tokenizer_status().detail}); comparing nothing")
    else:
        assert [counter.count(t) for t in texts[:50]] == [len(encode(t)) for t in texts[:50]]

        def bare(text: str) -> int:
            return len(encode(text))

        def ours_chunk(chunk: list[str]) -> None:
            for text in chunk:
                counter.count(text)

        def bare_chunk(chunk: list[str]) -> None:
            for text in chunk:
                bare(text)

        def path_chunk(chunk: list[AgentMessage]) -> None:
            for m in chunk:
                message_token_count(m, counter)

        ctx.log(f"tokens: {n} texts, interleaved in chunks of {CHUNK}")
        chunks = [texts[i : i + CHUNK] for i in range(0, n, CHUNK)]
        mb = [sum(len(t.encode("utf-8")) for t in c) / 2**20 for c in chunks]
        ours_s, bare_s = interleaved([ours_chunk, bare_chunk], chunks, rounds=max(1, ctx.repeat))
        mb_all = mb * max(1, ctx.repeat)
        path_s = [
            s / len(c)
            for s, c in zip(
                interleaved([path_chunk], [messages[i : i + CHUNK] for i in range(0, n, CHUNK)])[0],
                chunks,
                strict=True,
            )
        ]
        ours = Stat.of([m / s for m, s in zip(mb_all, ours_s, strict=True)])
        base = Stat.of([m / s for m, s in zip(mb_all, bare_s, strict=True)])
        per_msg = Stat.of([s / len(c) for s, c in zip(bare_s, chunks * max(1, ctx.repeat), strict=True)])
        rows.append(
            Row(
                NAME,
                f"count {n:,} message texts ({total_kb / 1024:.1f} MB), per {CHUNK}-text chunk",
                "MB/s",
                ours,
                True,
                base,
                "tiktoken encode_ordinary",
                Target("ratio", ">=", 0.9),
                layer="tokens.TiktokenCounter.count",
                note="sides interleaved per chunk to cancel load drift",
            )
        )
        rows.append(
            Row(
                NAME,
                "per-message write-time path (flatten + count)",
                "µs/msg",
                Stat.of(path_s).scaled(1e6),
                False,
                per_msg.scaled(1e6),
                "tiktoken encode_ordinary",
                layer="repo.message_token_count",
                note="SLO ≤ 100 µs per 1 KB message",
            )
        )
    rows.extend(_bpe_reference(texts, n, total_kb))
    return rows


def _bpe_reference(texts: list[str], n: int, total_kb: float) -> list[Row]:
    # bpe-openai refuses inputs of 1M chars or more; messages here are at most ~24 KB. It loads its
    # data with a deprecated importlib.resources call (on import and on first use): not ours to fix.
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        try:
            import bpe_openai
        except ImportError:
            return []
        encoding = bpe_openai.get_encoding("o200k_base")

    def count(text: str) -> int:
        return len(encoding.encode_ordinary(text))

    seconds = Stat.of([_time_all(count, texts) for _ in range(3)])
    return [
        Row(
            NAME,
            "bpe-openai count (reference only)",
            "MB/s",
            seconds.rate(1).scaled(total_kb / 1024),
            True,
            layer="bpe_openai",
            note=f"{seconds.median / n * 1e6:.0f} µs/msg; not our path",
        )
    ]
