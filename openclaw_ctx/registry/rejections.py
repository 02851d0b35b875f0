"""Recognising a strict validator's rejection of a host-added key, in whatever shape the error comes.

OpenClaw's compat wrapper walks the error chain (``cause``, arrays, ``issues``, ``errors``, ``message``)
for zod ``unrecognized_keys`` issues, pydantic ``extra_forbidden`` errors, and messages worded like a
rejection; :class:`~openclaw_ctx.registry.wrappers.CompatEngine` retries the call without those keys.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

from pydantic import ValidationError

from openclaw_ctx.contract import HOOKS

__all__ = ["rejected_host_keys"]


def _camel(name: str) -> str:
    head, *rest = name.split("_")
    return head + "".join(p.title() for p in rest)


# --- recognising strict-validator rejections -------------------------------------------------------

_Q = r"[\"'`]"
_REJECTION_TEMPLATES = (
    r"unrecogni[sz]ed\s+key(?:\(s\)|s)?\b[^\n]*?{q}{k}{q}",
    r"additional\s+propert(?:y|ies)\b[^\n]*?{q}{k}{q}",
    r"(?:unexpected|unknown|invalid|extra|unrecogni[sz]ed)\s+(?:property|properties|field|fields|key|keys|"
    r"keyword\s+argument|argument|input)\b[^\n]*?{q}{k}{q}",
    r"{q}{k}{q}\s+is\s+not\s+(?:allowed|permitted)",
)


def _patterns(name: str) -> list[re.Pattern[str]]:
    return [re.compile(t.format(q=_Q, k=re.escape(name)), re.IGNORECASE) for t in _REJECTION_TEMPLATES]


def _spellings(key: str) -> set[str]:
    return {key, _camel(key)}


_ALL_HOST_KEYS = frozenset().union(*(h.host_keys for h in HOOKS))
_KEY_PATTERNS = {key: [p for spelling in _spellings(key) for p in _patterns(spelling)] for key in _ALL_HOST_KEYS}


def _walk(error: object, seen: set[int], depth: int = 0) -> Iterator[object]:
    """The error, its causes, contexts, grouped errors, issues and messages (bounded, cycle-safe)."""
    if depth > 8 or id(error) in seen:
        return
    seen.add(id(error))
    yield error
    children: list[object] = []
    if isinstance(error, list | tuple):
        children.extend(error)
    elif isinstance(error, dict):
        children.extend(v for k, v in error.items() if k in ("cause", "issues", "errors", "message"))
    elif isinstance(error, BaseException):
        children.extend(c for c in (error.__cause__, error.__context__) if c is not None)
        if isinstance(error, BaseExceptionGroup):
            children.extend(error.exceptions)
        for attr in ("issues", "errors", "message"):
            value = getattr(error, attr, None)
            if isinstance(value, list | tuple | str | dict):
                children.append(value)
    for child in children:
        yield from _walk(child, seen, depth + 1)


def _structured_rejections(node: object, candidates: set[str]) -> set[str]:
    found: set[str] = set()
    if isinstance(node, ValidationError):
        for item in node.errors():
            if item["type"] == "extra_forbidden" and item["loc"]:
                found |= {k for k in candidates if str(item["loc"][-1]) in _spellings(k)}
    elif isinstance(node, dict) and node.get("code") == "unrecognized_keys":
        keys = node.get("keys") or []
        found |= {k for k in candidates if any(str(x) in _spellings(k) for x in keys)}
    return found


def _texts(node: object) -> list[str]:
    if isinstance(node, str):
        return [node]
    if isinstance(node, BaseException):
        return [str(node)]
    return []


def rejected_host_keys(error: BaseException, candidates: set[str]) -> set[str]:
    """Which of `candidates` (snake_case host keys) `error` says a strict validator rejected.

    Recognises pydantic ``extra_forbidden`` errors, zod-style ``unrecognized_keys`` issues, and
    messages such as ``Unrecognized key(s) in object: 'sessionKey'``, ``additional properties 'x'``,
    ``unexpected keyword argument 'prompt'`` or ``'x' is not allowed``. A message that merely mentions
    a key (``Unknown sessionKey "x"``) is not a rejection.
    """
    found: set[str] = set()
    for node in _walk(error, set()):
        found |= _structured_rejections(node, candidates)
        for text in _texts(node):
            found |= {k for k in candidates & _ALL_HOST_KEYS if any(p.search(text) for p in _KEY_PATTERNS[k])}
    return found & candidates
