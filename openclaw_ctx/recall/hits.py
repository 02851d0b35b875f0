"""What ``recall`` returns: ranked hits with everything ``expand`` and ``describe`` need next."""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any, Literal

from sqlalchemy.ext.asyncio import AsyncConnection

from openclaw_ctx._time import iso_from_ms
from openclaw_ctx.recall.covers import covers_and_raw, summaries_in_context
from openclaw_ctx.recall.grep import snippet
from openclaw_ctx.recall.lexical import STOP_WORDS
from openclaw_ctx.recall.rows import MSG_MS
from openclaw_ctx.recall.source import camel_keys
from openclaw_ctx.store.repo import Driver

if TYPE_CHECKING:
    from openclaw_ctx.recall.candidates import Fused

__all__ = ["RecallHit", "RecallHits", "build_hits"]


@dataclass(frozen=True)
class RecallHit:
    """One ranked item. A message hit carries its entry id and the summaries over it; `via` names the
    summary whose match lifted it (None when it matched itself)."""

    id: str
    kind: Literal["message", "summary"]
    session_key: str
    session_id: str
    time: str | None
    snippet: str
    score: float
    rank: int
    message_id: int | None = None
    entry_id: str | None = None
    seq: int | None = None
    role: str | None = None
    depth: int | None = None
    summary_kind: str | None = None
    covering_summary_id: str | None = None
    context_summary_id: str | None = None
    in_context: bool = False
    via: str | None = None

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form (camelCase keys)."""
        return camel_keys(asdict(self))


class RecallHits(list[RecallHit]):
    """The hits, the rankings that made them (`mode`) and anything the caller should know (`notes`)."""

    def __init__(self, hits: list[RecallHit], *, mode: str, notes: list[str] | None = None) -> None:
        super().__init__(hits)
        self.mode = mode
        self.notes = notes or []


_MESSAGES_SQL = (
    f"SELECT m.message_id, m.session_key, m.session_id, m.seq, m.role, m.entry_id, {MSG_MS}, substr(m.text, 1, 20000) "
    "FROM messages AS m WHERE m.message_id IN (SELECT value FROM json_each(?))"
)
_SUMMARIES_SQL = (
    "SELECT s.summary_id, s.session_key, s.session_id, s.depth, s.kind, COALESCE(s.latest_at, s.created_at), "
    "substr(s.content, 1, 20000) FROM summaries AS s WHERE s.summary_id IN (SELECT value FROM json_each(?))"
)


async def build_hits(
    conn: AsyncConnection, fused: dict[int | str, Fused], limit: int, question: str
) -> list[RecallHit]:
    """The best `limit` fused items as hits (ties go to the newer item, then to the message)."""
    order = sorted(fused.items(), key=lambda kv: (-kv[1].score, -kv[1].ms, isinstance(kv[0], str)))[:limit]
    message_ids = [i for i, _ in order if isinstance(i, int)]
    summary_ids = [i for i, _ in order if isinstance(i, str)]
    driver = await Driver.of(conn)
    messages = {r[0]: r for r in await driver.fetchall(_MESSAGES_SQL, (json.dumps(message_ids),))}
    summaries = {r[0]: r for r in await driver.fetchall(_SUMMARIES_SQL, (json.dumps(summary_ids),))}
    covers, raw = await covers_and_raw(conn, message_ids)
    shown = await summaries_in_context(conn, summary_ids)
    words = " ".join(w for w in question.split() if w.lower().strip("?,.!") not in STOP_WORDS)
    hits: list[RecallHit] = []
    for item, entry in order:
        if isinstance(item, int) and item in messages:
            mid, key, sid, seq, role, entry_id, ms, body = messages[item]
            leaf, ctx = covers.get(mid, (None, None))
            hits.append(
                RecallHit(
                    id=f"msg_{mid}",
                    kind="message",
                    session_key=key,
                    session_id=sid,
                    time=iso_from_ms(ms),
                    snippet=snippet(body or "", words, "full_text"),
                    score=round(entry.score, 6),
                    rank=len(hits) + 1,
                    message_id=mid,
                    entry_id=entry_id,
                    seq=seq,
                    role=role,
                    covering_summary_id=leaf,
                    context_summary_id=ctx,
                    in_context=mid in raw,
                    via=entry.via,
                )  # fmt: skip
            )
        elif isinstance(item, str) and item in summaries:
            sid_, key, sid, depth, kind, at, body = summaries[item]
            hits.append(
                RecallHit(
                    id=sid_,
                    kind="summary",
                    session_key=key,
                    session_id=sid,
                    time=at,
                    snippet=snippet(body or "", words, "full_text"),
                    score=round(entry.score, 6),
                    rank=len(hits) + 1,
                    depth=depth,
                    summary_kind=kind,
                    in_context=sid_ in shown,
                )  # fmt: skip
            )
    return hits
