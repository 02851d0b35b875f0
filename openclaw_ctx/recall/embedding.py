"""Offline text embeddings for semantic recall, from weights that install with the package.

The model is WordLlama ``l2_supercat`` (a static token-embedding model distilled from an LLM's input
embeddings; MIT): its 16 MB weights and tokenizer ship inside the ``wordllama`` wheel, so nothing is
fetched from a model hub at run time (``disable_download=True`` makes sure of it). Embedding is an
average of token vectors: about 15 µs per short message on one CPU core, no GPU, no torch.

Vectors are stored unit-length and int8-quantised (256 bytes for 256 dimensions): cosine similarity
is then a dot product, and quantisation moves it by well under 1%.

``OPENCLAW_CTX_EMBEDDINGS=off`` turns semantic recall off; when the model cannot load, recall is
lexical and says so once.
"""

from __future__ import annotations

import logging
import os
import threading
import warnings
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Protocol

import numpy as np
import numpy.typing as npt

__all__ = [
    "DEFAULT_MODEL",
    "EMBED_CHARS",
    "Embedder",
    "WordLlamaEmbedder",
    "default_embedder",
    "dequantize",
    "quantize",
    "unavailable_reason",
]

DEFAULT_MODEL = "wordllama-l2_supercat-256"
EMBED_CHARS = 8000
"""Characters of an item that are embedded: a 50 MB tool output costs what its head costs."""

Matrix = npt.NDArray[np.float32]

_log = logging.getLogger(__name__)


class Embedder(Protocol):
    """Turns texts into unit-length float32 rows; `model` names it in the vector tables."""

    @property
    def model(self) -> str: ...

    @property
    def dim(self) -> int: ...

    def embed(self, texts: Sequence[str]) -> Matrix: ...


class WordLlamaEmbedder:
    """WordLlama ``l2_supercat`` from the installed wheel, optionally truncated (Matryoshka) to `dim`."""

    def __init__(self, dim: int = 256) -> None:
        import wordllama  # type: ignore[import-untyped]
        from wordllama import WordLlama

        package = Path(wordllama.__file__).parent
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            # The wheel holds weights/ and tokenizers/ exactly where a cache dir would.
            self._model: Any = WordLlama.load(
                cache_dir=package, disable_download=True, trunc_dim=dim if dim != 256 else None
            )
        self._dim = dim
        self._lock = threading.Lock()

    @property
    def model(self) -> str:
        return f"wordllama-l2_supercat-{self._dim}"

    @property
    def dim(self) -> int:
        return self._dim

    def embed(self, texts: Sequence[str]) -> Matrix:
        if not texts:
            return np.zeros((0, self._dim), dtype=np.float32)
        clipped = [_clean(t) for t in texts]
        with self._lock:
            raw = np.asarray(self._model.embed(clipped, norm=False), dtype=np.float32)
        norms = np.linalg.norm(raw, axis=1, keepdims=True)
        unit: Matrix = np.divide(raw, norms, out=np.zeros_like(raw), where=norms > 0)
        return unit


def _clean(text: str) -> str:
    # The tokenizer refuses lone surrogates; an item with no words still gets a (zero) vector.
    return text[:EMBED_CHARS].encode("utf-8", "replace").decode("utf-8") or " "


def quantize(rows: Matrix) -> list[bytes]:
    """Unit rows → int8 bytes, one per row (scale 127)."""
    return [bytes(r) for r in np.clip(np.rint(rows * 127.0), -127, 127).astype(np.int8)]


def dequantize(blobs: Sequence[bytes], dim: int) -> npt.NDArray[np.int8]:
    """int8 rows from stored bytes; a blob of the wrong size raises ValueError."""
    if not blobs:
        return np.zeros((0, dim), dtype=np.int8)
    joined = b"".join(blobs)
    if len(joined) != len(blobs) * dim:
        raise ValueError(f"a stored vector is not {dim} bytes long")
    return np.frombuffer(joined, dtype=np.int8).reshape(len(blobs), dim)


_default: Embedder | None = None
_reason: str | None = None
_loaded = False
_load_lock = threading.Lock()


def default_embedder() -> Embedder | None:
    """The process-wide embedder, loaded once; None (with one warning) when semantic recall is off."""
    global _default, _reason, _loaded
    with _load_lock:
        if _loaded:
            return _default
        _loaded = True
        if os.environ.get("OPENCLAW_CTX_EMBEDDINGS", "").strip().lower() in ("0", "off", "false", "no"):
            _reason = "semantic recall is off (OPENCLAW_CTX_EMBEDDINGS=off)"
            return None
        try:
            _default = WordLlamaEmbedder()
        except Exception as exc:  # any load failure (a missing wheel, a damaged weights file) degrades
            _reason = f"semantic recall is unavailable ({type(exc).__name__}: {exc}); recall is lexical only"
            _log.warning(_reason)
        return _default


def unavailable_reason() -> str | None:
    """Why :func:`default_embedder` gave None (after it was called), else None."""
    return _reason
