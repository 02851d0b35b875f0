"""The stored embeddings: writing them for history that has none, and searching them.

Vectors are derived data. :func:`embed_pending` fills `message_vectors` / `summary_vectors` for items
that have none (or one from another model), a committed batch at a time, so it resumes where it
stopped; the runtime calls it for a key after each turn, off the reply path.

Search keeps one in-memory matrix per (database, scope, model), extended on each call by the rows
written since (the store only appends), so a query costs a matrix-vector product over what is
already loaded, not a read of the history. Items with no stored vector yet are embedded in memory
for the query (up to :data:`INLINE_LIMIT` of them, newest first) and never written by a read.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt
from sqlalchemy.ext.asyncio import AsyncConnection

from openclaw_ctx.recall.embedding import Embedder, Matrix, dequantize, quantize
from openclaw_ctx.recall.rows import MSG_MS, SUM_MS
from openclaw_ctx.store.repo import Driver
from openclaw_ctx.store.store import Store

__all__ = [
    "INLINE_LIMIT",
    "EmbedReport",
    "VectorHit",
    "embed_pending",
    "pending_counts",
    "search_vectors",
    "similarities",
]

INLINE_LIMIT = 20_000
"""Items without a stored vector that one search embeds in memory (about 0.3 s of work at most)."""
_BATCH = 256

_TEXT = {"messages": "m.text", "summaries": "s.content"}
_PENDING_SQL = {
    "messages": (
        "SELECT m.message_id, m.session_key, substr(m.text, 1, 8000) FROM messages AS m "
        "LEFT JOIN message_vectors AS v ON v.message_id = m.message_id "
        "WHERE (v.message_id IS NULL OR v.model <> :model) AND m.message_id > :after{key} "
        "ORDER BY m.message_id LIMIT :n"
    ),
    "summaries": (
        "SELECT s.rowid, s.session_key, substr(s.content, 1, 8000), s.summary_id FROM summaries AS s "
        "LEFT JOIN summary_vectors AS v ON v.summary_id = s.summary_id "
        "WHERE (v.summary_id IS NULL OR v.model <> :model) AND s.rowid > :after{key} "
        "ORDER BY s.rowid LIMIT :n"
    ),
}
_TEXT_SQL = (
    "SELECT message_id, substr(text, 1, 8000) FROM messages WHERE message_id IN (SELECT value FROM json_each(?))"
)
_WRITE_SQL = {
    "messages": "INSERT OR REPLACE INTO message_vectors (message_id, session_key, model, vector) VALUES (?, ?, ?, ?)",
    "summaries": "INSERT OR REPLACE INTO summary_vectors (summary_id, session_key, model, vector) VALUES (?, ?, ?, ?)",
}
# Every item of the scope after the watermark, with its stored vector when there is one of this model
# (else its text, to embed in memory), and its time in epoch ms.
_LOAD_SQL = {
    "messages": (
        f"SELECT m.message_id, m.message_id, {MSG_MS}, v.vector, "
        "CASE WHEN v.vector IS NULL THEN substr(m.text, 1, 8000) END FROM messages AS m "
        "LEFT JOIN message_vectors AS v ON v.message_id = m.message_id AND v.model = :model "
        "WHERE m.message_id > :after{key} ORDER BY m.message_id"
    ),
    "summaries": (
        f"SELECT s.rowid, s.summary_id, {SUM_MS}, v.vector, "
        "CASE WHEN v.vector IS NULL THEN substr(s.content, 1, 8000) END FROM summaries AS s "
        "LEFT JOIN summary_vectors AS v ON v.summary_id = s.summary_id AND v.model = :model "
        "WHERE s.rowid > :after{key} ORDER BY s.rowid"
    ),
}


@dataclass
class EmbedReport:
    """What :func:`embed_pending` wrote, and the last item id it looked at per table (to resume after)."""

    model: str
    messages: int = 0
    summaries: int = 0
    after: dict[str, int] = field(default_factory=lambda: {"messages": -1, "summaries": -1})


def _key_sql(table: str, session_key: str | None, *, by_rowid: bool = False) -> str:
    """The key filter; `by_rowid` keeps SQLite on the rowid range (a refresh reads only new rows)."""
    alias = "m" if table == "messages" else "s"
    if session_key is None:
        return ""
    return f" AND {'+' if by_rowid else ''}{alias}.session_key = :key"


async def pending_counts(conn: AsyncConnection, model: str, session_key: str | None = None) -> dict[str, int]:
    """Items with no vector of `model`, per table (``messages``, ``summaries``)."""
    driver = await Driver.of(conn)
    out: dict[str, int] = {}
    for table in ("messages", "summaries"):
        sql = "SELECT count(*) FROM (" + _PENDING_SQL[table].replace(" LIMIT :n", "") + ")"
        params: dict[str, Any] = {"model": model, "after": -1}
        if session_key is not None:
            params["key"] = session_key
        out[table] = int((await driver.fetchall(sql.format(key=_key_sql(table, session_key)), params))[0][0])
    return out


async def embed_pending(
    store: Store,
    embedder: Embedder,
    *,
    session_key: str | None = None,
    after: dict[str, int] | None = None,
    limit: int | None = None,
    progress: Callable[[int], None] | None = None,
) -> EmbedReport:
    """Embed and store every item (of one key, or all) that has no vector of this model, oldest first.

    Each batch of up to 256 items is its own transaction: stopping (Ctrl-C, a crash) keeps what was
    written and a second call carries on from there. `after` (a previous report's) skips the item
    ids already looked at, so a caller that embeds after every turn reads only the new rows. `limit`
    bounds the items embedded in this call; `progress` is told how many items each batch wrote.
    """
    report = EmbedReport(embedder.model)
    if after is not None:
        report.after.update(after)
    for table in ("messages", "summaries"):
        while (limit is None or report.messages + report.summaries < limit) and not store.closing:
            room = _BATCH if limit is None else min(_BATCH, limit - report.messages - report.summaries)
            params: dict[str, Any] = {"model": embedder.model, "after": report.after[table], "n": room}
            if session_key is not None:
                params["key"] = session_key
            key_sql = _key_sql(table, session_key, by_rowid=report.after[table] >= 0)
            async with store.transaction() as conn:
                driver = await Driver.of(conn)
                rows = await driver.fetchall(_PENDING_SQL[table].format(key=key_sql), params)
                if not rows:
                    break
                blobs = quantize(embedder.embed([r[2] or "" for r in rows]))
                ids = [r[0] if table == "messages" else r[3] for r in rows]
                await driver.executemany(
                    _WRITE_SQL[table], [(i, r[1], embedder.model, b) for i, r, b in zip(ids, rows, blobs, strict=True)]
                )
            report.after[table] = int(rows[-1][0])
            if table == "messages":
                report.messages += len(rows)
            else:
                report.summaries += len(rows)
            if progress is not None:
                progress(len(rows))
    return report


@dataclass(frozen=True)
class VectorHit:
    """One item by similarity: a message id (int) or a summary id (str), its cosine and time."""

    item: int | str
    similarity: float
    ms: int


@dataclass
class _Index:
    """Loaded rows of one scope: ids, epoch-ms times and unit float32 vectors, up to a watermark."""

    dim: int
    watermark: int = -1
    items: list[int | str] = field(default_factory=list)
    ms: npt.NDArray[np.int64] = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    matrix: Matrix = field(default_factory=lambda: np.zeros((0, 0), dtype=np.float32))
    positions: dict[int | str, int] = field(default_factory=dict)
    inline: int = 0
    """Rows embedded in memory because the store had no vector for them."""
    lock: threading.Lock = field(default_factory=threading.Lock)


_indexes: dict[tuple[str, str, str | None, str], _Index] = {}
_indexes_lock = threading.Lock()


def _index_for(conn: AsyncConnection, table: str, session_key: str | None, embedder: Embedder) -> _Index:
    where = str(conn.engine.url)
    key = (where, table, session_key, embedder.model)
    with _indexes_lock:
        index = _indexes.get(key)
        if index is None:
            index = _indexes[key] = _Index(embedder.dim, matrix=np.zeros((0, embedder.dim), dtype=np.float32))
        return index


async def _refresh(conn: AsyncConnection, table: str, session_key: str | None, embedder: Embedder) -> _Index:
    index = _index_for(conn, table, session_key, embedder)
    params: dict[str, Any] = {"model": embedder.model, "after": index.watermark}
    if session_key is not None:
        params["key"] = session_key
    key_sql = _key_sql(table, session_key, by_rowid=index.watermark >= 0)
    rows = await (await Driver.of(conn)).fetchall(_LOAD_SQL[table].format(key=key_sql), params)
    if not rows:
        return index
    # A vector of the wrong size (damaged) is embedded again, as if it were missing.
    stored = [i for i, r in enumerate(rows) if r[3] is not None and len(r[3]) == embedder.dim]
    missing = [i for i, r in enumerate(rows) if r[3] is None or len(r[3]) != embedder.dim]
    if len(missing) > INLINE_LIMIT:
        missing = missing[-INLINE_LIMIT:]  # the newest; the rest waits for `openclaw-ctx embed`
    vectors = np.zeros((len(rows), embedder.dim), dtype=np.float32)
    if stored:
        vectors[stored] = dequantize([rows[i][3] for i in stored], embedder.dim).astype(np.float32) / 127.0
    if missing:
        vectors[missing] = embedder.embed([rows[i][4] or "" for i in missing])
    keep = sorted([*stored, *missing])
    with index.lock:
        keep = [i for i in keep if rows[i][0] > index.watermark]  # a concurrent refresh got there first
        start = len(index.items)
        index.items.extend(rows[i][1] for i in keep)
        index.positions.update((rows[i][1], start + n) for n, i in enumerate(keep))
        index.ms = np.concatenate([index.ms, np.array([rows[i][2] or 0 for i in keep], dtype=np.int64)])
        index.matrix = np.concatenate([index.matrix, vectors[keep]])
        index.inline += len(missing)
        index.watermark = max(index.watermark, int(rows[-1][0]))
    return index


async def search_vectors(
    conn: AsyncConnection,
    table: str,
    query: Matrix,
    embedder: Embedder,
    *,
    session_key: str | None,
    since_ms: int | None,
    before_ms: int | None,
    limit: int,
) -> list[VectorHit]:
    """The `limit` items of `table` (``messages`` or ``summaries``) most similar to the unit `query` row."""
    index = await _refresh(conn, table, session_key, embedder)
    with index.lock:
        matrix, ms, items = index.matrix, index.ms, index.items
    if not len(items):
        return []
    scores = matrix @ query.reshape(-1)
    if since_ms is not None:
        scores = np.where(ms >= since_ms, scores, -np.inf)
    if before_ms is not None:
        scores = np.where(ms < before_ms, scores, -np.inf)
    take = min(limit, len(items))
    best = np.argpartition(-scores, take - 1)[:take]
    best = best[np.argsort(-scores[best], kind="stable")]
    return [VectorHit(items[i], float(scores[i]), int(ms[i])) for i in best if np.isfinite(scores[i])]


async def similarities(
    conn: AsyncConnection, session_key: str | None, query: Matrix, embedder: Embedder, message_ids: list[int]
) -> list[float]:
    """Cosine of `query` with each message: from the loaded index, else embedded now (text read only for those)."""
    index = await _refresh(conn, "messages", session_key, embedder)
    with index.lock:
        rows = [index.positions.get(mid) for mid in message_ids]
        known = index.matrix[[r for r in rows if r is not None]] @ query.reshape(-1)
    unknown = [mid for mid, r in zip(message_ids, rows, strict=True) if r is None]
    fresh = np.zeros(0, dtype=np.float32)
    if unknown:
        found = await (await Driver.of(conn)).fetchall(_TEXT_SQL, (json.dumps(unknown),))
        texts = {mid: body or "" for mid, body in found}
        fresh = embedder.embed([texts.get(mid, "") for mid in unknown]) @ query.reshape(-1)
    it_known, it_fresh = iter(known.tolist()), iter(fresh.tolist())
    return [next(it_known) if r is not None else next(it_fresh) for r in rows]
