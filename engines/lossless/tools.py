"""The recall tools an agent sees: ``lcm_grep``, ``lcm_describe``, ``lcm_expand``, ``lcm_expand_query``.

Tools search the calling session key's whole history (every rotated session of it); ``allSessions``
searches every key. ``lcm_expand`` is for delegated sub-agents only: it refuses a session without a
live grant and spends the grant's token budget. ``lcm_expand_query`` is the main agent's door to
expansion: it finds candidates with grep, then runs the expansion in a sub-agent through the
``spawn`` callback (which must start the child through ``Runtime.spawn_subagent`` so the engine's
``prepare_subagent_spawn`` grants it), or, with no callback, in-process under a delegated grant that
is created and revoked around the call. Handlers never raise for bad input: they return ``error: …``.
"""

from __future__ import annotations

import asyncio
import json
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from sqlalchemy import bindparam, text

from engines.lossless import retrieval
from engines.lossless.fts import RecallQueryError, fts_terms
from engines.lossless.grants import DEFAULT_TTL_MS, Grant, GrantError, GrantStore
from openclaw_ctx.contract.model import ToolSpec
from openclaw_ctx.errors import NotFoundError
from openclaw_ctx.store.store import Store

__all__ = ["ExpansionTask", "SpawnCallback", "build_tools"]

DEFAULT_EXPAND_TOKENS = 4000
DEFAULT_TIMEOUT_MS = 120_000
EXPAND_QUERY_CANDIDATES = 6

SpawnCallback = Callable[["ExpansionTask"], Awaitable[str]]


@dataclass(frozen=True)
class ExpansionTask:
    """What a recall sub-agent is asked to do; the spawn callback runs it and returns the child's reply."""

    parent_session_key: str
    child_session_key: str
    question: str
    summary_ids: list[str]
    token_cap: int
    max_depth: int
    timeout_s: float
    prompt: str


# --- argument schemas and validation ----------------------------------------------------------------

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


# --- the tools ---------------------------------------------------------------------------------------

DESCRIPTIONS = {
    "lcm_grep": (
        "Search this conversation's full history (every earlier session, including what was summarized away) "
        "for words or a regex. Returns ids, times and snippets; message hits name the summary that covers them. "
        "Newest first by default: prefer the newest hit when a fact was updated."
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


def _config_int(config: object | None, snake: str, camel: str, default: int) -> int:
    value = config.get(camel, config.get(snake)) if isinstance(config, dict) else getattr(config, snake, None)
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else default


class _Recall:
    """The tools' shared state: who is calling and what they may touch."""

    def __init__(
        self,
        store: Store,
        session_key: str,
        config: object | None,
        grants: GrantStore,
        spawn: SpawnCallback | None,
    ) -> None:
        self.store = store
        self.session_key = session_key
        self.grants = grants
        self.spawn = spawn
        self.expand_tokens = _config_int(config, "max_expand_tokens", "maxExpandTokens", DEFAULT_EXPAND_TOKENS)
        self.timeout_ms = _config_int(config, "delegation_timeout_ms", "delegationTimeoutMs", DEFAULT_TIMEOUT_MS)

    async def scope(self, all_sessions: bool) -> list[str] | None:
        """Keys the caller may search: a grant's keys, all keys (None), or its own key."""
        grant = await self.grants.get(self.session_key)
        if grant is not None and grant.live(self.grants.clock()):
            return list(grant.allowed_session_keys)
        return None if all_sessions else [self.session_key]

    async def search(self, args: dict[str, Any], pattern: str) -> tuple[list[retrieval.GrepHit], list[str] | None]:
        """Grep within the caller's scope; returns the hits and the keys searched (None = all)."""
        keys = await self.scope(bool(args.get("allSessions")))
        common = {k: args[k] for k in ("mode", "scope", "sort", "since", "before", "limit") if k in args}
        if keys is None:
            return list(await retrieval.grep(self.store, pattern, **common)), None
        hits: list[retrieval.GrepHit] = []
        for key in keys:
            hits.extend(await retrieval.grep(self.store, pattern, session_key=key, **common))
        limit = args.get("limit", 50)
        return (hits[:limit] if len(keys) == 1 else _newest_first(hits)[:limit]), keys

    async def grep(self, args: dict[str, Any]) -> str:
        hits, keys = await self.search(args, args["pattern"])
        where = "all sessions" if keys is None else "session key " + ", ".join(keys)
        if not hits:
            return f"No matches for {args['pattern']!r} in {where}."
        lines = [f"{len(hits)} match(es) for {args['pattern']!r} in {where} ({args['sort']}):"]
        lines.extend(_hit_line(h) for h in hits)
        return "\n".join(lines)

    async def describe(self, args: dict[str, Any]) -> str:
        found = await retrieval.describe(
            self.store, args["id"], token_cap=args.get("tokenCap"), expand_file=bool(args.get("expandFile"))
        )
        await self._check_scope(found.row["session_key"])
        return _render_description(found)

    async def _check_scope(self, session_key: str) -> None:
        grant = await self.grants.get(self.session_key)
        if grant is not None and grant.live(self.grants.clock()) and not grant.allows(session_key):
            raise GrantError(f"{session_key} is outside this session's grant")

    async def expand(self, args: dict[str, Any]) -> str:
        grant = await self.grants.require(self.session_key)
        if grant.remaining_tokens == 0:
            raise GrantError(f"the grant's token budget ({grant.token_cap}) is spent")
        ids = await self._targets(args, grant)
        outcome = await self.expand_under_grant(grant, ids, args)
        return "\n\n".join(r.render() for r in outcome) or "Nothing to expand."

    async def _targets(self, args: dict[str, Any], grant: Grant) -> list[str]:
        if "summaryIds" in args:
            ids = list(dict.fromkeys(s.strip() for s in args["summaryIds"]))
        elif "query" in args:
            hits, _keys = await self.search({"limit": 50, "sort": "recency", "scope": "both"}, args["query"])
            ids = _candidate_summaries(hits)
        else:
            raise ArgumentError("give 'summaryIds' or 'query'")
        owners = await _summary_keys(self.store, ids)
        missing = [i for i in ids if i not in owners]
        if missing:
            raise NotFoundError(f"no summary with id {', '.join(missing)}")
        outside = [i for i in ids if not grant.allows(owners[i])]
        if outside:
            raise GrantError(f"{', '.join(outside)} belong(s) to a session outside this grant")
        return ids

    async def expand_under_grant(
        self, grant: Grant, ids: list[str], args: dict[str, Any]
    ) -> list[retrieval.ExpandResult]:
        """Expand `ids` in turn, sharing and spending the grant's remaining token budget."""
        remaining = min(args.get("tokenCap") or grant.remaining_tokens, grant.remaining_tokens)
        depth = min(args.get("maxDepth", 3), grant.max_depth)
        results = []
        for sid in ids:
            if remaining <= 0:
                break
            result = await retrieval.expand(
                self.store,
                sid,
                token_cap=remaining,
                include_messages=args.get("includeMessages", False),
                max_depth=depth,
            )
            remaining -= result.total_tokens
            await self.grants.consume(grant.child_session_key, result.total_tokens)
            results.append(result)
            if result.truncated:
                break
        return results


def _newest_first(hits: list[retrieval.GrepHit]) -> list[retrieval.GrepHit]:
    return sorted(hits, key=lambda h: h.time or "", reverse=True)


def _candidate_summaries(hits: list[retrieval.GrepHit]) -> list[str]:
    """Summaries worth expanding for these hits: summary hits, and the leaves over message hits."""
    ids: list[str] = []
    for h in hits:
        ref = h.id if h.kind == "summary" else h.covering_summary_id
        if ref:
            ids.append(ref)
    return list(dict.fromkeys(ids))


async def _summary_keys(store: Store, ids: list[str]) -> dict[str, str]:
    if not ids:
        return {}
    sql = text("SELECT summary_id, session_key FROM summaries WHERE summary_id IN :ids").bindparams(
        bindparam("ids", expanding=True)
    )
    async with store.read() as conn:
        return {r[0]: r[1] for r in await conn.execute(sql, {"ids": ids})}


def _hit_line(h: retrieval.GrepHit) -> str:
    if h.kind == "message":
        where = "raw in context" if h.in_context else f"covered by {h.covering_summary_id or 'nothing'}"
        if h.context_summary_id and h.context_summary_id != h.covering_summary_id:
            where += f" (context node {h.context_summary_id})"
        head = f"- {h.id} [{h.role}, seq {h.seq}] {h.session_key} @ {h.time} · {where}"
    else:
        head = f"- {h.id} [{h.summary_kind} d{h.depth}] {h.session_key} @ {h.time}"
    return f"{head}\n  {h.snippet}"


def _render_description(
    found: retrieval.SummaryDescription | retrieval.MessageDescription | retrieval.FileDescription,
) -> str:
    row = found.row
    if isinstance(found, retrieval.FileDescription):
        head = (
            f"LCM_FILE {found.id}\nmeta key={row['session_key']} message={row['message_id']} kind={row['kind']} "
            f"name={row['name']} mime={row['mime_type']} bytes={row['byte_size']} tok={row['token_count']}\n\n"
            f"{found.stub}"
        )
        if found.content is None:
            return head
        cut = f" (first {retrieval.FILE_CONTENT_CAP_BYTES} bytes of {row['byte_size']})" if found.truncated else ""
        return f"{head}\n\n--- content{cut} ---\n{found.content}"
    if isinstance(found, retrieval.MessageDescription):
        chain = " → ".join(c["id"] for c in found.covering) or "none (raw)"
        return (
            f"LCM_MESSAGE {found.id}\nmeta key={row['session_key']} session={row['session_id']} seq={row['seq']} "
            f"role={row['role']} tok={row['token_count']} in_context={found.in_context}\n"
            f"covered by: {chain}\n\n{row['text']}"
        )
    lines = [
        f"LCM_SUMMARY {found.id}",
        f"meta key={row['session_key']} kind={row['kind']} depth={row['depth']} tok={row['token_count']} "
        f"desc={row['descendant_count']} range={row['earliest_at']}..{row['latest_at']} in_context={found.in_context}",
        "sources: "
        + (", ".join(s["id"] for s in found.sources) or "none")
        + (f" + {len(found.source_message_ids)} message(s)" if found.source_message_ids else ""),
        "built into: " + (", ".join(c["id"] for c in found.children) or "none"),
        f"subtree ({found.manifest_total} node(s)); cost to expand: summaries-only / with messages:",
    ]
    for m in found.manifest:
        fits = "" if m.fits_cap is None else (" fits" if m.fits_cap else " over cap")
        lines.append(
            f"  {'  ' * m.level}{m.id} d{m.depth} {m.kind} tok={m.tokens} "
            f"expand={m.summaries_cost}/{m.messages_cost}{fits}"
        )
    lines += ["", row["content"]]
    return "\n".join(lines)


# --- lcm_expand_query ----------------------------------------------------------------------------------

_REPLY_FIELDS: dict[str, type] = {
    "answer": str,
    "citedIds": list,
    "expandedSummaryCount": int,
    "totalSourceTokens": int,
    "truncated": bool,
}


def _task_prompt(question: str, ids: list[str], token_cap: int) -> str:
    seeds = ", ".join(ids) or "(none: use lcm_grep)"
    return (
        "You are an autonomous LCM retrieval navigator. Answer the question below from the conversation's "
        "stored history. Start from the seed summaries: lcm_describe them, lcm_grep for more, and lcm_expand "
        f"selectively (includeMessages=true for the original evidence). Your expansion budget is {token_cap} "
        "tokens. Never call lcm_expand_query. When facts were updated, the newest statement wins.\n"
        f"Seed summaries: {seeds}\nQuestion: {question}\n"
        'Reply with ONLY a JSON object: {"answer": str, "citedIds": [str], "expandedSummaryCount": int, '
        '"totalSourceTokens": int, "truncated": bool}'
    )


def _parse_reply(reply: str | None) -> dict[str, Any] | str:
    """The child's JSON answer, or the error code that says why it is unusable."""
    if not reply or not reply.strip():
        return "DELEGATED_EXPANSION_REPLY_MISSING"
    body = reply.strip()
    start, end = body.find("{"), body.rfind("}")
    try:
        value = json.loads(body[start : end + 1]) if start >= 0 else None
    except json.JSONDecodeError:
        value = None
    if not isinstance(value, dict):
        return "DELEGATED_EXPANSION_REPLY_INVALID"
    for name, kind in _REPLY_FIELDS.items():
        item = value.get(name)
        if not isinstance(item, kind) or (kind is int and isinstance(item, bool)):
            return "DELEGATED_EXPANSION_REPLY_INVALID"
    if not all(isinstance(i, str) for i in value["citedIds"]):
        return "DELEGATED_EXPANSION_REPLY_INVALID"
    return {name: value[name] for name in _REPLY_FIELDS}


def _failure(code: str, detail: str) -> dict[str, Any]:
    return {
        "answer": "",
        "citedIds": [],
        "expandedSummaryCount": 0,
        "totalSourceTokens": 0,
        "truncated": False,
        "errorCode": code,
        "error": detail,
    }


def _evidence_answer(
    terms: list[str], results: list[retrieval.ExpandResult], raw: list[retrieval.GrepHit], max_tokens: int, store: Store
) -> tuple[str, list[str]]:
    """Without a model: the expanded messages that mention the query, best match then newest first."""
    pieces = [(e.id, e.seq or 0, e.text) for r in results for e in r.entries if e.kind == "message"]
    pieces += [(h.id, h.seq or 0, h.snippet) for h in raw]

    def matched(body: str) -> int:
        lowered = body.lower()
        return sum(1 for t in terms if t in lowered)

    ranked = sorted(dict.fromkeys(pieces), key=lambda p: (-matched(p[2]), -p[1]))
    if terms and any(matched(p[2]) for p in ranked):
        ranked = [p for p in ranked if matched(p[2])]
    lines: list[str] = []
    cited: list[str] = []
    used = 0
    for ref, _seq, body in ranked:
        line = f"[{ref}] {body}"
        cost = store.counter.count(line)
        if used + cost > max_tokens:
            break
        lines.append(line)
        cited.append(ref)
        used += cost
    return "\n".join(lines), cited


class _ExpandQuery:
    """Runs lcm_expand_query for a main-agent session."""

    def __init__(self, recall: _Recall) -> None:
        self.recall = recall

    async def __call__(self, args: dict[str, Any]) -> str:
        r = self.recall
        own = await r.grants.get(r.session_key)
        if own is not None and own.live(r.grants.clock()):
            raise GrantError("lcm_expand_query cannot be called from a delegated sub-agent; use lcm_expand")
        raw: list[retrieval.GrepHit] = []
        if "summaryIds" in args:
            ids = list(dict.fromkeys(s.strip() for s in args["summaryIds"]))
        elif "query" in args:
            search = {"limit": 50, "sort": "recency", "scope": "both", "allSessions": args.get("allSessions", False)}
            hits, _keys = await r.search(search, args["query"])
            ids = _candidate_summaries(hits)[:EXPAND_QUERY_CANDIDATES]
            raw = [h for h in hits if h.kind == "message" and h.in_context]
        else:
            raise ArgumentError("give 'query' or 'summaryIds'")
        token_cap = args.get("tokenCap") or r.expand_tokens
        owners = await _summary_keys(r.store, ids)
        missing = [i for i in ids if i not in owners]
        if missing:
            raise NotFoundError(f"no summary with id {', '.join(missing)}")
        keys = sorted(set(owners.values()) | {r.session_key})
        if not args.get("allSessions"):
            ids = [i for i in ids if owners[i] == r.session_key]
            keys = [r.session_key]
        # The delegation grant, with this call's cap and scope (as the reference does); a host's
        # prepareSubagentSpawn for the child keeps it rather than granting the defaults.
        child = f"{r.session_key}:subagent:lcm-expand-{uuid.uuid4().hex[:12]}"
        grant = await r.grants.create(
            r.session_key, child, token_cap=token_cap, max_depth=3, ttl_ms=DEFAULT_TTL_MS, allowed_session_keys=keys
        )
        try:
            if r.spawn is not None:
                outcome = await self._delegate(child, ids, args, token_cap)
            else:
                outcome = await self._in_process(grant, ids, raw, args)
        finally:
            await r.grants.revoke(child, "expansion finished")
        return json.dumps(outcome, ensure_ascii=False)

    async def _delegate(self, child: str, ids: list[str], args: dict[str, Any], token_cap: int) -> dict[str, Any]:
        r = self.recall
        assert r.spawn is not None
        timeout_s = args.get("timeoutMs", r.timeout_ms) / 1000
        prompt = _task_prompt(args["prompt"], ids, token_cap)
        task = ExpansionTask(r.session_key, child, args["prompt"], ids, token_cap, 3, timeout_s, prompt)
        try:
            reply = await asyncio.wait_for(r.spawn(task), timeout_s)
        except TimeoutError:
            return _failure("DELEGATED_EXPANSION_TIMEOUT", f"the recall sub-agent did not answer within {timeout_s:g}s")
        except Exception as exc:  # the child's failure is reported to the model, not raised into the turn
            return _failure("DELEGATED_EXPANSION_SPAWN_FAILED", f"{type(exc).__name__}: {exc}")
        parsed = _parse_reply(reply)
        if isinstance(parsed, str):
            return _failure(parsed, "the recall sub-agent's reply was not the JSON answer it was asked for")
        return parsed

    async def _in_process(
        self, grant: Grant, ids: list[str], raw: list[retrieval.GrepHit], args: dict[str, Any]
    ) -> dict[str, Any]:
        r = self.recall
        results = await r.expand_under_grant(grant, ids, {"includeMessages": True, "maxDepth": grant.max_depth})
        terms = fts_terms(args.get("query") or args["prompt"])
        answer, cited = _evidence_answer(terms, results, raw, args["maxTokens"], r.store)
        return {
            "answer": answer or "No matching detail found in the expanded history.",
            "citedIds": [res.summary_id for res in results] + cited,
            "expandedSummaryCount": len(results),
            "totalSourceTokens": sum(res.total_tokens for res in results),
            "truncated": any(res.truncated for res in results),
        }


# --- assembly --------------------------------------------------------------------------------------------


def build_tools(
    store: Store,
    *,
    session_key: str,
    config: object | None = None,
    grant_store: GrantStore | None = None,
    spawn: SpawnCallback | None = None,
) -> list[ToolSpec]:
    """The four recall tools for one calling session key.

    Args:
        store: the shared Store.
        session_key: the calling session's key (a sub-agent's key for a delegated child).
        config: engine config; ``max_expand_tokens`` and ``delegation_timeout_ms`` are read when present.
        grant_store: where grants live (default: a GrantStore over `store`).
        spawn: runs a recall sub-agent for ``lcm_expand_query`` and returns its reply text; without it the
            expansion runs in-process under a delegated grant.

    Returns:
        ToolSpecs for lcm_grep, lcm_describe, lcm_expand and lcm_expand_query.
    """
    recall = _Recall(store, session_key, config, grant_store or GrantStore(store), spawn)
    impls: dict[str, Callable[[dict[str, Any]], Awaitable[str]]] = {
        "lcm_grep": recall.grep,
        "lcm_describe": recall.describe,
        "lcm_expand": recall.expand,
        "lcm_expand_query": _ExpandQuery(recall),
    }
    return [ToolSpec(name, DESCRIPTIONS[name], SCHEMAS[name], _guarded(name, impl)) for name, impl in impls.items()]


def _guarded(name: str, impl: Callable[[dict[str, Any]], Awaitable[str]]) -> Callable[[dict[str, Any]], Awaitable[str]]:
    async def handle(args: dict[str, Any]) -> str:
        try:
            return await impl(validate(name, args))
        except (ArgumentError, RecallQueryError) as exc:
            return f"error: {name}: {exc}"
        except (NotFoundError, GrantError) as exc:
            return f"error: {name}: {exc.detail}"

    return handle
