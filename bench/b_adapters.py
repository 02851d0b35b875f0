"""Adapters (#17): the same workload through our framework adapters and through each framework's own store.

For each pair, both stores get the same H-turn history through their public API, then T measured
turns, the two sides alternating turn by turn (A B, B A, ...) so load drift cancels in the ratio:

- OpenAI Agents SDK: ``OpenClawSession`` (raw items; lossless-claw compacting behind it) against
  ``SQLiteSession`` (file DB, its defaults): ``add_items`` of a turn's 2 items, then
  ``get_items(limit=K)`` (equal read size); and our ``assembled=True`` view (``get_items()``, the
  engine's budgeted context) against the same ``get_items(limit=K)``.
- Google ADK: ``OpenClawSessionService`` against ADK's ``SqliteSessionService`` (file DB): a turn's 2
  ``append_event`` calls, then ``get_session`` with ``num_recent_events=K`` (what a Runner reads when
  configured to bound it).

Our side does more per write: token counts, the FTS5 index, context items, the engine's turn commit
and compaction when due, on a backend thread (the hop is part of the figure). Ratios are ours /
theirs in ms (below 1: we are faster).
"""

from __future__ import annotations

import logging
import time
import warnings
from collections.abc import Awaitable, Callable
from typing import Any

from bench.core import BenchContext, PeerMissing, Row, Size, Stat, pick, run_async

NAME = "adapters"
TITLE = "Adapters: OpenClawSession vs SQLiteSession, OpenClawSessionService vs ADK SqliteSessionService"
APP, USER, SID = "bench", "user", "bench-session"


def _require() -> None:
    try:
        import agents  # noqa: F401
        import google.adk.sessions  # noqa: F401
    except ImportError as exc:
        raise PeerMissing(f"{exc.name} not installed (pip install -e .[bench])") from exc
    logging.getLogger("google_adk").setLevel(logging.ERROR)
    warnings.filterwarnings("ignore", category=UserWarning)


def _turn(n: int) -> list[dict[str, Any]]:
    words = " ".join(f"token{n}-{k}" for k in range(40))
    return [
        {"role": "user", "content": f"Turn {n}: please look at module m{n % 13}. {words}"},
        {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": f"Done {n}. {words}"}]},
    ]


async def _alternate(sides: list[Callable[[int], Awaitable[Any]]], turns: range) -> list[list[float]]:
    """Seconds per side per turn, the sides' order rotating every turn."""
    out: list[list[float]] = [[] for _ in sides]
    for i, n in enumerate(turns):
        order = list(range(len(sides)))
        order = order[i % len(order) :] + order[: i % len(order)]
        for k in order:
            start = time.perf_counter()
            await sides[k](n)
            out[k].append(time.perf_counter() - start)
    return out


def _row(metric: str, ours: list[float], theirs: list[float], baseline: str, note: str = "") -> Row:
    return Row(NAME, metric, "ms", Stat.of(ours).scaled(1000), False, Stat.of(theirs).scaled(1000), baseline,
               layer="integrations", note=note)  # fmt: skip


async def _openai(ctx: BenchContext, history: int, turns: int, k: int) -> list[Row]:
    from agents import SQLiteSession

    from openclaw_ctx.integrations.openai_agents import OpenClawSession

    ours = OpenClawSession(SID, ctx.path("adapters-oai-ours.db"))
    view = OpenClawSession(SID, ours.db_path, assembled=True)
    theirs = SQLiteSession(SID, ctx.path("adapters-oai-theirs.db"))
    try:
        ctx.log(f"adapters: {history} turns of history into both OpenAI stores")
        for n in range(history):
            await ours.add_items(_turn(n))  # type: ignore[arg-type]
            await theirs.add_items(_turn(n))  # type: ignore[arg-type]
        done = range(history, history + turns)
        add = await _alternate([lambda n: ours.add_items(_turn(n)), lambda n: theirs.add_items(_turn(n))], done)
        read = await _alternate([lambda _n: ours.get_items(limit=k), lambda _n: theirs.get_items(limit=k)], done)
        seen = await _alternate([lambda _n: view.get_items(), lambda _n: theirs.get_items(limit=k)], done)
    finally:
        view.close()
        ours.close()
        theirs.close()
    name = "OpenAI SQLiteSession"
    return [
        _row(f"add_items of a 2-item turn after {history} turns", *add, f"{name} add_items"),
        _row(f"get_items(limit={k}) after {history} turns", *read, f"{name} get_items(limit={k})"),
        _row(
            f"the assembled view (budgeted, summaries) after {history} turns",
            *seen,
            f"{name} get_items(limit={k})",
            "ours reads the engine's whole view, theirs K raw items",
        ),  # fmt: skip
    ]


async def _adk(ctx: BenchContext, history: int, turns: int, k: int) -> list[Row]:
    from google.adk.events import Event
    from google.adk.sessions.base_session_service import GetSessionConfig
    from google.adk.sessions.sqlite_session_service import SqliteSessionService
    from google.genai import types

    from openclaw_ctx.integrations.adk import OpenClawSessionService

    def event(n: int, i: int) -> Event:
        item = _turn(n)[i]
        text = item["content"] if i == 0 else item["content"][0]["text"]
        role = "user" if i == 0 else "model"
        return Event(author="user" if i == 0 else "agent", invocation_id=f"inv{n}",
                     content=types.Content(role=role, parts=[types.Part(text=text)]))  # fmt: skip

    ours = OpenClawSessionService(ctx.path("adapters-adk-ours.db"))
    theirs = SqliteSessionService(str(ctx.path("adapters-adk-theirs.db")))
    sessions = {id(s): await s.create_session(app_name=APP, user_id=USER, session_id=SID) for s in (ours, theirs)}

    def appender(service: Any) -> Callable[[int], Awaitable[None]]:
        async def append(n: int) -> None:
            for i in (0, 1):
                await service.append_event(sessions[id(service)], event(n, i))

        return append

    config = GetSessionConfig(num_recent_events=k)

    def reader(service: Any) -> Callable[[int], Awaitable[Any]]:
        return lambda _n: service.get_session(app_name=APP, user_id=USER, session_id=SID, config=config)

    try:
        ctx.log(f"adapters: {history} turns of history into both ADK stores")
        for n in range(history):
            await appender(ours)(n)
            await appender(theirs)(n)
        done = range(history, history + turns)
        add = await _alternate([appender(ours), appender(theirs)], done)
        read = await _alternate([reader(ours), reader(theirs)], done)
    finally:
        await ours.close()
        await theirs.close()
    name = "ADK SqliteSessionService"
    return [
        _row(f"append_event ×2 (a turn) after {history} turns", *add, f"{name} append_event ×2"),
        _row(
            f"get_session(num_recent_events={k}) after {history} turns",
            *read,
            f"{name} get_session(num_recent_events={k})",
        ),  # fmt: skip
    ]


def run(size: Size, ctx: BenchContext) -> list[Row]:
    """Both pairs at the size's history length."""
    _require()
    history, turns, k = pick(size, (20, 10, 10), (300, 40, 50), (2_000, 100, 100))
    rows: list[Row] = run_async(_openai(ctx, history, turns, k))
    rows += run_async(_adk(ctx, history, turns, k))
    return rows
