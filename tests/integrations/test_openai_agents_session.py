"""OpenClawSession on a real SQLite file: exact items, recall, compaction, no destruction, concurrency (#17)."""

from __future__ import annotations

import asyncio
import json
import sqlite3
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("agents")

from fault_kit import cli  # noqa: E402

from openclaw_ctx.config import OpenClawConfig  # noqa: E402
from openclaw_ctx.integrations.openai_agents import OpenClawSession  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]

ITEMS: list[dict[str, Any]] = [
    {"role": "user", "content": "Deploy to the staging cluster kestrel-7 tonight"},
    {"role": "user", "content": [{"type": "input_text", "text": "also rotate the 🔑 for 東京 region"}]},
    {"type": "reasoning", "id": "rs_1", "summary": [{"type": "summary_text", "text": "planning the rollout"}]},
    {"type": "function_call", "id": "fc_1", "call_id": "call_1", "name": "deploy", "arguments": '{"env": "staging"}'},
    {"type": "function_call_output", "call_id": "call_1", "output": "deployed build 20261207.3 to kestrel-7"},
    {
        "type": "message",
        "id": "msg_1",
        "role": "assistant",
        "status": "completed",
        "content": [{"type": "output_text", "text": "Done: kestrel-7 runs 20261207.3", "annotations": []}],
    },
    {"type": "web_search_call", "id": "ws_1", "status": "completed", "action": {"type": "search", "query": "x"}},
    {"type": "function_call", "call_id": "call_2", "name": "odd", "arguments": "not json {"},
    {"role": "system", "content": "Be brief."},
    {"type": "item_reference", "id": "msg_0"},
    {"role": "user", "content": "nested \u0000 nul, a float 1.5e300, a lone \ud800 surrogate", "n": [1, 2.5, None]},
]


def sql(db: Path, query: str) -> list[tuple[Any, ...]]:
    with sqlite3.connect(db) as conn:
        return conn.execute(query).fetchall()


async def test_every_item_comes_back_exactly_and_is_searchable(tmp_path: Path) -> None:
    db = tmp_path / "agent.db"
    session = OpenClawSession("user-1", db)
    try:
        await session.add_items(ITEMS[:6])
        await session.add_items(ITEMS[6:])
        assert await session.get_items() == ITEMS
        assert await session.get_items(limit=3) == ITEMS[-3:]
        assert await session.get_items(limit=0) == []
    finally:
        session.close()
    reopened = OpenClawSession("user-1", db)
    try:
        assert json.dumps(await reopened.get_items()) == json.dumps(ITEMS), "a fresh process view differs"
    finally:
        reopened.close()
    assert sql(db, "SELECT count(*) FROM messages WHERE session_key = 'user-1'") == [(len(ITEMS),)]
    roles = [r for (r,) in sql(db, "SELECT role FROM messages ORDER BY seq")]
    assert roles[:6] == ["user", "user", "assistant", "assistant", "toolResult", "assistant"]
    found = cli(db, "grep", "kestrel", "--key", "user-1", "--json")
    assert found.returncode == 0, found.stderr
    hits = json.loads(found.stdout)["hits"]
    assert len(hits) >= 3, hits
    assert cli(db, "doctor", "--deep").returncode == 0


async def test_a_bad_item_is_a_type_error_and_stores_nothing(tmp_path: Path) -> None:
    session = OpenClawSession("user-1", tmp_path / "agent.db")
    try:
        await session.add_items([{"role": "user", "content": "kept"}])
        with pytest.raises(TypeError, match="JSON-serialisable"):
            await session.add_items([{"role": "user", "content": "fine"}, {"role": "user", "content": object()}])
        with pytest.raises(TypeError, match="must be a dict"):
            await session.add_items(["just a string"])  # type: ignore[list-item]
        assert await session.get_items() == [{"role": "user", "content": "kept"}]
    finally:
        session.close()


async def test_pop_and_clear_keep_every_item_in_the_store(tmp_path: Path) -> None:
    db = tmp_path / "agent.db"
    session = OpenClawSession("user-1", db)
    try:
        await session.add_items(ITEMS[:5])
        assert await session.pop_item() == ITEMS[4]
        assert await session.get_items() == ITEMS[:4]
        await session.clear_session()
        assert await session.get_items() == []
        assert await session.pop_item() is None
        await session.add_items([{"role": "user", "content": "after the clear"}])
        assert await session.get_items() == [{"role": "user", "content": "after the clear"}]
    finally:
        session.close()
    assert sql(db, "SELECT count(*), sum(on_active_branch = 0) FROM messages") == [(6, 1)]
    assert sorted(sql(db, "SELECT status FROM sessions")) == [("active",), ("archived",)]
    found = cli(db, "grep", "deployed build", "--key", "user-1", "--json")
    assert json.loads(found.stdout)["hits"], "a popped item is still found by recall"
    assert cli(db, "doctor", "--deep").returncode == 0


@pytest.mark.parametrize("engine", ["lossless-claw", "legacy"])
async def test_the_assembled_view_stays_in_the_window_and_the_raw_one_keeps_everything(
    tmp_path: Path, engine: str
) -> None:
    db = tmp_path / "agent.db"
    view = OpenClawSession("user-1", db, engine=engine, assembled=True, context_window=6_000)
    raw = OpenClawSession("user-1", db, engine=engine)
    turns = [
        [
            {"role": "user", "content": f"Step {n}: " + " ".join(f"fact{n}-{k} of m{n % 7}" for k in range(30))},
            {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": f"ok {n}"}]},
        ]
        for n in range(60)
    ]
    try:
        for turn in turns:
            await view.add_items(turn)  # type: ignore[arg-type]
        items = await view.get_items()
        assert await view.get_items(limit=len(items) + 5) == items
        assert await view.get_items(limit=2) == items[-2:]
        everything = await raw.get_items()
    finally:
        view.close()
        raw.close()
    assert everything == [item for turn in turns for item in turn]
    added = [json.dumps(i, sort_keys=True) for turn in turns for i in turn]
    written = [item for item in items if json.dumps(item, sort_keys=True) not in added]
    assert written, "no summary in the assembled view"
    assert items[-1] == turns[-1][-1], "the newest item is in the view verbatim"
    assert len(items) < len(everything)
    (tokens,) = sql(db, "SELECT sum(token_count) FROM active_context")[0]
    assert tokens <= 6_000
    (summaries,) = sql(db, "SELECT count(*) FROM summaries")[0]
    assert summaries >= 1
    assert cli(db, "doctor", "--deep").returncode == 0


async def test_a_cancelled_write_finishes_before_the_cancellation_is_raised(tmp_path: Path) -> None:
    session = OpenClawSession("user-1", tmp_path / "agent.db")
    try:
        for operation in ("add", "pop", "clear"):
            await session.add_items([{"role": "user", "content": "before"}])
            if operation == "add":
                task = asyncio.ensure_future(session.add_items([{"role": "user", "content": "once"}]))
            elif operation == "pop":
                task = asyncio.ensure_future(session.pop_item())
            else:
                task = asyncio.ensure_future(session.clear_session())
            await asyncio.sleep(0)
            task.cancel()
            await asyncio.sleep(0)
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task
            expected = {"add": [{"role": "user", "content": "before"}, {"role": "user", "content": "once"}]}
            assert await session.get_items() == expected.get(operation, []), operation
            await session.clear_session()
    finally:
        session.close()


async def test_a_closed_session_refuses_and_leaves_the_others_open(tmp_path: Path) -> None:
    db = tmp_path / "agent.db"
    first, second = OpenClawSession("a", db), OpenClawSession("b", db)
    first.close()
    for call in (first.get_items(), first.add_items([{"role": "user", "content": "x"}]), first.pop_item()):
        with pytest.raises(RuntimeError, match="is closed"):
            await call
    with pytest.raises(RuntimeError, match="is closed"):
        await first.clear_session()
    first.close()  # closing twice is harmless
    await second.add_items([{"role": "user", "content": "still open"}])
    assert await second.get_items() == [{"role": "user", "content": "still open"}]
    second.close()


def test_threads_each_with_their_own_loop_open_one_fresh_file_at_once(tmp_path: Path) -> None:
    db = tmp_path / "fresh.db"
    start = threading.Barrier(8)
    errors: list[BaseException] = []

    def worker(n: int) -> None:
        async def run() -> None:
            # Two threads on each key; the odd ones with a config of their own get a Store of their own.
            session = OpenClawSession(f"thread-{n % 4}", db, config=OpenClawConfig() if n % 2 else None)
            try:
                for i in range(10):
                    await session.add_items([{"role": "user", "content": f"t{n} item {i}"}])
            finally:
                session.close()

        try:
            start.wait()
            asyncio.run(run())
        except BaseException as exc:  # reported below, with the thread's number
            errors.append(exc)

    threads = [threading.Thread(target=worker, args=(n,)) for n in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    assert not errors, errors
    assert sql(db, "SELECT count(*), count(DISTINCT text) FROM messages") == [(80, 80)]
    assert sql(db, "SELECT count(DISTINCT session_key), max(seq) FROM messages") == [(4, 20)]


def test_processes_open_one_fresh_file_at_once(tmp_path: Path) -> None:
    db = tmp_path / "fresh.db"
    script = (
        "import asyncio, sys\n"
        "from openclaw_ctx.integrations.openai_agents import OpenClawSession\n"
        "async def main(n):\n"
        "    s = OpenClawSession(f'proc-{n % 2}', sys.argv[1])\n"
        "    for i in range(20):\n"
        "        await s.add_items([{'role': 'user', 'content': f'p{n} item {i}'}])\n"
        "    s.close()\n"
        "asyncio.run(main(int(sys.argv[2])))\n"
    )
    procs = [
        subprocess.Popen([sys.executable, "-c", script, str(db), str(n)], stderr=subprocess.PIPE, text=True)
        for n in range(4)
    ]
    errors = [p.communicate(timeout=180)[1] for p in procs]
    assert [p.returncode for p in procs] == [0] * 4, errors
    assert sql(db, "SELECT count(*), count(DISTINCT text), count(DISTINCT session_key) FROM messages") == [(80, 80, 2)]


@pytest.mark.slow
def test_the_runner_example_remembers_across_processes(tmp_path: Path) -> None:
    db = tmp_path / "agent.db"
    example = ROOT / "examples" / "openai_agents_memory.py"

    def run(prompt: str) -> str:
        done = subprocess.run(
            [sys.executable, str(example), str(db), prompt], capture_output=True, text=True, timeout=120, check=False
        )
        assert done.returncode == 0, done.stderr
        return done.stdout

    first = run("My locker code is 4417.")
    assert "sent 1 items" in first
    second = run("What is my locker code?")
    assert "sent 3 items" in second and "user: My locker code is 4417." in second
    found = cli(db, "grep", "4417", "--key", "user-42", "--json")
    assert found.returncode == 0, found.stderr
    assert {hit["role"] for hit in json.loads(found.stdout)["hits"]} >= {"user"}
