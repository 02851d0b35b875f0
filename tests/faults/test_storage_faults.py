"""Storage faults (#13.8) on real mounts: a full disk, read-only storage, a corrupt page, /dev/full.

Each case runs the real CLI and asserts: a clear error naming the fault, exit 1, no traceback, and
nothing already stored lost or half-written (integrity check, `doctor --deep`, the stored messages);
after the fault is gone the same command finishes and the store equals an uninterrupted run.
"""

from __future__ import annotations

import contextlib
import sqlite3
from pathlib import Path

import pytest
from fault_kit import (
    cli,
    file_digest,
    integrity,
    message_fingerprint,
    no_traceback,
    read_only_view,
    record,
    resize,
    tmpfs,
    write_transcript,
)

pytestmark = pytest.mark.slow

BUDGET = "4000"


def _bulk_writes(transcript: Path) -> list[list[str]]:
    """The commands that write a whole history into key `k`'s store (each refuses a store it must not write)."""
    return [
        ["replay", str(transcript), "--key", "k2"],
        ["import", str(transcript)],
        ["migrate", "--key", "k", "--to", "lossless-claw"],
        ["backfill", "--key", "k"],
    ]


def _checked(category: str, result_ok: bool, traceback_free: bool) -> None:
    record(category, runs=1, consistent=int(result_ok), tracebacks=int(not traceback_free))


@pytest.mark.parametrize("command", ["replay", "import"])
def test_a_full_disk_stops_cleanly_and_the_rerun_equals_an_uninterrupted_run(tmp_path: Path, command: str) -> None:
    transcripts = [write_transcript(tmp_path / f"t{i}.jsonl", messages=120, words=300, seed=i) for i in (1, 2)]
    args = (
        ["replay", str(transcripts[0]), "--key", "k", "--budget", BUDGET]
        if command == "replay"
        else ["import", *map(str, transcripts)]
    )
    baseline = tmp_path / "baseline.db"
    assert cli(baseline, *args).returncode == 0
    expected = message_fingerprint(baseline)

    with tmpfs(tmp_path / "small", "1200k") as mount:
        db = mount / "ctx.db"
        full = cli(db, *args)
        assert full.returncode == 1, full.stdout + full.stderr
        assert "the disk is full" in full.stderr and no_traceback(full), full.stderr
        assert integrity(db) == ["ok"]
        assert cli(db, "doctor", "--deep").returncode == 0
        stored = message_fingerprint(db)
        assert not stored - expected, "a message stored under a full disk that the uninterrupted run lacks"
        assert sum(stored.values()) < sum(expected.values()), "the disk never filled: make the mount smaller"

        resize(mount, "64m")
        rerun = cli(db, *args)
        assert rerun.returncode == 0, rerun.stderr
        after = message_fingerprint(db)
        assert after == expected
        assert cli(db, "doctor", "--deep").returncode == 0
    lost = sum((expected - after).values())
    record(
        f"disk full: {command}",
        runs=1,
        consistent=1,
        recovered=int(after == expected),
        lost=lost,
        duplicated=sum((after - expected).values()),
        tracebacks=0,
    )


def test_export_onto_a_full_disk_or_a_device_names_the_fault_and_replaces_nothing(tmp_path: Path) -> None:
    db = tmp_path / "ctx.db"
    transcript = write_transcript(tmp_path / "t.jsonl", messages=40, words=200, seed=3)
    assert cli(db, "replay", str(transcript)).returncode == 0
    for out in ("/dev/full", "/dev/null"):
        result = cli(db, "export", "--key", "replay:fault-3", "--out", out, "--force")
        assert result.returncode == 1 and no_traceback(result), result.stderr
        assert "not a directory" in result.stderr, result.stderr
    assert Path("/dev/null").is_char_device() and Path("/dev/full").is_char_device()
    with tmpfs(tmp_path / "tiny", "16k") as mount:
        old = mount / "kept.jsonl"
        old.write_text("the user's file\n")
        result = cli(db, "export", "--key", "replay:fault-3", "--out", str(mount))
        assert result.returncode == 1 and "No space left on device" in result.stderr and no_traceback(result)
        assert old.read_text() == "the user's file\n"
        assert not [p for p in mount.iterdir() if p.name.startswith(".")], "a temporary file was left behind"
    _checked("disk full: export", True, True)


def test_read_only_storage_reads_everything_and_refuses_writes(tmp_path: Path) -> None:
    data = tmp_path / "data"
    data.mkdir()
    db = data / "ctx.db"
    transcript = write_transcript(tmp_path / "t.jsonl", messages=60, words=80, seed=4)
    assert cli(db, "replay", str(transcript), "--key", "k", "--budget", BUDGET).returncode == 0
    before = file_digest(db)
    with read_only_view(data, tmp_path / "ro") as view:
        ro = view / "ctx.db"
        for args, expect in (
            (["sessions"], "k"),
            (["assemble", "--key", "k"], "assistant"),
            (["grep", "alpha", "--key", "k"], "hit"),
            (["sql", "SELECT count(*) AS n FROM messages"], "60"),
            (["stats", "--key", "k"], "compactions"),
            (["export", "--key", "k", "--out", str(tmp_path / "out")], "wrote"),
            (["db", "check"], "integrity ok"),
        ):
            result = cli(ro, *args)
            assert result.returncode == 0 and no_traceback(result), (args, result.stderr)
            assert expect in result.stdout, (args, result.stdout)
        for args in _bulk_writes(transcript):
            result = cli(ro, *args)
            assert result.returncode == 1 and no_traceback(result), (args, result.stderr)
            assert "read-only storage" in result.stderr and "nothing was written" in result.stderr, result.stderr
        assert not (view / "ctx.db-journal").exists()
    assert file_digest(db) == before
    _checked("read-only storage", True, True)


def _corrupt_a_middle_page(db: Path) -> None:
    with contextlib.closing(sqlite3.connect(db)) as conn:
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        page_size, pages = (conn.execute(f"PRAGMA {p}").fetchone()[0] for p in ("page_size", "page_count"))
    with db.open("r+b") as handle:
        handle.seek(page_size * (pages // 2))
        handle.write(b"\xde\xad\xbe\xef" * (page_size // 4))


def test_a_store_that_fails_its_integrity_check_refuses_bulk_writes(tmp_path: Path) -> None:
    db = tmp_path / "ctx.db"
    transcript = write_transcript(tmp_path / "t.jsonl", messages=120, words=200, seed=5)
    assert cli(db, "replay", str(transcript), "--key", "k", "--budget", BUDGET).returncode == 0
    _corrupt_a_middle_page(db)
    damaged = file_digest(db)
    for args in _bulk_writes(transcript):
        result = cli(db, *args)
        assert result.returncode == 1 and no_traceback(result), (args, result.stderr)
        # Where the damaged page lands decides which check meets it first: the integrity check, or
        # SQLite itself while the store opens; either way the store is refused and nothing is written.
        refused = "fails its integrity check" in result.stderr or "is corrupt or not SQLite" in result.stderr
        assert refused and "nothing was written" in result.stderr, result.stderr
    assert file_digest(db) == damaged
    doctor = cli(db, "doctor")
    assert doctor.returncode == 1 and "damaged" in doctor.stdout + doctor.stderr and no_traceback(doctor)
    _checked("corrupt page", True, True)
