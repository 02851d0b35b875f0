"""Transcripts shaped after OpenClaw 2026.9's types, for the context differential test.

:class:`Writer` appends entries the way OpenClaw's session writer does (each under the current leaf
unless told otherwise); :func:`named_cases` builds one file per entry kind and navigation rule, and
:func:`random_case` a seeded stress tree mixing all of them.
"""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

BASE_MS = 1_767_225_600_000
MISSING_RESULT = (
    "[openclaw] missing tool result in session history; inserted synthetic error result for transcript repair."
)
_USAGE = {
    "input": 10,
    "output": 5,
    "cacheRead": 0,
    "cacheWrite": 0,
    "totalTokens": 15,
    "cost": {"input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0, "total": 0},
}


class Writer:
    """One transcript being written: entries in file order, and the leaf the next entry hangs under."""

    def __init__(self, session_id: str, version: int = 3) -> None:
        self.lines: list[dict[str, Any]] = [
            {"type": "session", "version": version, "id": session_id, "timestamp": self._iso(0), "cwd": "/w"}
        ]
        self.ids: list[str] = []
        self.leaf: str | None = None
        self.clock = 0

    @staticmethod
    def _iso(n: int) -> str:
        return f"2026-01-01T{n // 3600:02d}:{n // 60 % 60:02d}:{n % 60:02d}.000Z"

    def add(self, kind: str, parent: Any = "leaf", *, moves: bool = True, **fields: Any) -> str:
        """Append an entry; `parent` "leaf" is the current leaf, None a root, "absent" leaves the field out."""
        self.clock += 1
        entry_id = fields.pop("id", None) or f"e{len(self.ids) + 1:03d}"
        entry: dict[str, Any] = {"type": kind, "id": entry_id}
        if parent != "absent":
            entry["parentId"] = self.leaf if parent == "leaf" else parent
        entry["timestamp"] = self._iso(self.clock)
        entry.update(fields)
        self.lines.append(entry)
        self.ids.append(entry_id)
        if moves:
            self.leaf = entry_id
        return entry_id

    def message(self, role: str, text: str = "", parent: Any = "leaf", *, moves: bool = True, **fields: Any) -> str:
        body = dict(fields.pop("message", {}))
        at = BASE_MS + (self.clock + 1) * 1000
        if role == "user":
            body = {"role": "user", "content": text or f"user says {self.clock}", "timestamp": at, **body}
        elif role == "assistant":
            calls = body.pop("calls", [])
            content = [{"type": "text", "text": text or f"assistant says {self.clock}"}] + [
                {"type": "toolCall", "id": c, "name": "read", "arguments": {"path": c}} for c in calls
            ]
            body = {
                "role": "assistant",
                "content": content,
                "api": "openai-completions",
                "provider": "p",
                "model": "m1",
                "usage": _USAGE,
                "stopReason": "toolUse" if calls else "stop",
                "timestamp": at,
                **body,
            }
        elif role == "toolResult":
            body = {
                "role": "toolResult",
                "toolName": "read",
                "content": [{"type": "text", "text": text or f"result {self.clock}"}],
                "isError": False,
                "timestamp": at,
                **body,
            }
        else:
            body = {"role": role, "content": text, "timestamp": at, **body}
        return self.add("message", parent, moves=moves, message=body, **fields)

    def turn(self, calls: int = 0) -> None:
        """A user question and the reply, with `calls` tool calls answered in order."""
        self.message("user")
        ids = [f"call{self.clock}_{n}" for n in range(calls)]
        self.message("assistant", message={"calls": ids})
        for call in ids:
            self.message("toolResult", message={"toolCallId": call})
        if calls:
            self.message("assistant")

    def write(self, path: Path) -> Path:
        path.write_text("".join(json.dumps(line) + "\n" for line in self.lines), encoding="utf-8")
        return path


def _compaction(w: Writer, first_kept: str | None, summary: str = "summary") -> str:
    fields: dict[str, Any] = {"summary": f"{summary} {w.clock}", "tokensBefore": 1000 + w.clock}
    if first_kept is not None:
        fields["firstKeptEntryId"] = first_kept
    return w.add("compaction", **fields)


def named_cases() -> dict[str, Writer]:  # noqa: C901 - one short block per case
    """One transcript per kind of entry and navigation rule, by name."""
    cases: dict[str, Writer] = {}

    def case(name: str, version: int = 3) -> Writer:
        cases[name] = Writer(f"case-{name}", version)
        return cases[name]

    w = case("linear")
    for n in range(4):
        w.turn(calls=n % 3)

    w = case("stale-parent")
    w.turn()
    w.message("user", parent="gone-away")
    w.message("assistant")
    w.turn(1)

    w = case("branches")
    w.turn()
    fork = w.leaf
    w.turn(1)
    w.leaf = fork
    w.add("branch_summary", fromId=w.ids[-1], summary="what the abandoned branch did")
    w.turn()
    w.add("branch_summary", fromId=fork, summary="")
    w.turn()

    w = case("successive-compactions")
    w.turn()
    early = w.ids[-1]
    w.turn(1)
    for _ in range(4):
        _compaction(w, early)
        w.turn()
    _compaction(w, w.ids[-2])
    w.turn()

    w = case("compaction-kept-missing")
    w.turn()
    _compaction(w, "not-an-entry")
    w.turn()

    w = case("reset-plain")
    w.turn(1)
    w.add("reset", reason="new")
    w.turn()

    w = case("reset-kept")
    w.turn()
    kept = w.ids[-1]
    w.turn(2)
    w.message("toolResult", message={"toolCallId": "never-called"})
    w.message("assistant", message={"calls": ["lost"]})
    w.message(
        "toolResult",
        message={"toolCallId": "lost", "isError": True, "content": [{"type": "text", "text": MISSING_RESULT}]},
    )
    w.message("toolResult", message={"toolCallId": "lost"})
    w.add("custom_message", customType="note", content="kept? no", display=True)
    w.message("user", message={"excludeFromContext": True})
    w.add("reset", reason="reset", firstKeptEntryId=kept)
    w.turn()
    w.message("user", parent=kept)  # not a reset descendant: hangs under the leaf

    w = case("leaf-records")
    w.turn()
    back = w.ids[-1]
    w.turn(1)
    w.add("leaf", parent=w.leaf, moves=False, targetId=back)
    w.leaf = back
    w.turn()
    w.add("leaf", parent=w.leaf, moves=False, targetId="unknown-target")
    w.turn()
    w.add("leaf", parent=w.leaf, moves=False, targetId=back, appendParentId=w.ids[-1])
    w.message("user", parent=w.ids[-2])
    w.add("reset", reason="idle")
    w.add("leaf", parent=w.leaf, moves=False, targetId=back)  # outside the reset: the leaf stays
    w.turn()

    w = case("side-appends")
    w.turn()
    w.add("custom_message", moves=False, customType="side", content="aside", display=True, appendMode="side")
    w.message("user", moves=False, appendMode="side")
    w.turn()

    w = case("excluded-and-system")
    w.message("system", "you are helpful")
    w.turn()
    w.message("user", message={"excludeFromContext": True})
    w.add(
        "message",
        message={
            "role": "bashExecution",
            "command": "ls",
            "output": "a b",
            "excludeFromContext": True,
            "timestamp": BASE_MS,
        },
    )
    w.add(
        "message",
        message={"role": "bashExecution", "command": "pwd", "output": "/w", "exitCode": 0, "timestamp": BASE_MS},
    )
    w.turn()

    w = case("settings-and-extensions")
    w.add("model_change", provider="anthropic", modelId="claude-x")
    w.add("thinking_level_change", thinkingLevel="high")
    w.turn()
    w.add("custom", customType="ext-state", data={"n": 1})
    w.add(
        "custom_message",
        customType="ext",
        content=[{"type": "text", "text": "injected"}],
        display=False,
        details={"k": 1},
    )
    w.add("label", targetId=w.ids[0], label="start")
    w.add("session_info", name="a named session")
    w.turn()
    w.add("model_change", provider="openai", modelId="gpt-x")

    w = case("opaque-records")
    w.turn()
    w.add("context_edit", moves=False, targetId=w.ids[-1], op="omit")
    w.message("user", parent=w.ids[-1])
    w.add("mystery", moves=False, blob=[1, 2])
    opaque = w.ids[-1]
    w.message("assistant", parent=opaque)
    _compaction(w, opaque)
    w.turn()

    w = case("parentless")
    w.turn()
    w.message("user", parent="absent")
    w.message("assistant", parent="absent")
    w.turn()

    w = case("replay-checkpoint")
    w.turn()
    kept = w.ids[-2]
    w.message("assistant", message={"providerReplay": {"type": "openai-responses-compaction", "replayIndex": 0}})
    _compaction(w, kept)
    w.message("assistant", message={"providerReplay": {"type": "anthropic-compaction"}})

    w = case("pending-stop")
    w.message("user")
    w.message("assistant", message={"calls": ["wait"], "stopReason": "pending"})
    w.message("assistant", message={"stopReason": "deferred"})

    w = case("v2-hook-message", version=2)
    w.turn()
    w.add("message", message={"role": "hookMessage", "customType": "", "content": "from a hook", "timestamp": BASE_MS})
    w.turn()
    return cases


def v1_case(path: Path) -> Path:
    """A version-1 file: no ids, and a compaction that keeps from `firstKeptEntryIndex` (the header is record 0)."""
    lines: list[dict[str, Any]] = [
        {"type": "session", "version": 1, "id": "v1", "timestamp": Writer._iso(0), "cwd": "/"}
    ]
    for n in range(1, 7):
        role = "user" if n % 2 else "assistant"
        content: Any = f"v1 message {n}" if role == "user" else [{"type": "text", "text": f"v1 reply {n}"}]
        lines.append(
            {
                "type": "message",
                "timestamp": Writer._iso(n),
                "message": {"role": role, "content": content, "timestamp": BASE_MS + n},
            }
        )
    lines.append(
        {
            "type": "compaction",
            "timestamp": Writer._iso(8),
            "summary": "v1 summary",
            "firstKeptEntryIndex": 3,
            "tokensBefore": 90,
        }
    )
    lines.append(
        {
            "type": "message",
            "timestamp": Writer._iso(9),
            "message": {"role": "user", "content": "after", "timestamp": BASE_MS + 9},
        }
    )
    path.write_text("".join(json.dumps(line) + "\n" for line in lines), encoding="utf-8")
    return path


def random_case(seed: int) -> Writer:  # noqa: C901 - one branch per operation
    """A seeded stress tree: every operation of :func:`named_cases`, in random order and places."""
    rng = random.Random(seed)
    w = Writer(f"stress-{seed}")
    w.turn()
    calls_open: list[str] = []
    for _ in range(rng.randint(15, 60)):
        op = rng.random()
        anywhere = rng.choice(w.ids) if w.ids else None
        if op < 0.35:
            w.turn(calls=rng.choice([0, 0, 1, 2]))
        elif op < 0.42:
            call = f"c{w.clock}"
            calls_open.append(call)
            w.message("assistant", message={"calls": [call]})
        elif op < 0.47 and calls_open:
            w.message("toolResult", message={"toolCallId": rng.choice(calls_open)})
        elif op < 0.52:
            w.message(rng.choice(["user", "assistant"]), parent=anywhere)  # a branch
        elif op < 0.55:
            w.message("user", parent=f"missing-{w.clock}")
        elif op < 0.58:
            w.message("user", parent="absent")
        elif op < 0.62:
            target = rng.choice([anywhere, None, "nowhere"])
            extra = {"appendParentId": rng.choice(w.ids)} if rng.random() < 0.3 else {}
            w.add("leaf", parent=w.leaf, moves=False, targetId=target, **extra)
            if target in w.ids:
                w.leaf = target
        elif op < 0.66:
            fields = {"firstKeptEntryId": anywhere} if rng.random() < 0.6 and anywhere else {}
            w.add("reset", reason=rng.choice(["new", "reset", "daily"]), **fields)
        elif op < 0.72:
            _compaction(w, rng.choice([anywhere, w.ids[-1], None]))
        elif op < 0.75:
            w.add("branch_summary", fromId=anywhere or "", summary=rng.choice(["", "a branch"]))
        elif op < 0.79:
            w.add("context_edit" if rng.random() < 0.5 else "mystery", moves=False, targetId=anywhere)
        elif op < 0.82:
            w.message("user", moves=False, appendMode="side")
        elif op < 0.85:
            w.message("user", message={"excludeFromContext": True})
        elif op < 0.87:
            w.message("system", "system text")
        elif op < 0.91:
            w.add("custom_message", customType="x", content=f"cm {w.clock}", display=rng.random() < 0.5)
        elif op < 0.94:
            w.add(rng.choice(["custom", "label", "session_info"]), customType="s", targetId=anywhere, name="n")
        elif op < 0.97:
            w.add("thinking_level_change", thinkingLevel=rng.choice(["low", "high"]))
        else:
            w.add("model_change", provider="q", modelId=f"m{w.clock}")
    return w
