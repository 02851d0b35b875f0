"""The recall tools' argument schemas, descriptions and validation (what the model is shown and held to)."""

from __future__ import annotations

import json
from typing import Any

__all__ = ["DESCRIPTIONS", "SCHEMAS", "ArgumentError", "validate"]

_SESSIONS = {"type": "boolean", "description": "Search every session key, not only this conversation's."}
SCHEMAS: dict[str, dict[str, Any]] = {
    "lcm_grep": {
        "type": "object",
        "properties": {
            "pattern": {"type": "string", "description": "Words (all must match; trailing * = prefix) or a regex."},
            "mode": {"type": "string", "enum": ["full_text", "regex"], "default": "full_text"},
            "scope": {"type": "string", "enum": ["messages", "summaries", "both"], "default": "both"},
            "sort": {"type": "string", "enum": ["recency", "relevance", "hybrid"], "default": "recency"},
            "since": {"type": "string", "description": "ISO-8601 time; only items at or after it."},
            "before": {"type": "string", "description": "ISO-8601 time; only items before it."},
            "limit": {"type": "integer", "minimum": 1, "maximum": 200, "default": 50},
            "allSessions": _SESSIONS,
        },
        "required": ["pattern"],
        "additionalProperties": False,
    },
    "lcm_recall": {
        "type": "object",
        "properties": {
            "query": {"type": "string", "description": "A question in plain words; no syntax."},
            "mode": {"type": "string", "enum": ["hybrid", "lexical", "semantic"], "default": "hybrid"},
            "since": {"type": "string", "description": "ISO-8601 time; only items at or after it."},
            "before": {"type": "string", "description": "ISO-8601 time; only items before it."},
            "limit": {"type": "integer", "minimum": 1, "maximum": 50, "default": 10},
            "allSessions": _SESSIONS,
        },
        "required": ["query"],
        "additionalProperties": False,
    },
    "lcm_describe": {
        "type": "object",
        "properties": {
            "id": {
                "type": "string",
                "description": "A summary id (sum_…), a message id (msg_<n>) or a large-content id (file_…).",
            },
            "tokenCap": {"type": "integer", "minimum": 1, "description": "Mark manifest entries that fit this cap."},
            "expandFile": {
                "type": "boolean",
                "default": False,
                "description": "For a file_… id: include its stored text (up to 32 KB).",
            },
        },
        "required": ["id"],
        "additionalProperties": False,
    },
    "lcm_expand": {
        "type": "object",
        "properties": {
            "summaryIds": {"type": "array", "items": {"type": "string"}, "minItems": 1, "maxItems": 20},
            "query": {"type": "string", "description": "Find summaries to expand by full-text search."},
            "maxDepth": {"type": "integer", "minimum": 1, "maximum": 64, "default": 3},
            "tokenCap": {"type": "integer", "minimum": 1},
            "includeMessages": {"type": "boolean", "default": False},
        },
        "additionalProperties": False,
    },
    "lcm_expand_query": {
        "type": "object",
        "properties": {
            "prompt": {"type": "string", "description": "The question the expansion must answer."},
            "query": {"type": "string", "description": "Search words that locate the relevant history."},
            "summaryIds": {"type": "array", "items": {"type": "string"}, "minItems": 1, "maxItems": 20},
            "maxTokens": {"type": "integer", "minimum": 1, "default": 2000},
            "tokenCap": {"type": "integer", "minimum": 1},
            "timeoutMs": {"type": "integer", "minimum": 1000},
            "allSessions": _SESSIONS,
        },
        "required": ["prompt"],
        "additionalProperties": False,
    },
}

_TYPES: dict[str, tuple[type, ...]] = {"string": (str,), "integer": (int,), "boolean": (bool,), "array": (list,)}


class ArgumentError(ValueError):
    """Tool arguments that do not match the tool's schema."""


def validate(tool: str, args: object) -> dict[str, Any]:
    """Check `args` against the tool's schema; returns them with defaults filled in.

    Raises:
        ArgumentError: naming the first offending argument.
    """
    schema = SCHEMAS[tool]
    if not isinstance(args, dict):
        raise ArgumentError(f"arguments must be a JSON object, got {type(args).__name__}")
    props: dict[str, Any] = schema["properties"]
    unknown = sorted(set(args) - set(props))
    if unknown:
        raise ArgumentError(f"unknown argument(s) {', '.join(unknown)}; allowed: {', '.join(props)}")
    for name in schema.get("required", []):
        if name not in args or (isinstance(args[name], str) and not args[name].strip()):
            raise ArgumentError(f"'{name}' is required")
    out = {k: v["default"] for k, v in props.items() if "default" in v}
    for name, value in args.items():
        _check_value(name, value, props[name])
        out[name] = value
    return out


def _check_value(name: str, value: Any, spec: dict[str, Any]) -> None:
    kind = spec["type"]
    ok = isinstance(value, _TYPES[kind]) and not (kind == "integer" and isinstance(value, bool))
    if not ok:
        raise ArgumentError(f"'{name}' must be a{'n' if kind[0] in 'ai' else ''} {kind}, got {json.dumps(value)}")
    if "enum" in spec and value not in spec["enum"]:
        raise ArgumentError(f"'{name}' must be one of {', '.join(spec['enum'])}; got {value!r}")
    if kind == "integer" and not spec.get("minimum", value) <= value <= spec.get("maximum", value):
        raise ArgumentError(f"'{name}' must be from {spec.get('minimum', '-inf')} to {spec.get('maximum', 'inf')}")
    if kind == "array":
        if not spec.get("minItems", 0) <= len(value) <= spec.get("maxItems", len(value)):
            raise ArgumentError(f"'{name}' must hold {spec.get('minItems', 0)} to {spec.get('maxItems')} items")
        if not all(isinstance(v, str) and v.strip() for v in value):
            raise ArgumentError(f"'{name}' must be a list of non-empty strings")


DESCRIPTIONS = {
    "lcm_grep": (
        "Search this conversation's full history (every earlier session, including what was summarized away) "
        "for words or a regex. Returns ids, times and snippets; message hits name the summary that covers them. "
        "Newest first by default: prefer the newest hit when a fact was updated."
    ),
    "lcm_recall": (
        "Ask this conversation's full history a question in plain words (every earlier session, including what "
        "was summarized away): ranked by meaning and words together, best first. Use it when you do not know "
        "the exact words; use lcm_grep for exact words or a regex. Message hits name the summary covering them."
    ),
    "lcm_describe": (
        "Describe a summary (sum_…) or a message (msg_<n>): metadata, sources, the summaries built from it, "
        "and what expanding each part of its subtree would cost in tokens."
    ),
    "lcm_expand": (
        "Delegated recall sub-agents only: open summaries down to their sources (and, with includeMessages, "
        "the original messages) within the grant's token budget."
    ),
    "lcm_expand_query": (
        "Answer a question from the details behind summaries: finds the relevant summaries, expands them "
        "in a bounded sub-agent, and returns JSON "
        "{answer, citedIds, expandedSummaryCount, totalSourceTokens, truncated}."
    ),
}
