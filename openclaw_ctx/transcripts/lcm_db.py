"""Import lossless-claw's own database (``lcm.db``, 0.15.x) onto the OpenClaw history already imported.

lossless-claw keeps, per OpenClaw session (a ``conversations`` row), the messages it ingested as
flattened text, its summary DAG (``summaries`` with ``summary_messages`` and ``summary_parents``) and
the context it assembles (``context_items``). The messages themselves come from OpenClaw's transcripts,
which this store imports in full (`openclaw-ctx import`): so a conversation lands on the stored
session with its id, and each of its messages on the stored message with the same transcript entry
id, else the same stable event key (a reply's ``responseId``, a tool result's ``toolCallId``) when
exactly one stored message has it. Summaries keep their ids, kinds, depths, text and time range;
their token counts are counted again here with this store's tokenizer, as are the totals above
them. The conversation's context becomes the session's (the session is then lossless-claw's).

Nothing is guessed: a conversation whose session is not stored, a message that matches nothing (or
matches more than one, or one another lcm message took), a summary whose sources did not all land
(and every summary above it) are reported and left out; a context holding such a summary is not
imported (the session keeps its own, so no message falls out of every context), and a context item
of a message only lcm.db holds is dropped. Rows naming a conversation or summary the file lacks are
reported. Older files (columns lossless-claw added later) read with those columns empty. Each
conversation is one transaction; importing again adds nothing.
"""

from __future__ import annotations

import asyncio
import json
import sqlite3
from collections import defaultdict
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from sqlalchemy import func, select
from sqlalchemy.ext.asyncio import AsyncConnection

from openclaw_ctx._ids import LOSSLESS_ENGINE_ID
from openclaw_ctx._time import format_utc
from openclaw_ctx.errors import NotFoundError, StoreError
from openclaw_ctx.store.files import read_only_url
from openclaw_ctx.store.models import Message, Summary
from openclaw_ctx.store.repo import NewSummary, SessionRow, get_session, insert_summary
from openclaw_ctx.store.restore import RestoredItem, replace_context_items, set_session_engine
from openclaw_ctx.store.store import Store
from openclaw_ctx.tokens import TokenCounter
from openclaw_ctx.transcripts.custom.lookup import CHUNK

__all__ = ["LCM_SUMMARIZER", "LcmConversationReport", "LcmImportReport", "import_lcm_db", "is_lcm_db"]

LCM_SUMMARIZER = "lossless-claw-import"
"""`summaries.summarizer` of the nodes brought over from an lcm.db."""

_TABLES = {"conversations", "messages", "summaries", "summary_messages", "summary_parents", "context_items"}
_ROLES = {"user": {"user", "custom"}, "assistant": {"assistant"}, "tool": {"toolResult", "bashExecution"}}


@dataclass
class _Conversation:
    conversation_id: int
    session_id: str
    session_key: str | None
    messages: list[tuple[int, str, str | None, str | None]] = field(default_factory=list)
    """``(message_id, role, transcript_entry_id, stable_event_key)`` in ``seq`` order."""
    summaries: list[dict[str, Any]] = field(default_factory=list)
    sources: dict[str, list[int]] = field(default_factory=dict)
    parents: dict[str, list[str]] = field(default_factory=dict)
    context: list[tuple[str, int | None, str | None]] = field(default_factory=list)


@dataclass
class LcmConversationReport:
    """What importing one lcm.db conversation did."""

    conversation_id: int
    session_id: str
    session_key: str | None
    messages: int = 0
    messages_matched: int = 0
    summaries: int = 0
    summaries_new: int = 0
    context_items: int = 0
    problems: list[str] = field(default_factory=list)


@dataclass
class LcmImportReport:
    """What ``import --lcm-db`` did, per conversation."""

    path: str
    conversations: list[LcmConversationReport] = field(default_factory=list)
    orphans: list[str] = field(default_factory=list)
    """Rows naming a conversation or summary the file does not hold."""

    @property
    def problems(self) -> list[str]:
        """Every problem, named by conversation."""
        return self.orphans + [
            f"conversation {c.conversation_id} ({c.session_id}): {p}" for c in self.conversations for p in c.problems
        ]

    @property
    def clean(self) -> bool:
        return not self.problems


def is_lcm_db(tables: set[str]) -> bool:
    """Whether a database with these tables is lossless-claw's (its core tables, no alembic revision)."""
    return _TABLES <= tables and "alembic_version" not in tables


def _json(text: str | None) -> Any:
    try:
        return json.loads(text or "null")
    except ValueError:
        return text


def _utc(value: Any) -> str | None:
    """lossless-claw's time (ISO, or SQLite's ``YYYY-MM-DD HH:MM:SS`` in UTC) in the store's format."""
    if not isinstance(value, str) or not value:
        return None
    try:
        return format_utc(datetime.fromisoformat(value.replace("Z", "+00:00")))
    except ValueError:
        return None


def _columns(con: sqlite3.Connection, table: str, wanted: list[str]) -> str:
    """`wanted` as a select list, NULL for a column an older lossless-claw did not have yet."""
    have = {c[1] for c in con.execute(f"PRAGMA table_info({table})")}
    return ", ".join(c if c in have else f"NULL AS {c}" for c in wanted)


def _read(path: Path) -> tuple[list[_Conversation], list[str]]:
    """The conversations of the lcm.db at `path`, and the rows that name what is not there."""
    path = path.expanduser()
    if not path.is_file():
        raise NotFoundError(f"{path}: no such file")
    try:
        con = sqlite3.connect(read_only_url(path), uri=True)
    except sqlite3.Error as exc:
        raise StoreError(f"{path}: cannot be opened ({exc})") from exc
    orphans: list[str] = []
    try:
        con.execute("BEGIN")  # one snapshot while the plugin may still be writing it
        tables = {n for (n,) in con.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
        if not is_lcm_db(tables):
            raise StoreError(f"{path}: not lossless-claw's lcm.db (it lacks {', '.join(sorted(_TABLES - tables))})")
        found = {
            cid: _Conversation(cid, str(sid), key)
            for cid, sid, key in con.execute(
                f"SELECT {_columns(con, 'conversations', ['conversation_id', 'session_id', 'session_key'])}"
                " FROM conversations ORDER BY conversation_id"
            )
        }
        wanted = ["conversation_id", "message_id", "role", "transcript_entry_id", "stable_event_key"]
        for cid, *row in con.execute(f"SELECT {_columns(con, 'messages', wanted)} FROM messages ORDER BY 1, seq"):
            _owner(found, cid, orphans, f"message {row[0]}").messages.append(tuple(row))
        columns = [c[1] for c in con.execute("PRAGMA table_info(summaries)")]
        by_summary: dict[str, _Conversation] = {}
        for row in con.execute("SELECT * FROM summaries ORDER BY depth, created_at, summary_id"):
            summary = dict(zip(columns, row, strict=True))
            owner = _owner(found, summary["conversation_id"], orphans, f"summary {summary['summary_id']}")
            owner.summaries.append(summary)
            by_summary[summary["summary_id"]] = owner
        edges = (
            ("SELECT summary_id, message_id FROM summary_messages ORDER BY summary_id, ordinal", "sources"),
            ("SELECT summary_id, parent_summary_id FROM summary_parents ORDER BY summary_id, ordinal", "parents"),
        )
        for query, kind in edges:
            for sid, source in con.execute(query):
                if sid in by_summary:
                    getattr(by_summary[sid], kind).setdefault(sid, []).append(source)
                else:
                    orphans.append(f"an edge of summary {sid!r}, which does not exist; left out")
        for cid, *item in con.execute(
            "SELECT conversation_id, item_type, message_id, summary_id FROM context_items ORDER BY 1, ordinal"
        ):
            _owner(found, cid, orphans, "a context item").context.append(tuple(item))
    except sqlite3.DatabaseError as exc:
        raise StoreError(f"{path}: cannot be read as lcm.db ({exc})") from exc
    finally:
        con.close()
    return list(found.values()), orphans


def _owner(found: dict[int, _Conversation], cid: Any, orphans: list[str], what: str) -> _Conversation:
    """The conversation a row belongs to; a row of a conversation that does not exist goes to a discard."""
    if cid in found:
        return found[cid]
    orphans.append(f"{what} of conversation {cid}, which does not exist; left out")
    return _Conversation(-1, "", None)


async def _match_messages(
    conn: AsyncConnection, session: SessionRow, conv: _Conversation
) -> dict[int, tuple[int, int]]:
    """lcm message id → ``(message_id, token_count)`` of the stored message it is."""
    rows = (
        await conn.execute(
            select(
                Message.message_id,
                Message.role,
                Message.entry_id,
                Message.tool_call_id,
                func.json_extract(Message.message_json, "$.responseId"),
                Message.token_count,
            ).where(Message.session_key == session.session_key)
        )
    ).all()
    by_entry = {r[2]: r for r in rows if r[2] is not None}
    by_event: dict[str, list[Any]] = defaultdict(list)
    for r in rows:
        for event in {r[3], r[4]} - {None}:
            by_event[str(event)].append(r)
    matched: dict[int, tuple[int, int]] = {}
    used: set[int] = set()
    for lcm_id, _, entry_id, _ in conv.messages:  # entry ids first: they are exact
        row = by_entry.get(entry_id) if entry_id else None
        if row is not None and row[0] not in used:
            matched[lcm_id] = (row[0], row[5])
            used.add(row[0])
    for lcm_id, role, _, event_key in conv.messages:
        if lcm_id in matched or not event_key:
            continue
        candidates = [r for r in by_event.get(event_key, []) if r[1] in _ROLES.get(role, set()) and r[0] not in used]
        if len(candidates) == 1:  # more than one: ambiguous, and never guessed
            matched[lcm_id] = (candidates[0][0], candidates[0][5])
            used.add(candidates[0][0])
    return matched


def _unmatched(conv: _Conversation, matched: dict[int, tuple[int, int]]) -> str | None:
    missing = [m for m in conv.messages if m[0] not in matched]
    if not missing:
        return None
    first = missing[0]
    named = f"entry id {first[2]!r}" if first[2] else f"stable key {first[3]!r}" if first[3] else "no entry id"
    return (
        f"{len(missing)} of {len(conv.messages)} lcm messages match no stored message "
        f"(first: lcm message {first[0]}, {first[1]}, {named}); they are left out"
    )


async def _stored(conn: AsyncConnection, ids: list[str]) -> dict[str, tuple[str, int, int, int, int]]:
    """Summary id → (key, tokens, descendants, their tokens, source message tokens) of the stored ones."""
    wanted, found = list(set(ids)), {}
    for start in range(0, len(wanted), CHUNK):
        rows = await conn.execute(
            select(
                Summary.summary_id,
                Summary.session_key,
                Summary.token_count,
                Summary.descendant_count,
                Summary.descendant_token_count,
                Summary.source_message_token_count,
            ).where(Summary.summary_id.in_(wanted[start : start + CHUNK]))
        )
        found.update({r[0]: (r[1], r[2], r[3], r[4], r[5]) for r in rows})
    return found


async def _summaries(
    conn: AsyncConnection,
    counter: TokenCounter,
    session: SessionRow,
    conv: _Conversation,
    matched: dict[int, tuple[int, int]],
    report: LcmConversationReport,
) -> dict[str, int]:
    """Insert the conversation's summaries whose sources all landed; summary id → token count."""
    ids = [row["summary_id"] for row in conv.summaries] + [p for ps in conv.parents.values() for p in ps]
    stored = await _stored(conn, ids)
    # Already stored under this key (a second import; a source built in another conversation of it).
    mine = {sid: row for sid, row in stored.items() if row[0] == session.session_key}
    landed = {sid: row[1] for sid, row in mine.items()}
    totals = {sid: row[2:] for sid, row in mine.items()}  # (descendants, their tokens, source message tokens)
    for row in conv.summaries:
        sid = row["summary_id"]
        messages, parents = conv.sources.get(sid, []), conv.parents.get(sid, [])
        if sid in stored:
            if sid not in mine:
                report.problems.append(f"summary {sid} is already stored under key {stored[sid][0]!r}; left out")
            continue
        lost = [f"message {m}" for m in messages if m not in matched] + [p for p in parents if p not in landed]
        if lost:
            report.problems.append(f"summary {sid} ({row['kind']}) is left out: its source {lost[0]} did not land")
            continue
        tokens = max(1, counter.count(row["content"]))
        below = [totals[p] for p in parents]
        own = sum(matched[m][1] for m in messages)
        totals[sid] = (
            sum(d + 1 for d, _, _ in below),
            sum(landed[p] + t for p, (_, t, _) in zip(parents, below, strict=True)),
            own + sum(s for _, _, s in below),
        )
        await insert_summary(
            conn,
            session,
            NewSummary(
                kind=row["kind"],
                content=row["content"],
                token_count=tokens,
                summarizer=LCM_SUMMARIZER,
                source_message_ids=[matched[m][0] for m in messages],
                source_summary_ids=list(parents),
                depth=int(row.get("depth") or 0),
                model=None if row.get("model") in (None, "unknown") else row["model"],
                earliest_at=_utc(row.get("earliest_at")),
                latest_at=_utc(row.get("latest_at")),
                descendant_count=totals[sid][0],
                descendant_token_count=totals[sid][1],
                source_message_token_count=totals[sid][2],
                details={"lcm": {"tokenCount": row.get("token_count"), "fileIds": _json(row.get("file_ids"))}},
                summary_id=sid,
                created_at=_utc(row.get("created_at")),
            ),
        )
        landed[sid] = tokens
        report.summaries_new += 1
    return landed


async def _import_conversation(
    conn: AsyncConnection, counter: TokenCounter, conv: _Conversation, report: LcmConversationReport
) -> None:
    try:
        session = await get_session(conn, conv.session_id)
    except NotFoundError:
        report.problems.append("no stored session has this id: import its OpenClaw transcripts first; left out")
        return
    if conv.session_key and conv.session_key != session.session_key:
        report.problems.append(
            f"lcm.db keys it {conv.session_key!r}, this store {session.session_key!r}; imported under the store's key"
        )
    matched = await _match_messages(conn, session, conv)
    report.messages_matched = len(matched)
    if (problem := _unmatched(conv, matched)) is not None:
        report.problems.append(problem)
    landed = await _summaries(conn, counter, session, conv, matched, report)
    items: list[RestoredItem] = []
    lost_summaries = []
    for item_type, message_id, summary_id in conv.context:
        if item_type == "message" and message_id in matched:
            items.append(RestoredItem(len(items), "message", matched[message_id][0], matched[message_id][1]))
        elif item_type == "summary" and summary_id in landed:
            items.append(RestoredItem(len(items), "summary", summary_id, landed[summary_id]))
        elif item_type == "summary":
            lost_summaries.append(summary_id)
    if lost_summaries:
        # Without that node its messages would be in no context at all: the session keeps the one it has.
        report.problems.append(
            f"context not imported: it holds summary {lost_summaries[0]}, which was left out; "
            "the session keeps its current context"
        )
        return
    if len(items) < len(conv.context):
        dropped = len(conv.context) - len(items)
        report.problems.append(f"{dropped} context items are messages only lcm.db holds; they are dropped")
    if items:
        await replace_context_items(conn, session.session_id, items)
        await set_session_engine(conn, session, LOSSLESS_ENGINE_ID)
    report.context_items = len(items)


async def import_lcm_db(store: Store, path: str | Path) -> LcmImportReport:
    """Bring an lcm.db's summaries, DAG links and context onto the stored sessions (see the module docstring).

    Raises:
        NotFoundError: the file does not exist.
        StoreError: it is not lossless-claw's database, or cannot be read.
    """
    conversations, orphans = await asyncio.to_thread(_read, Path(path))
    report = LcmImportReport(str(path), orphans=orphans)
    for conv in conversations:
        entry = LcmConversationReport(conv.conversation_id, conv.session_id, conv.session_key)
        entry.messages, entry.summaries = len(conv.messages), len(conv.summaries)
        report.conversations.append(entry)
        async with store.transaction() as conn:
            await _import_conversation(conn, store.counter, conv, entry)
    return report
