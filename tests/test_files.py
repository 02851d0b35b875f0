"""Outputs never overwrite a file unasked, and never the database."""

from __future__ import annotations

import os
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
