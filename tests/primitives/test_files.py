"""Outputs never overwrite a file unasked, and never the database."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from openclaw_ctx._files import database_files, guard_output, write_atomic
from openclaw_ctx.errors import OutputPathError


def test_a_new_file_is_fine_and_written_whole(tmp_path: Path) -> None:
    target = tmp_path / "sub" / "out.dot"
    guard_output(target)
    write_atomic(target, "digraph {}\n")
    assert target.read_text() == "digraph {}\n"
    assert sorted(p.name for p in target.parent.iterdir()) == ["out.dot"]


def test_an_existing_file_needs_force(tmp_path: Path) -> None:
    target = tmp_path / "out.dot"
    target.write_text("keep me")
    with pytest.raises(OutputPathError, match="already exists; pass --force"):
        guard_output(target)
    guard_output(target, force=True)


@pytest.mark.parametrize("suffix", ["", "-wal", "-shm", "-journal"])
def test_the_database_and_its_sidecars_are_refused_even_with_force(tmp_path: Path, suffix: str) -> None:
    db = tmp_path / "ctx.db"
    for path in database_files(db):
        path.write_bytes(b"x")
    with pytest.raises(OutputPathError, match="open database"):
        guard_output(tmp_path / f"ctx.db{suffix}", force=True, protected=database_files(db))


def test_a_link_to_the_database_is_refused(tmp_path: Path) -> None:
    db = tmp_path / "ctx.db"
    db.write_bytes(b"x")
    link = tmp_path / "innocent.dot"
    os.symlink(db, link)
    with pytest.raises(OutputPathError, match="open database"):
        guard_output(link, force=True, protected=database_files(db))


def test_a_directory_is_refused(tmp_path: Path) -> None:
    with pytest.raises(OutputPathError, match="directory"):
        guard_output(tmp_path, force=True)


def test_a_failed_write_leaves_the_old_file_and_no_temporary(tmp_path: Path) -> None:
    target = tmp_path / "out" / "out.txt"
    target.parent.mkdir()
    target.write_text("old")

    with pytest.raises(TypeError):
        write_atomic(target, 42)  # type: ignore[arg-type]
    assert target.read_text() == "old"
    assert [p.name for p in target.parent.iterdir()] == ["out.txt"]


# --- through the real CLI ---------------------------------------------------------------------------

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "coding-session.jsonl"


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "openclaw_ctx", *args], capture_output=True, text=True, timeout=300)


@pytest.fixture
def replayed(tmp_path: Path) -> Path:
    head = tmp_path / "head.jsonl"
    head.write_text("".join(EXAMPLE.read_text(encoding="utf-8").splitlines(keepends=True)[:80]), encoding="utf-8")
    db = tmp_path / "ctx.db"
    assert _cli("--db", str(db), "replay", str(head), "--budget", "8000", "--key", "K").returncode == 0
    return db


def test_dag_out_never_writes_the_database(replayed: Path) -> None:
    before = replayed.read_bytes()
    for extra in ([], ["--force"]):
        proc = _cli("--db", str(replayed), "dag", "--key", "K", "--out", str(replayed), *extra)
        assert proc.returncode == 1
        assert "open database" in proc.stderr
    assert replayed.read_bytes() == before
    assert _cli("--db", str(replayed), "sessions").returncode == 0


def test_dag_out_replaces_a_file_only_with_force(replayed: Path, tmp_path: Path) -> None:
    out = tmp_path / "dag.dot"
    out.write_text("mine")
    proc = _cli("--db", str(replayed), "dag", "--key", "K", "--out", str(out))
    assert proc.returncode == 1 and "pass --force" in proc.stderr
    assert out.read_text() == "mine"
    assert _cli("--db", str(replayed), "dag", "--key", "K", "--out", str(out), "--force").returncode == 0
    assert out.read_text().startswith("digraph")


def test_export_refuses_to_overwrite_transcripts_and_writes_nothing(replayed: Path, tmp_path: Path) -> None:
    folder = tmp_path / "export"
    assert _cli("--db", str(replayed), "export", "--key", "K", "--out", str(folder)).returncode == 0
    files = {p.name: p.read_bytes() for p in folder.iterdir()}
    first = next(p for p in folder.iterdir() if p.suffix == ".jsonl")
    first.write_text("the user's own transcript\n")
    proc = _cli("--db", str(replayed), "export", "--key", "K", "--out", str(folder))
    assert proc.returncode == 1 and "pass --force" in proc.stderr
    assert first.read_text() == "the user's own transcript\n"
    assert _cli("--db", str(replayed), "export", "--key", "K", "--out", str(folder), "--force").returncode == 0
    assert first.read_bytes() == files[first.name]
    one = _cli("--db", str(replayed), "export", "--session", "x", "--out", str(replayed), "--force")
    assert one.returncode == 1
