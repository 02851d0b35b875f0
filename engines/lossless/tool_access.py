"""What the recall tools share: the caller, its grant and scope, the searches and expansions it may run.

Tools search the calling session key's whole history (every rotated session of it); ``allSessions``
searches every key; a delegated child with a live grant searches exactly its grant's keys.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from sqlalchemy import bindparam, text

from engines.lossless.grants import Grant, GrantError, GrantStore
from engines.lossless.tool_schemas import ArgumentError
from openclaw_ctx import recall
from openclaw_ctx.errors import NotFoundError
from openclaw_ctx.store.store import Store

__all__ = [
    "DEFAULT_EXPAND_TOKENS",
    "DEFAULT_TIMEOUT_MS",
    "ExpansionTask",
    "RecallAccess",
    "SpawnCallback",
    "candidate_summaries",
    "summary_keys",
]

DEFAULT_EXPAND_TOKENS = 4000
DEFAULT_TIMEOUT_MS = 120_000

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


def _config_int(config: object | None, snake: str, camel: str, default: int) -> int:
    value = config.get(camel, config.get(snake)) if isinstance(config, dict) else getattr(config, snake, None)
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else default


class RecallAccess:
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

    async def search(self, args: dict[str, Any], pattern: str) -> tuple[list[recall.GrepHit], list[str] | None]:
        """Grep within the caller's scope; returns the hits and the keys searched (None = all)."""
        keys = await self.scope(bool(args.get("allSessions")))
        common = {k: args[k] for k in ("mode", "scope", "sort", "since", "before", "limit") if k in args}
        if keys is None:
            return list(await recall.grep(self.store, pattern, **common)), None
        hits: list[recall.GrepHit] = []
        for key in keys:
            hits.extend(await recall.grep(self.store, pattern, session_key=key, **common))
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

    async def ask(self, args: dict[str, Any]) -> str:
        """``lcm_recall``: a plain-words question, ranked hits (hybrid by default) within the caller's scope."""
        keys = await self.scope(bool(args.get("allSessions")))
        common = {k: args[k] for k in ("mode", "since", "before", "limit") if k in args}
        question = args["query"]
        hits: list[recall.RecallHit] = []
        notes: list[str] = []
        scopes: list[str | None] = list(keys) if keys is not None else [None]
        for key in scopes:
            found = await recall.recall(self.store, question, session_key=key, **common)
            hits.extend(found)
            notes.extend(n for n in found.notes if n not in notes)
        hits = sorted(hits, key=lambda h: -h.score)[: args.get("limit", 10)]
        where = "all sessions" if keys is None else "session key " + ", ".join(keys)
        if not hits:
            return f"Nothing found for {question!r} in {where}."
        lines = [f"{len(hits)} hit(s) for {question!r} in {where}, best first:"]
        lines.extend(_hit_line(h) for h in hits)
        lines.extend(f"note: {n}" for n in notes)
        return "\n".join(lines)

    async def describe(self, args: dict[str, Any]) -> str:
        found = await recall.describe(
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
            ids = candidate_summaries(hits)
        else:
            raise ArgumentError("give 'summaryIds' or 'query'")
        owners = await summary_keys(self.store, ids)
        missing = [i for i in ids if i not in owners]
        if missing:
            raise NotFoundError(f"no summary with id {', '.join(missing)}")
        outside = [i for i in ids if not grant.allows(owners[i])]
        if outside:
            raise GrantError(f"{', '.join(outside)} belong(s) to a session outside this grant")
        return ids

    async def expand_under_grant(self, grant: Grant, ids: list[str], args: dict[str, Any]) -> list[recall.ExpandResult]:
        """Expand `ids` in turn, sharing and spending the grant's remaining token budget."""
        remaining = min(args.get("tokenCap") or grant.remaining_tokens, grant.remaining_tokens)
        depth = min(args.get("maxDepth", 3), grant.max_depth)
        results = []
        for sid in ids:
            if remaining <= 0:
                break
            result = await recall.expand(
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


def _newest_first(hits: list[recall.GrepHit]) -> list[recall.GrepHit]:
    return sorted(hits, key=lambda h: h.time or "", reverse=True)


def candidate_summaries(hits: list[recall.GrepHit]) -> list[str]:
    """Summaries worth expanding for these hits: summary hits, and the leaves over message hits."""
    ids: list[str] = []
    for h in hits:
        ref = h.id if h.kind == "summary" else h.covering_summary_id
        if ref:
            ids.append(ref)
    return list(dict.fromkeys(ids))


async def summary_keys(store: Store, ids: list[str]) -> dict[str, str]:
    if not ids:
        return {}
    sql = text("SELECT summary_id, session_key FROM summaries WHERE summary_id IN :ids").bindparams(
        bindparam("ids", expanding=True)
    )
    async with store.read() as conn:
        return {r[0]: r[1] for r in await conn.execute(sql, {"ids": ids})}


def _hit_line(h: recall.GrepHit | recall.RecallHit) -> str:
    if h.kind == "message":
        where = "raw in context" if h.in_context else f"covered by {h.covering_summary_id or 'nothing'}"
        if h.context_summary_id and h.context_summary_id != h.covering_summary_id:
            where += f" (context node {h.context_summary_id})"
        if isinstance(h, recall.RecallHit) and h.via:
            where += f", found through {h.via}"
        head = f"- {h.id} [{h.role}, seq {h.seq}] {h.session_key} @ {h.time} · {where}"
    else:
        head = f"- {h.id} [{h.summary_kind} d{h.depth}] {h.session_key} @ {h.time}"
    return f"{head}\n  {h.snippet}"


def _render_description(
    found: recall.SummaryDescription | recall.MessageDescription | recall.FileDescription,
) -> str:
    row = found.row
    if isinstance(found, recall.FileDescription):
        head = (
            f"LCM_FILE {found.id}\nmeta key={row['session_key']} message={row['message_id']} kind={row['kind']} "
            f"name={row['name']} mime={row['mime_type']} bytes={row['byte_size']} tok={row['token_count']}\n\n"
            f"{found.stub}"
        )
        if found.content is None:
            return head
        cut = f" (first {recall.FILE_CONTENT_CAP_BYTES} bytes of {row['byte_size']})" if found.truncated else ""
        return f"{head}\n\n--- content{cut} ---\n{found.content}"
    if isinstance(found, recall.MessageDescription):
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
