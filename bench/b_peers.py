"""Peers (issue 7 item 6): our store against the OpenAI Agents SDK and Google ADK session stores.

Same conversation for everyone (:func:`bench.data.conversation`, seed 11), converted to each peer's
own item shape (:func:`bench.data.openai_items`, :func:`bench.data.adk_parts`), at N = 10k and 100k
stored messages (full size). Every store starts from its cached N-message history, copied fresh:

- ours: the lossless-claw history of :mod:`bench.history` (compacted once to fit 128k);
- OpenAI Agents SDK ``SQLiteSession`` (file DB), filled with ``add_items`` 1,000 messages at a time;
- Google ADK ``DatabaseSessionService`` over ``sqlite+aiosqlite``; filled by writing ADK's own
  ``StorageEvent.from_event`` rows in bulk (``append_event`` one by one costs ~2 ms per event here,
  which would make the 100k fill take minutes; the measured appends below use the real API).

Then T turns on each store, the stores' order rotating every turn (load drift cancels in ratios):

- **ingest** a turn's 4 new messages: ours ``repo.append_messages`` in one ``store.transaction()``
  (it also counts tokens, indexes FTS5 and appends context items; the session row is looked up
  before the clock starts, as the host holds it for the whole turn); OpenAI ``add_items`` of the turn's items;
  ADK ``append_event`` per message (its API has no batch);
- **what the model sees next turn**: ours host context load + ``engine.assemble`` within 128k;
  OpenAI ``get_items()`` (the Runner's default: every item); ADK ``get_session()`` (the Runner's
  call: every event). Theirs grows with history; ours is bounded by the budget. A second row reads
  our *whole* uncompacted history (``repo.load_context`` of all N) to compare equal work.

Ratios are ours / theirs in ms (below 1 = we are faster); target: faster than each, at each size.
"""

from __future__ import annotations

import asyncio
import logging
import shutil
import time
import warnings
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from bench import data, history
from bench.core import BenchContext, PeerMissing, Row, Size, Stat, Target, pick
from openclaw_ctx.context import pipeline_messages
from openclaw_ctx.contract import AssembleParams
from openclaw_ctx.messages import parse_message
from openclaw_ctx.store import repo
from openclaw_ctx.store.store import Store

NAME = "peers"
TITLE = "Peers: OpenAI Agents SQLiteSession and Google ADK DatabaseSessionService"
BUILD_VERSION = 1
APP, USER, SID = "bench", "user", "bench-session"
# ADK's get_session validates every stored event (seconds at 100k): read it on this many turns there.
ADK_READS = 5


def _require() -> None:
    try:
        import agents  # noqa: F401
        import google.adk.sessions  # noqa: F401
    except ImportError as exc:
        raise PeerMissing(f"{exc.name} not installed (pip install -e .[bench])") from exc
    logging.getLogger("google_adk").setLevel(logging.ERROR)
    logging.getLogger("google").setLevel(logging.ERROR)
    warnings.filterwarnings("ignore", module="google.*")
    warnings.filterwarnings("ignore", category=UserWarning)


def _adk_event(msg: dict[str, Any]) -> Any:
    from google.adk.events import Event
    from google.genai import types

    author, role, parts = data.adk_parts(msg)
    return Event(
        author=author,
        invocation_id="bench",
        content=types.Content(role=role, parts=[types.Part.model_validate(p) for p in parts]),
    )


async def _build_oai(path: Path, n: int) -> None:
    from agents import SQLiteSession

    session = SQLiteSession(SID, path)
    wire = data.conversation(n, seed=history.SEED)
    for start in range(0, n, 1000):
        await session.add_items([item for m in wire[start : start + 1000] for item in data.openai_items(m)])
    session.close()


async def _build_adk(path: Path, n: int) -> None:
    from google.adk.sessions import DatabaseSessionService

    service = DatabaseSessionService(db_url=f"sqlite+aiosqlite:///{path}")
    try:
        session = await service.create_session(app_name=APP, user_id=USER, session_id=SID)
        schema = service._get_schema_classes()
        wire = data.conversation(n, seed=history.SEED)
        for start in range(0, n, 2000):
            rows = [schema.StorageEvent.from_event(session, _adk_event(m)) for m in wire[start : start + 2000]]
            async with service.database_session_factory() as sql:
                sql.add_all(rows)
                await sql.commit()
    finally:
        await service.close()


def _cached(ctx: BenchContext, name: str, n: int, build: Callable[[Path, int], Awaitable[None]], copy_as: str) -> Path:
    cache = ctx.cache_dir or ctx.workdir
    cached = cache / f"peers-{name}-{n}-v{BUILD_VERSION}.db"
    if not cached.exists():
        building = cached.with_name(cached.name + ".building")
        for suffix in ("", "-wal", "-shm", "-journal"):
            Path(f"{building}{suffix}").unlink(missing_ok=True)
        ctx.log(f"peers: building the {name} store with {n:,} messages")
        asyncio.run(build(building, n))
        building.replace(cached)
    target = ctx.path(copy_as)
    shutil.copyfile(cached, target)
    return target


async def _measure(paths: dict[str, Path], n: int, turns: int, warmup: int) -> dict[str, list[float]]:
    from agents import SQLiteSession
    from google.adk.sessions import DatabaseSessionService

    store = await Store.open(paths["ours"])
    full_store = await Store.open(paths["ours_full"])
    engine = history.engine_for(store, "lossless-claw")
    oai = SQLiteSession(SID, paths["oai"])
    adk = DatabaseSessionService(db_url=f"sqlite+aiosqlite:///{paths['adk']}")
    adk_session = await adk.get_session(app_name=APP, user_id=USER, session_id=SID)
    assert adk_session is not None
    key = history.SESSION_KEY
    out: dict[str, list[float]] = {
        k: []
        for k in ("ours_ingest", "oai_ingest", "adk_ingest", "ours_read", "oai_read", "adk_read", "ours_full", "n_oai")
    }
    batches = history.next_turns(n, turns + warmup)

    async def ours(t: int, batch: list[dict[str, Any]]) -> tuple[float, float]:
        items = [repo.NewMessage(parse_message(m), entry_id=f"peer-{n}-{t}-{i}") for i, m in enumerate(batch)]
        # The host holds the turn's session row (looked up once per turn, like the peers' session
        # objects hold their ids); the store call that ingests is append_messages.
        async with store.read() as conn:
            session = await repo.active_session(conn, key)
        assert session is not None
        start = time.perf_counter()
        async with store.transaction() as conn:
            await repo.append_messages(conn, session, items, store.counter)
        ingested = time.perf_counter()
        async with store.read() as conn:
            entries = await repo.load_context(conn, session.session_id)
        messages = pipeline_messages(entries)
        await engine.assemble(
            AssembleParams(
                session_id=session.session_id, session_key=key, messages=messages, token_budget=history.BUDGET
            )
        )
        return ingested - start, time.perf_counter() - ingested

    async def openai(t: int, batch: list[dict[str, Any]]) -> tuple[float, float]:
        items = [item for m in batch for item in data.openai_items(m)]
        start = time.perf_counter()
        await oai.add_items(items)
        ingested = time.perf_counter()
        got = await oai.get_items()
        out["n_oai"].append(float(len(got)))
        return ingested - start, time.perf_counter() - ingested

    async def google(t: int, batch: list[dict[str, Any]]) -> tuple[float, float]:
        nonlocal adk_session
        events = [_adk_event(m) for m in batch]
        start = time.perf_counter()
        for event in events:
            await adk.append_event(adk_session, event)
        ingested = time.perf_counter()
        if t >= warmup + ADK_READS and n >= 50_000:
            return ingested - start, float("nan")  # enough samples of a multi-second read
        fetched = await adk.get_session(app_name=APP, user_id=USER, session_id=SID)
        assert fetched is not None
        adk_session = fetched  # the Runner continues from the session it fetched
        return ingested - start, time.perf_counter() - ingested

    async def full_read() -> float:
        async with full_store.read() as conn:
            session = await repo.active_session(conn, key)
            assert session is not None
            start = time.perf_counter()
            entries = await repo.load_context(conn, session.session_id)
        pipeline_messages(entries)
        return time.perf_counter() - start

    sides = [("ours", ours), ("oai", openai), ("adk", google)]
    try:
        for t, batch in enumerate(batches):
            order = sides[t % 3 :] + sides[: t % 3]
            for name, fn in order:
                ingest_s, read_s = await fn(t, batch)
                if t >= warmup:
                    out[f"{name}_ingest"].append(ingest_s)
                    if read_s == read_s:  # not NaN
                        out[f"{name}_read"].append(read_s)
            if t >= warmup and (t - warmup) % max(1, turns // 5) == 0:
                out["ours_full"].append(await full_read())
    finally:
        oai.close()
        await adk.close()
        await store.close()
        await full_store.close()
    return out


def run(size: Size, ctx: BenchContext) -> list[Row]:
    """Run the peers benchmark at `size` (skipped without the bench extra)."""
    _require()
    sizes: tuple[int, ...] = pick(size, (300, 1000), (1000, 10_000), (10_000, 100_000))
    turns = pick(size, 5, 20, 30)
    rows: list[Row] = []
    for n in sizes:
        paths = {
            "ours": history.history(ctx, n, "lossless-claw", copy_as=f"peers-ours-{n}.db").path,
            "ours_full": history.history(ctx, n, "raw", copy_as=f"peers-ours-full-{n}.db").path,
            "oai": _cached(ctx, "oai", n, _build_oai, f"peers-oai-{n}.db"),
            "adk": _cached(ctx, "adk", n, _build_adk, f"peers-adk-{n}.db"),
        }
        ctx.log(f"peers: {turns} turns on {n:,}-message histories")
        got = asyncio.run(_measure(paths, n, turns, warmup=2))
        s = {k: Stat.of(v).scaled(1000) for k, v in got.items() if v and k != "n_oai"}
        extra = {"history": n, "turns": turns, "openai_items": int(Stat.of(got["n_oai"]).median)}
        for peer, label in (("oai", "OpenAI SQLiteSession"), ("adk", "ADK DatabaseSessionService")):
            api = "add_items" if peer == "oai" else "append_event ×4"
            read = "get_items()" if peer == "oai" else "get_session()"
            rows.append(
                Row(
                    NAME,
                    f"ingest a 4-message turn at {n:,} msgs, vs {label}",
                    "ms",
                    s["ours_ingest"],
                    False,
                    s[f"{peer}_ingest"],
                    f"{label} {api}",
                    Target("ratio", "<=", 1.0),
                    layer="repo.append_messages (+ token counts, FTS5, context items)",
                    extra=extra,
                )
            )
            rows.append(
                Row(
                    NAME,
                    f"what the model sees next turn at {n:,} msgs, vs {label}",
                    "ms",
                    s["ours_read"],
                    False,
                    s[f"{peer}_read"],
                    f"{label} {read}",
                    Target("ratio", "<=", 1.0),
                    layer="load_context + lossless assemble (≤128k)",
                    note="theirs returns the whole history",
                    extra=extra,
                )
            )
            rows.append(
                Row(
                    NAME,
                    f"read the whole {n:,}-msg history (equal work), vs {label}",
                    "ms",
                    s["ours_full"],
                    False,
                    s[f"{peer}_read"],
                    f"{label} {read}",
                    layer="repo.load_context of every message (uncompacted)",
                    extra=extra,
                )
            )
    return rows
