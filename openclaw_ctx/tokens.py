"""Token counting with tiktoken, offline.

tiktoken downloads its vocabulary on first use. This module never lets it: the vocabulary files come
from the `bpe-openai` package (a declared dependency), whose `cl100k_base` / `o200k_base` files are
byte-identical to tiktoken's. They are unpacked once into tiktoken's own cache directory under the
name tiktoken looks for, and tiktoken then checks their sha256 itself before using them.

When no vocabulary can be had, counting falls back to ``ceil(chars / 4)`` and says so once, loudly
(a warning on the ``openclaw_ctx.tokens`` logger and on stderr); ``openclaw-ctx doctor`` reports it.
Counts are computed once per message when it is written and stored in ``token_count``.
"""

from __future__ import annotations

import gzip
import hashlib
import importlib.util
import logging
import math
import os
import sys
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, Protocol

__all__ = [
    "DEFAULT_ENCODING",
    "HeuristicCounter",
    "TiktokenCounter",
    "TokenCounter",
    "TokenizerStatus",
    "get_counter",
    "tokenizer_status",
]

log = logging.getLogger(__name__)

EncodingName = Literal["o200k_base", "cl100k_base"]
DEFAULT_ENCODING: EncodingName = "o200k_base"

# tiktoken_ext.openai_public's source URLs (tiktoken's cache key is sha1 of the URL) and sha256s.
_VOCAB = {
    "o200k_base": (
        "https://openaipublic.blob.core.windows.net/encodings/o200k_base.tiktoken",
        "446a9538cb6c348e3516120d7c08b09f57c36495e2acfffe59a5bf8b0cfb1a2d",
    ),
    "cl100k_base": (
        "https://openaipublic.blob.core.windows.net/encodings/cl100k_base.tiktoken",
        "223921b76ee99bde995b7ff738513eef100fb51d18c93597a113bcffe865b2a7",
    ),
}
_ENV_LOCK = threading.Lock()


class TokenCounter(Protocol):
    """Counts tokens of plain text."""

    name: str
    exact: bool

    def count(self, text: str) -> int:
        """Number of tokens in `text`."""
        ...


class HeuristicCounter:
    """``ceil(chars / 4)``: OpenClaw's own estimate, used only when no vocabulary is available."""

    exact = False

    def __init__(self, reason: str = "") -> None:
        self.name = "heuristic:chars/4"
        self.reason = reason

    def count(self, text: str) -> int:
        """Estimated token count."""
        return math.ceil(len(text) / 4)


class TiktokenCounter:
    """Exact counts from a tiktoken encoding."""

    exact = True

    def __init__(self, encoding: Any, name: str) -> None:
        self._encode = encoding.encode_ordinary
        self.name = f"tiktoken:{name}"

    def count(self, text: str) -> int:
        """Exact token count (special-token text counts as ordinary text)."""
        if not text:
            return 0
        try:
            return len(self._encode(text))
        except UnicodeEncodeError:
            # Lone surrogates: count what can be encoded; the message itself is stored intact.
            return len(self._encode(text.encode("utf-8", "replace").decode("utf-8")))


@dataclass(frozen=True)
class TokenizerStatus:
    """What `doctor` reports about token counting."""

    counter: str
    exact: bool
    vocab_path: str | None
    detail: str


def _cache_dir() -> Path:
    explicit = os.environ.get("TIKTOKEN_CACHE_DIR")
    if explicit:
        return Path(explicit)
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "openclaw-ctx" / "tiktoken"


def _shipped_vocab(name: str) -> bytes:
    # Locate bpe-openai's data without importing the package: its import eagerly builds tokenizers
    # through a deprecated importlib.resources call, which fails under `-W error` (and is slow).
    spec = importlib.util.find_spec("bpe_openai")
    if spec is None or not spec.submodule_search_locations:
        raise FileNotFoundError("the bpe-openai package is not installed")
    package = Path(next(iter(spec.submodule_search_locations)))
    return gzip.decompress((package / "data" / f"{name}.tiktoken.gz").read_bytes())


def _materialise(name: EncodingName) -> Path:
    """Put the vocabulary where tiktoken's cache looks for it; return that path."""
    url, sha256 = _VOCAB[name]
    target = _cache_dir() / hashlib.sha1(url.encode()).hexdigest()
    if target.exists() and hashlib.sha256(target.read_bytes()).hexdigest() == sha256:
        return target
    data = _shipped_vocab(name)
    actual = hashlib.sha256(data).hexdigest()
    if actual != sha256:
        raise ValueError(f"bpe-openai's {name} vocabulary has sha256 {actual}, expected {sha256}")
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = target.with_suffix(f".{os.getpid()}.tmp")
    tmp.write_bytes(data)
    tmp.replace(target)
    return target


def _load_tiktoken(name: EncodingName) -> tuple[Any, Path]:
    import tiktoken

    path = _materialise(name)
    with _ENV_LOCK:
        previous = os.environ.get("TIKTOKEN_CACHE_DIR")
        os.environ["TIKTOKEN_CACHE_DIR"] = str(path.parent)
        try:
            return tiktoken.get_encoding(name), path
        finally:
            if previous is None:
                os.environ.pop("TIKTOKEN_CACHE_DIR", None)
            else:
                os.environ["TIKTOKEN_CACHE_DIR"] = previous


_counters: dict[str, TokenCounter] = {}
_status: dict[str, TokenizerStatus] = {}
_warned = False


def _warn_once(message: str) -> None:
    global _warned
    if _warned:
        return
    _warned = True
    log.warning(message)
    print(f"openclaw-ctx: WARNING: {message}", file=sys.stderr)


def get_counter(encoding: str | None = None) -> TokenCounter:
    """The process-wide counter for `encoding` (default ``o200k_base``, env ``OPENCLAW_CTX_ENCODING``).

    ``heuristic`` selects the chars/4 estimate on purpose.
    """
    name = encoding or os.environ.get("OPENCLAW_CTX_ENCODING") or DEFAULT_ENCODING
    if name in _counters:
        return _counters[name]
    counter: TokenCounter
    if name == "heuristic":
        counter = HeuristicCounter("selected explicitly")
        _status[name] = TokenizerStatus(counter.name, False, None, "chars/4 estimate selected explicitly")
    elif name not in _VOCAB:
        raise ValueError(f"unknown encoding {name!r}; choose one of: {', '.join(_VOCAB)}, heuristic")
    else:
        try:
            enc, path = _load_tiktoken(name)  # type: ignore[arg-type]
            counter = TiktokenCounter(enc, name)
            _status[name] = TokenizerStatus(counter.name, True, str(path), "vocabulary from bpe-openai, sha256 ok")
        except Exception as exc:  # any failure here means: no vocabulary, use the estimate
            reason = f"{type(exc).__name__}: {exc}"
            counter = HeuristicCounter(reason)
            _status[name] = TokenizerStatus(counter.name, False, None, reason)
            _warn_once(
                f"no {name} vocabulary could be loaded ({reason}); token counts are chars/4 estimates, "
                "which under-count JSON by ~30% and CJK by ~87%"
            )
    _counters[name] = counter
    return counter


def tokenizer_status(encoding: str | None = None) -> TokenizerStatus:
    """Status of the counter `get_counter(encoding)` returns (loading it if needed)."""
    name = encoding or os.environ.get("OPENCLAW_CTX_ENCODING") or DEFAULT_ENCODING
    get_counter(name)
    return _status[name]
