"""Import and export of OpenClaw transcripts and agent directories, through the real store and CLI."""

from __future__ import annotations

import asyncio
import json
import shutil
import sqlite3
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fixtures.make_agent_dir import AgentDir, build_agent_dir
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner, Result

import openclaw_ctx.cli.app as cli
from examples.make_example import OUTPUT as EXAMPLE
from openclaw_ctx.messages import UserMessage, flatten_text
from openclaw_ctx.store import repo
from openclaw_ctx.store.store import Store
from openclaw_ctx.transcripts import Entry, ImportProgress, export_session, import_paths, read_transcript

MESSAGE_LIKE = ("message", "custom_message", "branch_summary")


def snapshot(db: Path) -> dict[str, Any]:
    """Everything an import writes, without file paths and wall-clock columns."""
    con = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    try:

        def q(sql: str) -> list[tuple[Any, ...]]:
            return con.execute(sql).fetchall()

        return {
            "sessions": sorted(q("SELECT session_id, session_key, parent_session_id, status, cwd FROM sessions")),
            "messages": sorted(
                q(
                    "SELECT session_key, entry_id, session_id, parent_entry_id, role, message_json, token_count,"
                    " on_active_branch, seq FROM messages"
                )
            ),
            "summaries": sorted(
                q(
                    "SELECT summary_id, session_key, session_id, kind, content, token_count, descendant_count,"
                    " descendant_token_count, summarizer, details_json, earliest_at, latest_at FROM summaries"
                )
            ),
            "summary_messages": sorted(
                q(
                    "SELECT sm.summary_id, sm.ordinal, m.entry_id"
                    " FROM summary_messages sm JOIN messages m USING (message_id)"
                )
            ),
            "summary_parents": sorted(q("SELECT summary_id, source_summary_id, ordinal FROM summary_parents")),
            "context": sorted(
                q(
                    "SELECT ci.session_id, ci.ordinal, ci.item_type, m.entry_id, ci.summary_id, ci.token_count"
                    " FROM context_items ci LEFT JOIN messages m ON m.message_id = ci.message_id"
                )
            ),
            "entries": q(
                "SELECT session_id, entry_id, parent_entry_id, entry_type, raw_json, on_active_branch"
                " FROM transcript_entries WHERE entry_type != 'malformed' ORDER BY session_id, line_no"
            ),
            "compactions": sorted(
                q(
                    "SELECT session_key, before_session_id, tokens_before, summary_id, first_kept_entry_id"
                    " FROM compactions"
                )
            ),
        }
    finally:
        con.close()


def flat(text: str) -> str:
    """Output with Rich's line wrapping undone."""
    return " ".join(text.split())


def invoke(*args: str) -> Result:
    if not any(c.name == "import" for c in cli.app.registered_commands):
        cli._load_commands()
    return CliRunner().invoke(cli.app, list(args))


def message_like_ids(entries: list[Entry]) -> list[str]:
    return [
        e.id for e in entries if e.type in MESSAGE_LIKE and not (e.type == "branch_summary" and not e.raw["summary"])
    ]


async def context_texts(store: Store, session_id: str) -> list[str]:
    async with store.read() as conn:
        items = await repo.load_context(conn, session_id)
    return [flatten_text(i.message) if i.kind == "message" else i.summary.content for i in items]


@pytest.fixture
def agent_dir(tmp_path: Path) -> AgentDir:
    return build_agent_dir(tmp_path / "state")


# --- agent directories -----------------------------------------------------------------------------


async def test_agent_dir_imports_keys_chains_branches_and_context(store: Store, agent_dir: AgentDir) -> None:
    report = await import_paths(store, [agent_dir.root])
    assert report.clean, report.skipped
    assert len(report.files) == len(agent_dir.files)
    async with store.read() as conn:
        for key, chain in agent_dir.chains.items():
            rows = await repo.session_chain(conn, key)
            assert [r.session_id for r in rows] == chain
            assert [r.parent_session_id for r in rows] == [None, *chain[:-1]]
            assert [r.status for r in rows] == ["rotated"] * (len(chain) - 1) + ["active"]
        for orphan in agent_dir.orphans:
            assert (await repo.get_session(conn, orphan)).session_key == f"file:{orphan}"
    con = sqlite3.connect(store.path)
    for key, chain in [*agent_dir.chains.items(), *((f"file:{o}", [o]) for o in agent_dir.orphans)]:
        expected_flags: dict[str, int] = {}
        for session_id in chain:
            t = read_transcript(agent_dir.files[session_id])
            active = {e.id for e in t.active_branch()}
            for entry_id in message_like_ids(t.entries):
                expected_flags.setdefault(entry_id, int(entry_id in active))
            assert await context_texts(store, session_id) == [flatten_text(m) for m in t.context_messages()]
            stored = con.execute("SELECT count(*) FROM transcript_entries WHERE session_id = ?", (session_id,))
            assert stored.fetchone()[0] == len(t.entries)
        rows = con.execute("SELECT entry_id, on_active_branch FROM messages WHERE session_key = ?", (key,))
        assert dict(rows.fetchall()) == expected_flags
    assert 0 in {flag for (flag,) in con.execute("SELECT on_active_branch FROM messages")}


async def test_compactions_become_a_chain_of_legacy_summaries_covering_the_replaced_messages(
    store: Store, agent_dir: AgentDir
) -> None:
    await import_paths(store, [agent_dir.root])
    con = sqlite3.connect(store.path)
    edges: dict[str, set[str]] = {}
    for summary_id, entry_id in con.execute(
        "SELECT sm.summary_id, m.entry_id FROM summary_messages sm JOIN messages m USING (message_id)"
    ):
        edges.setdefault(summary_id, set()).add(entry_id)
    parents = dict(con.execute("SELECT summary_id, source_summary_id FROM summary_parents").fetchall())

    def covered(summary_id: str | None) -> set[str]:
        return set() if summary_id is None else edges.get(summary_id, set()) | covered(parents.get(summary_id))

    by_entry = {
        json.loads(d)["compactionEntryId"]: s
        for s, d in con.execute("SELECT summary_id, details_json FROM summaries WHERE kind = 'legacy'")
    }
    compaction_ids: set[str] = set()
    for session_id, path in agent_dir.files.items():
        t = read_transcript(path)
        branch = t.active_branch()
        ids = [e.id for e in branch]
        for entry in branch:
            if entry.type != "compaction":
                continue
            compaction_ids.add(entry.id)
            if entry.raw["firstKeptEntryId"] not in ids:  # a later rotation dropped it; checked in an earlier file
                continue
            replaced = set(message_like_ids(branch[: ids.index(entry.raw["firstKeptEntryId"])]))
            assert replaced <= covered(by_entry[entry.id]), session_id
    assert set(by_entry) == compaction_ids
    main_chain = agent_dir.chains["agent:main:main"]
    summaries = con.execute(
        "SELECT summary_id FROM summaries WHERE session_key = 'agent:main:main' ORDER BY earliest_at"
    ).fetchall()
    assert len(summaries) == len(main_chain)
    assert len(parents) >= len(main_chain) - 1
    kinds = {k for (k,) in con.execute("SELECT DISTINCT summarizer FROM summaries")}
    assert kinds == {"openclaw-import"}


async def test_reimport_adds_nothing(store: Store, agent_dir: AgentDir) -> None:
    await import_paths(store, [agent_dir.root])
    before = snapshot(Path(store.path))
    again = await import_paths(store, [agent_dir.root, *agent_dir.files.values()])
    assert again.total("messages_new") == again.total("entries_new") == again.total("summaries_new") == 0
    assert again.total("messages_duplicate") > 0
    assert snapshot(Path(store.path)) == before


async def test_export_then_import_into_an_empty_db_reproduces_everything(
    store: Store, agent_dir: AgentDir, tmp_path: Path
) -> None:
    await import_paths(store, [agent_dir.root])
    out = tmp_path / "exported"
    keys = [*agent_dir.chains, *(f"file:{o}" for o in agent_dir.orphans)]
    for key in keys:
        report = await export_session(store, session_key=key, out=out)
        assert [f.session_id for f in report.files] == agent_dir.chains.get(key, [key[5:]])
    for session_id, original in agent_dir.files.items():
        exported = read_transcript(next(out.glob(f"*{session_id}.jsonl")))
        assert [e.to_json() for e in exported.entries] == [e.to_json() for e in read_transcript(original).entries]
    listing = json.loads((out / "sessions.json").read_text(encoding="utf-8"))
    # A bare transcript's `file:` key is ours: OpenClaw's listing never gets one, and re-import derives it again.
    assert set(listing) == set(agent_dir.chains)
    second = await Store.open(tmp_path / "second.db")
    try:
        report = await import_paths(second, [out])
        assert report.clean, report.skipped
    finally:
        await second.close()
    assert snapshot(tmp_path / "second.db") == snapshot(Path(store.path))


async def test_successor_header_names_the_exported_parent(store: Store, agent_dir: AgentDir, tmp_path: Path) -> None:
    await import_paths(store, [agent_dir.root])
    report = await export_session(store, session_key="agent:main:main", out=tmp_path / "x")
    headers = [read_transcript(f.path).header for f in report.files]
    assert headers[0] is not None and headers[0].parent_session is None
    for previous, header in zip(report.files, headers[1:], strict=False):
        assert header is not None and header.parent_session == previous.path


async def test_malformed_lines_are_reported_kept_verbatim_and_the_rest_imports(store: Store, tmp_path: Path) -> None:
    dirty = build_agent_dir(tmp_path / "dirty", malformed=True)
    report = await import_paths(store, [dirty.root])
    assert not report.clean
    for path, line_no in dirty.malformed:
        assert any(s.startswith(f"{path}:{line_no}: ") for s in report.skipped)
    lines = {(str(p), n): p.read_text(encoding="utf-8").splitlines()[n - 1] for p, n in dirty.malformed}
    con = sqlite3.connect(store.path)
    rows = con.execute(
        "SELECT source_file, line_no, raw_json, error FROM transcript_entries WHERE entry_type = 'malformed'"
    ).fetchall()
    assert {(f, n): raw for f, n, raw, _ in rows} == lines
    assert all(error for *_, error in rows)
    clean = build_agent_dir(tmp_path / "clean")  # same seed: the same entries without the bad lines
    second = await Store.open(tmp_path / "clean.db")
    try:
        await import_paths(second, [clean.root])
    finally:
        await second.close()
    key_counts = "SELECT session_key, count(*) FROM messages GROUP BY 1"
    assert con.execute(key_counts).fetchall() == sqlite3.connect(tmp_path / "clean.db").execute(key_counts).fetchall()
    again = await import_paths(store, [dirty.root])
    assert again.total("entries_new") == 0
    assert con.execute("SELECT count(*) FROM transcript_entries WHERE entry_type = 'malformed'").fetchone()[0] == 3


async def test_progress_covers_every_file_and_byte(store: Store, agent_dir: AgentDir) -> None:
    events: list[ImportProgress] = []
    await import_paths(store, [agent_dir.root], progress=events.append)
    total = sum(p.stat().st_size for p in agent_dir.files.values())
    assert events[-1].bytes_done == events[-1].bytes_total == total
    assert events[-1].files_done == events[-1].files_total == len(agent_dir.files)
    assert [e.bytes_done for e in events] == sorted(e.bytes_done for e in events)


async def test_bare_successor_file_continues_its_parents_key(store: Store, agent_dir: AgentDir) -> None:
    first, second, _ = agent_dir.chains["agent:main:main"]
    await import_paths(store, [agent_dir.files[first]])
    report = await import_paths(store, [agent_dir.files[second]])
    assert report.files[0].session_key == f"file:{first}"
    async with store.read() as conn:
        chain = await repo.session_chain(conn, f"file:{first}")
    assert [(s.session_id, s.status) for s in chain] == [(first, "rotated"), (second, "active")]


async def test_a_session_already_stored_under_another_key_is_refused(store: Store, agent_dir: AgentDir) -> None:
    telegram = agent_dir.chains["agent:main:telegram:42"][0]
    await import_paths(store, [agent_dir.files[telegram]])
    before = snapshot(Path(store.path))
    report = await import_paths(store, [agent_dir.root])
    failed = [f for f in report.files if f.error]
    assert [f.session_id for f in failed] == [None]
    assert "already stored under key 'file:" in (failed[0].error or "")
    assert any("file skipped" in s for s in report.skipped)
    async with store.read() as conn:
        assert (await repo.get_session(conn, telegram)).session_key == f"file:{telegram}"
    assert {s for s in snapshot(Path(store.path))["sessions"] if s[0] == telegram} == {
        s for s in before["sessions"] if s[0] == telegram
    }


# --- the example transcript and generated transcripts -------------------------------------------------


async def test_example_round_trips_byte_identically(store: Store, tmp_path: Path) -> None:
    report = await import_paths(store, [EXAMPLE])
    assert report.clean and report.total("messages_new") == len(message_like_ids(read_transcript(EXAMPLE).entries))
    session_id = report.files[0].session_id
    assert session_id is not None
    out = tmp_path / "again.jsonl"
    await export_session(store, session_id=session_id, out=out)
    assert out.read_bytes() == EXAMPLE.read_bytes()
    second = await Store.open(tmp_path / "second.db")
    try:
        await import_paths(second, [out])
    finally:
        await second.close()
    assert snapshot(tmp_path / "second.db") == snapshot(Path(store.path))


_TEXT = st.text(alphabet=st.characters(blacklist_categories=("Cs",)), max_size=30)
_OPS = st.sampled_from(
    ["user", "assistant", "tool", "custom", "custom_message", "label", "model", "compact", "branch", "summary", "other"]
)
_PNG = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR4nGP4z8DwHwAFAAH/iZk9HQAAAABJRU5ErkJggg=="


@st.composite
def transcript_lines(draw: st.DrawFn) -> list[dict[str, Any]]:
    """A random v3 tree: messages, metadata, compactions and branches."""
    entries: list[dict[str, Any]] = []
    parent: dict[str, str | None] = {}
    kinds: dict[str, str] = {}
    leaf: str | None = None
    for n in range(draw(st.integers(1, 24))):
        op = draw(_OPS)
        if op == "branch":
            leaf = draw(st.sampled_from([None, *parent]))
            continue
        branch, cur = [], leaf
        while cur is not None:
            branch.append(cur)
            cur = parent[cur]
        base: dict[str, Any] = {"id": f"{n:04x}{draw(st.integers(0, 0xFFFF)):04x}", "parentId": leaf}
        base["timestamp"] = f"2026-01-01T00:{n // 60:02d}:{n % 60:02d}.000Z"
        text = draw(_TEXT)
        if op in ("user", "assistant", "tool"):
            message: dict[str, Any] = {
                "user": draw(st.sampled_from([
                    {"role": "user", "content": text},
                    {"role": "user", "content": [{"type": "text", "text": text},
                                                 {"type": "image", "data": _PNG, "mimeType": "image/png"}]},
                ])),
                "assistant": {"role": "assistant", "content": [
                    {"type": "thinking", "thinking": text, "thinkingSignature": "sig"},
                    {"type": "text", "text": text},
                    {"type": "toolCall", "id": "c1", "name": "bash", "arguments": {"command": text, "n": n}},
                ], "stopReason": "toolUse", "usage": {"input": n, "output": 1, "totalTokens": n + 1}},
                "tool": {"role": "toolResult", "toolCallId": "c1", "toolName": "bash",
                         "content": [{"type": "text", "text": text}], "isError": draw(st.booleans())},
            }[op]  # fmt: skip
            entry = {"type": "message", **base, "message": message | {"timestamp": n}}
        elif op == "compact":
            kept = [b for b in branch if kinds[b] == "message"]
            if not kept:
                continue
            first = draw(st.sampled_from(kept))
            entry = {"type": "compaction", **base, "summary": text or "s", "firstKeptEntryId": first, "tokensBefore": n}
        elif op == "custom_message":
            entry = {"type": "custom_message", **base, "customType": "x", "content": text, "display": True}
        elif op == "label":
            entry = {"type": "label", **base, "targetId": leaf, "label": text}
        elif op == "model":
            entry = {"type": "model_change", **base, "provider": "p", "modelId": text}
        elif op == "summary":
            entry = {"type": "branch_summary", **base, "fromId": leaf, "summary": text}
        elif op == "other":
            entry = {"type": "session_info" if n % 2 else "brand_new_type", **base, "name": text}
        else:
            entry = {"type": "custom", **base, "customType": "state", "data": {"t": text}}
        entries.append(entry)
        parent[base["id"]], kinds[base["id"]], leaf = leaf, entry["type"], base["id"]
    return entries


@pytest.fixture(scope="module")
def empty_db() -> Iterator[Path]:
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "template.db"

        async def make() -> None:
            await (await Store.open(path)).close()

        asyncio.run(make())
        yield path


async def _round_trip(folder: Path, template: Path, lines: list[dict[str, Any]], ascii_only: bool) -> None:
    source = folder / "t.jsonl"
    header = {"type": "session", "version": 3, "id": "hyp-session", "timestamp": "2026-01-01T00:00:00.000Z", "cwd": "/"}
    source.write_text("".join(json.dumps(x, ensure_ascii=ascii_only) + "\n" for x in [header, *lines]), "utf-8")
    for name in ("a.db", "b.db"):
        shutil.copy(template, folder / name)
    first = await Store.open(folder / "a.db")
    try:
        report = await import_paths(first, [source])
        assert report.clean, report.skipped
        await export_session(first, session_key="file:hyp-session", out=folder / "out")
    finally:
        await first.close()
    exported = read_transcript(folder / "out" / "t.jsonl")
    assert [e.to_json() for e in exported.entries] == lines
    second = await Store.open(folder / "b.db")
    try:
        await import_paths(second, [folder / "out"])
    finally:
        await second.close()
    assert snapshot(folder / "b.db") == snapshot(folder / "a.db")


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(lines=transcript_lines(), ascii_only=st.booleans())
def test_generated_transcripts_round_trip(empty_db: Path, lines: list[dict[str, Any]], ascii_only: bool) -> None:
    with tempfile.TemporaryDirectory() as folder:
        asyncio.run(_round_trip(Path(folder), empty_db, lines, ascii_only))


async def test_runtime_written_chain_exports_with_regenerated_compaction(store: Store, tmp_path: Path) -> None:
    counter = store.counter
    async with store.transaction() as conn:
        first = await repo.ensure_session(conn, "agent:rt", sessions_dir=str(tmp_path))
        written = await repo.append_messages(
            conn,
            first,
            [repo.NewMessage(UserMessage(content=f"message {n}", timestamp=1_000 * n)) for n in range(6)],
            counter,
        )
        summary = await repo.insert_summary(
            conn,
            first,
            repo.NewSummary(
                kind="legacy",
                content="## Goal\nsummary of 0-2",
                token_count=12,
                summarizer="extractive-v2",
                source_message_ids=[r.message_id for r in written[:3]],
            ),
        )
        items = [("summary", summary, 12), *(("message", r.message_id, r.token_count) for r in written[3:])]
        successor = await repo.rotate_session(conn, first, items, reason="compaction", engine_id="legacy")
        await repo.record_compaction(
            conn,
            session_key="agent:rt",
            before_session_id=first.session_id,
            after_session_id=successor.session_id,
            engine_id="legacy",
            trigger="threshold",
            ok=1,
            compacted=1,
            tokens_before=500,
            summary_id=summary,
            first_kept_message_id=written[3].message_id,
        )
        await repo.append_messages(
            conn, successor, [repo.NewMessage(UserMessage(content="after", timestamp=9_000))], counter
        )
    report = await export_session(store, session_key="agent:rt", out=tmp_path / "rt")
    assert [f.session_id for f in report.files] == [first.session_id, successor.session_id]
    second = await Store.open(tmp_path / "rt.db")
    try:
        result = await import_paths(second, [tmp_path / "rt"])
        assert result.clean, result.skipped
        async with second.read() as conn:
            chain = await repo.session_chain(conn, "agent:rt")
            assert [(s.session_id, s.status) for s in chain] == [
                (first.session_id, "rotated"),
                (successor.session_id, "active"),
            ]
        texts = await context_texts(second, successor.session_id)
        assert texts == await context_texts(store, successor.session_id)
        con = sqlite3.connect(tmp_path / "rt.db")
        covered = con.execute(
            "SELECT m.text FROM summary_messages sm JOIN messages m USING (message_id) ORDER BY sm.ordinal"
        ).fetchall()
        assert [t for (t,) in covered] == ["message 0", "message 1", "message 2"]
        assert con.execute("SELECT count(*) FROM messages").fetchone()[0] == 7
    finally:
        await second.close()


# --- the CLI ---------------------------------------------------------------------------------------


def test_cli_import_and_export(agent_dir: AgentDir, tmp_path: Path) -> None:
    db = str(tmp_path / "cli.db")
    done = invoke("--db", db, "import", str(agent_dir.root), "--json")
    assert done.exit_code == 0, done.output
    data = json.loads(done.stdout)
    assert data["files"] == len(agent_dir.files) and data["skipped"] == [] and data["messages_new"] > 0
    again = invoke("--db", db, "import", str(agent_dir.root))
    assert again.exit_code == 0 and "agent:main:telegram:42" in again.stdout
    out = tmp_path / "cli-out"
    exported = invoke("--db", db, "export", "--key", "agent:main:main", "--out", str(out))
    assert exported.exit_code == 0, exported.output
    assert len(list(out.glob("*.jsonl"))) == len(agent_dir.chains["agent:main:main"])
    one = agent_dir.chains["agent:main:telegram:42"][0]
    single = invoke("--db", db, "export", "--session", one, "--out", str(tmp_path / "one.jsonl"), "--json")
    assert single.exit_code == 0 and json.loads(single.stdout)["files"][0]["session_id"] == one
    assert read_transcript(tmp_path / "one.jsonl").header is not None


def test_cli_import_exits_2_and_lists_skipped_lines(tmp_path: Path) -> None:
    dirty = build_agent_dir(tmp_path / "dirty", malformed=True)
    done = invoke("--db", str(tmp_path / "d.db"), "import", str(dirty.root))
    assert done.exit_code == 2
    for path, line_no in dirty.malformed:
        assert f"{path.name}:{line_no}:" in done.stderr.replace("\n", "")


def test_cli_errors_are_clear(tmp_path: Path) -> None:
    db = str(tmp_path / "e.db")
    missing = invoke("--db", db, "import", str(tmp_path / "nope"))
    assert missing.exit_code == 1 and "no such file or directory" in flat(missing.stderr)
    both = invoke("--db", db, "export", "--key", "k", "--session", "s", "--out", str(tmp_path))
    assert both.exit_code == 2 and "exactly one of --key and --session" in flat(both.stderr)
    unknown = invoke("--db", db, "export", "--key", "nobody", "--out", str(tmp_path / "o"))
    assert unknown.exit_code == 1 and "no sessions stored under key 'nobody'" in flat(unknown.stderr)


async def test_a_key_with_a_live_session_keeps_it_active(store: Store, agent_dir: AgentDir, tmp_path: Path) -> None:
    async with store.transaction() as conn:
        live = await repo.ensure_session(conn, "agent:main:main", sessions_dir=str(tmp_path))
    sessions_json = agent_dir.root / "main" / "sessions" / "sessions.json"
    report = await import_paths(store, [sessions_json])
    assert report.clean and {f.session_key for f in report.files} == {"agent:main:main", "agent:main:telegram:42"}
    async with store.read() as conn:
        assert (await repo.active_session(conn, "agent:main:main")) == await repo.get_session(conn, live.session_id)
        statuses = [
            s.status for s in await repo.session_chain(conn, "agent:main:main") if s.session_id != live.session_id
        ]
    assert statuses == ["rotated", "rotated", "archived"]


async def test_a_directory_without_transcripts_is_reported(store: Store, tmp_path: Path) -> None:
    (tmp_path / "empty").mkdir()
    report = await import_paths(store, [tmp_path / "empty"])
    assert report.files == [] and report.skipped == [
        f"{tmp_path / 'empty'}: no transcripts (*.jsonl, openclaw-agent.sqlite) found"
    ]
