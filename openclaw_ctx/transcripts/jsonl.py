"""OpenClaw session transcripts (JSONL, versions 1 to 4): a streaming reader.

A transcript file is one header line (``{"type":"session","version":3,"id",...}``) followed by entries
(:mod:`openclaw_ctx.transcripts.entries`) forming a tree (:mod:`openclaw_ctx.transcripts.tree`).
Reading is line by line, so a file of any size is never loaded whole, and a malformed line becomes a
:class:`TranscriptLineError` in ``Transcript.errors`` instead of stopping the read.

Example::

    transcript = read_transcript("session.jsonl")
    for error in transcript.errors:
        print(error)                      # file:line: reason
    messages = transcript.context_messages()   # what OpenClaw's buildSessionContext shows the model
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any, BinaryIO

from openclaw_ctx.transcripts.artifacts import ZSTD_SUFFIX
from openclaw_ctx.transcripts.entries import (
    TRANSCRIPT_VERSION,
    Entry,
    EntryError,
    MessageEntry,
    SessionHeader,
    TranscriptLineError,
    parse_entry,
    parse_header,
)
from openclaw_ctx.transcripts.tree import Transcript

__all__ = ["dumps", "iter_entries", "iter_lines", "read_transcript", "zstd_lines"]

_PROGRESS_CHUNK = 1 << 20
_BOM = b"\xef\xbb\xbf"
MAX_NESTING = 100
"""Deepest JSON a transcript line may nest: real entries nest a few levels (tool arguments a few more); deeper ones are
refused as one bad line before they reach code (validation, SQLite's JSON functions) that recurses."""
_NO_HEADER = 'missing session header (line 1 must be {"type":"session",…})'


def _file_lines(path: str | Path) -> Iterator[bytes]:
    with open(path, "rb") as handle:
        if not str(path).endswith(ZSTD_SUFFIX):
            yield from handle
            return
        yield from zstd_lines(handle)


def zstd_lines(handle: BinaryIO) -> Iterator[bytes]:
    """The lines of an archive OpenClaw compressed, decompressed as they stream (never whole in memory)."""
    import zstandard

    decoder = zstandard.ZstdDecompressor().decompressobj()
    tail: list[bytes] = []
    try:
        for chunk in iter(lambda: handle.read(1 << 16), b""):
            while chunk:
                if decoder.eof:  # a frame ended: the rest is the next one
                    decoder = zstandard.ZstdDecompressor().decompressobj()
                parts = decoder.decompress(chunk).split(b"\n")
                chunk = decoder.unused_data if decoder.eof else b""
                if len(parts) > 1:
                    yield b"".join([*tail, parts[0], b"\n"])
                    yield from (part + b"\n" for part in parts[1:-1])
                    tail = []
                tail.append(parts[-1])
    except zstandard.ZstdError as exc:
        raise _CorruptArchive(f"zstd archive corrupt ({exc}); nothing after this line can be read") from exc
    if not decoder.eof:
        raise _CorruptArchive("zstd archive cut short; nothing after this line can be read")
    if rest := b"".join(tail):
        yield rest


class _CorruptArchive(Exception):
    """A compressed transcript whose data stops decoding part way."""


def dumps(obj: Any) -> str:
    """One JSONL line (UTF-8 unless the object holds a lone surrogate, which survives only as an escape)."""
    try:
        line = json.dumps(obj, ensure_ascii=False, separators=(",", ":"))
        line.encode("utf-8")
        return line
    except UnicodeEncodeError:
        return json.dumps(obj, ensure_ascii=True, separators=(",", ":"))


def iter_lines(
    path: str | Path,
    *,
    on_bytes: Callable[[int], None] | None = None,
    lines: Iterable[bytes] | None = None,
) -> Iterator[tuple[int, str, dict[str, Any] | TranscriptLineError]]:
    """Decode a JSONL file line by line: ``(line_no, raw, object | error)``; blank lines are skipped.

    Args:
        path: the transcript file; with `lines`, only the name errors are reported under.
        on_bytes: called with the number of bytes consumed, about every megabyte and at the end.
        lines: the transcript's lines from somewhere other than a file (OpenClaw's SQLite agent store).
    """
    name = str(path)
    pending = 0
    source = iter(_file_lines(path) if lines is None else lines)
    line_no = 0
    while True:
        try:
            data = next(source)
        except StopIteration:
            break
        except _CorruptArchive as exc:
            yield line_no + 1, "", TranscriptLineError(name, line_no + 1, str(exc), "")
            break
        line_no += 1
        pending += len(data)
        if on_bytes is not None and pending >= _PROGRESS_CHUNK:
            on_bytes(pending)
            pending = 0
        data = data.rstrip(b"\r\n")
        if line_no == 1 and data.startswith(_BOM):
            data = data[len(_BOM) :]  # editors on Windows write one; it is not part of the JSON
        if not data.strip():
            continue
        try:
            raw = data.decode("utf-8")
        except UnicodeDecodeError as exc:
            text = data.decode("utf-8", "replace")
            yield line_no, text, TranscriptLineError(name, line_no, f"not valid UTF-8 (byte {exc.start})", text)
            continue
        try:
            obj = json.loads(raw)
        except json.JSONDecodeError as exc:
            yield (
                line_no,
                raw,
                TranscriptLineError(name, line_no, f"not valid JSON ({exc.msg} at char {exc.pos})", raw),
            )
            continue
        except RecursionError:
            yield line_no, raw, TranscriptLineError(name, line_no, "JSON nested too deeply to read", raw)
            continue
        except ValueError as exc:  # e.g. an integer of more digits than Python converts
            yield line_no, raw, TranscriptLineError(name, line_no, f"not usable JSON ({exc})", raw)
            continue
        if (depth := _nesting_depth(obj)) > MAX_NESTING:
            reason = f"JSON nested {depth} levels deep (at most {MAX_NESTING})"
            yield line_no, raw, TranscriptLineError(name, line_no, reason, raw)
            continue
        if not isinstance(obj, dict):
            reason = f"expected a JSON object, got {type(obj).__name__}"
            yield line_no, raw, TranscriptLineError(name, line_no, reason, raw)
            continue
        yield line_no, raw, obj
    if on_bytes is not None and pending:
        on_bytes(pending)


def _nesting_depth(value: object) -> int:
    """How deep `value` nests, counted without recursion (stops early past MAX_NESTING)."""
    deepest = 0
    stack: list[tuple[object, int]] = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, dict):
            children: Iterable[object] = item.values()
        elif isinstance(item, list):
            children = item
        else:
            continue
        deepest = max(deepest, depth)
        if deepest > MAX_NESTING:
            return deepest
        stack.extend((child, depth + 1) for child in children)
    return deepest


def _legacy_upgrade(obj: dict[str, Any], line_no: int, previous_id: str | None, by_index: list[str | None]) -> None:
    # v1 files had no tree fields and v2 called custom messages "hookMessage"; upgrade in place like pi does.
    if "id" not in obj:
        obj["id"] = f"{line_no:08x}"
        obj.setdefault("parentId", previous_id)
    if obj.get("type") == "compaction" and "firstKeptEntryId" not in obj:
        # The index counts the file's records with the header at 0 (pi's migrateToCurrentVersion).
        index = obj.get("firstKeptEntryIndex")
        if isinstance(index, int) and not isinstance(index, bool) and 0 <= index < len(by_index) and by_index[index]:
            obj["firstKeptEntryId"] = by_index[index]
    message = obj.get("message")
    if isinstance(message, dict) and message.get("role") == "hookMessage":
        message["role"] = "custom"
        message["customType"] = message.get("customType") or "hook"


def iter_entries(
    path: str | Path,
    *,
    on_bytes: Callable[[int], None] | None = None,
    lines: Iterable[bytes] | None = None,
) -> Iterator[SessionHeader | Entry | TranscriptLineError]:
    """Stream a transcript: its header, then each entry or line error, in file order (see `iter_lines`)."""
    name = str(path)
    header: SessionHeader | None = None
    seen: dict[str, int] = {}
    order: list[str] = []
    by_index: list[str | None] = []  # every record's id, the header at 0: what a v1 firstKeptEntryIndex counts
    first = True
    for line_no, raw, obj in iter_lines(path, on_bytes=on_bytes, lines=lines):
        if isinstance(obj, TranscriptLineError):
            first = False
            yield obj
            continue
        if first:
            first = False
            if obj.get("type") == "session":
                try:
                    header = parse_header(obj)
                except EntryError as exc:
                    yield TranscriptLineError(name, line_no, str(exc), raw)
                    continue
                by_index.append(None)
                if dumps(header.raw) != raw:
                    header = dataclasses.replace(header, source=raw)
                yield header
                continue
            yield TranscriptLineError(name, line_no, _NO_HEADER, raw)
        upgraded = header is not None and header.version < TRANSCRIPT_VERSION
        if upgraded:
            _legacy_upgrade(obj, line_no, order[-1] if order else None, by_index)
        entry_id, parent = obj.get("id"), obj.get("parentId")
        by_index.append(entry_id if isinstance(entry_id, str) else None)
        ids = (entry_id if isinstance(entry_id, str) else None, parent if isinstance(parent, str) else None)
        try:
            if obj.get("type") == "session":
                raise EntryError("a second session header")
            entry = parse_entry(obj, line_no)
        except EntryError as exc:
            yield TranscriptLineError(name, line_no, str(exc), raw, *ids)
            continue
        if entry.id in seen:
            reason = f"duplicate entry id {entry.id!r} (first at line {seen[entry.id]})"
            yield TranscriptLineError(name, line_no, reason, raw)
            continue
        seen[entry.id] = line_no
        order.append(entry.id)
        if upgraded:
            pass  # written back upgraded, under a current header: the line as read would lose its new ids
        elif not isinstance(entry, MessageEntry) or dumps(entry.to_json()) != raw:
            entry.source = raw  # a message only when writing it from its parsed form would change a byte
        yield entry


def read_transcript(
    path: str | Path,
    *,
    on_bytes: Callable[[int], None] | None = None,
    lines: Iterable[bytes] | None = None,
) -> Transcript:
    """Read a whole transcript, line by line; malformed lines are collected in `errors`, never raised.

    `on_bytes` reports reading progress and `lines` replaces the file as in :func:`iter_lines`.

    Raises:
        OSError: the file cannot be opened.
    """
    transcript = Transcript(path=str(path), header=None, entries=[], errors=[])
    for item in iter_entries(path, on_bytes=on_bytes, lines=lines):
        if isinstance(item, SessionHeader):
            transcript.header = item
        elif isinstance(item, TranscriptLineError):
            transcript.errors.append(item)
        else:
            transcript.entries.append(item)
            transcript.by_id[item.id] = item
    return transcript
