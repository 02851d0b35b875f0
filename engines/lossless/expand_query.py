"""``lcm_expand_query``: the main agent's door to expansion, through a sub-agent or in-process.

It finds candidates with grep, then runs the expansion in a sub-agent through the ``spawn`` callback
(which must start the child through ``Runtime.spawn_subagent`` so the engine's
``prepare_subagent_spawn`` grants it), or, with no callback, in-process under a delegated grant that
is created and revoked around the call.
"""

from __future__ import annotations

import asyncio
import json
import uuid
from typing import Any

from engines.lossless.grants import DEFAULT_TTL_MS, Grant, GrantError
from engines.lossless.tool_access import ExpansionTask, RecallAccess, candidate_summaries, summary_keys
from engines.lossless.tool_schemas import ArgumentError
from openclaw_ctx import recall
from openclaw_ctx.errors import NotFoundError
from openclaw_ctx.recall import fts_terms
from openclaw_ctx.store.store import Store

__all__ = ["EXPAND_QUERY_CANDIDATES", "ExpandQuery"]

EXPAND_QUERY_CANDIDATES = 6

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
    terms: list[str], results: list[recall.ExpandResult], raw: list[recall.GrepHit], max_tokens: int, store: Store
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


class ExpandQuery:
    """Runs lcm_expand_query for a main-agent session."""

    def __init__(self, recall: RecallAccess) -> None:
        self.recall = recall

    async def __call__(self, args: dict[str, Any]) -> str:
        r = self.recall
        own = await r.grants.get(r.session_key)
        if own is not None and own.live(r.grants.clock()):
            raise GrantError("lcm_expand_query cannot be called from a delegated sub-agent; use lcm_expand")
        raw: list[recall.GrepHit] = []
        if "summaryIds" in args:
            ids = list(dict.fromkeys(s.strip() for s in args["summaryIds"]))
        elif "query" in args:
            search = {"limit": 50, "sort": "recency", "scope": "both", "allSessions": args.get("allSessions", False)}
            hits, _keys = await r.search(search, args["query"])
            ids = candidate_summaries(hits)[:EXPAND_QUERY_CANDIDATES]
            raw = [h for h in hits if h.kind == "message" and h.in_context]
        else:
            raise ArgumentError("give 'query' or 'summaryIds'")
        token_cap = args.get("tokenCap") or r.expand_tokens
        owners = await summary_keys(r.store, ids)
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
        self, grant: Grant, ids: list[str], raw: list[recall.GrepHit], args: dict[str, Any]
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
