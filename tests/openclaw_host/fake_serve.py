"""A stand-in for `openclaw-ctx serve` (docs/serve.md) that the plugin's own tests drive.

It speaks the wire protocol only: `initialize` returns an EngineInfo; every hook answers
``{"echo": method, "params": params}``; ``prompt: "fail"`` raises (-32000); ``prompt: "hang"`` never
answers until a ``$/cancel`` (then -32800); ``compact`` asks the client ``host/llmComplete`` and
returns its text; the others answer what the host expects (assemble keeps the host's messages and adds
``MARKER`` to the system prompt), so a real gateway can run turns through it. Every line it read is
appended to ``$FAKE_SERVE_LOG``.
"""

from __future__ import annotations

import json
import os
import sys
import threading
from typing import Any

LOG = os.environ.get("FAKE_SERVE_LOG")
# What the host expects back, so the real gateway can run a turn through this stand-in too.
MARKER = "FAKE-SERVE-ASSEMBLED-THIS"
REPLIES: dict[str, dict[str, Any]] = {
    "bootstrap": {"bootstrapped": True, "importedMessages": 0},
    "maintain": {"changed": False, "bytesFreed": 0, "rewrittenEntries": 0},
    "commitTurn": {"status": "committed"},
    "ingest": {"ingested": True},
    "ingestBatch": {"ingestedCount": 0},
    "prepareSubagentSpawn": {"prepared": True, "rollbackId": "spawn-7"},
    "rollbackSubagentSpawn": {"rolledBack": True},
}
lock = threading.Lock()
hanging: set[Any] = set()
waiting: dict[str, threading.Event] = {}
answers: dict[str, Any] = {}
initialized = False
engine = "lossless-claw"


def send(msg: dict[str, Any]) -> None:
    with lock:
        sys.stdout.write(json.dumps(msg) + "\n")
        sys.stdout.flush()


def log(line: str) -> None:
    if LOG:
        with open(LOG, "a", encoding="utf-8") as f:
            f.write(line.rstrip("\n") + "\n")


def compact(rid: Any, params: dict[str, Any]) -> None:
    sid = f"s{rid}"
    ev = threading.Event()
    waiting[sid] = ev
    ask = {"prompt": "summarise", "maxTokens": 50}
    send({"jsonrpc": "2.0", "id": sid, "method": "host/llmComplete", "params": ask})
    ev.wait(10)
    ans = answers.pop(sid, None)
    if ans and "result" in ans:
        send({"jsonrpc": "2.0", "id": rid, "result": {"ok": True, "compacted": True, "summary": ans["result"]["text"]}})
    else:
        send({"jsonrpc": "2.0", "id": rid, "error": {"code": -32000, "message": f"llm failed: {ans}"}})


def main() -> None:
    global initialized, engine
    log("argv " + json.dumps(sys.argv[1:]))
    print(f"fake serve started pid {os.getpid()}", file=sys.stderr, flush=True)
    for line in sys.stdin:
        log(line)
        try:
            msg = json.loads(line)
        except ValueError:
            send({"jsonrpc": "2.0", "id": None, "error": {"code": -32700, "message": "parse error"}})
            continue
        method, rid, params = msg.get("method"), msg.get("id"), msg.get("params") or {}
        if method is None and rid in waiting:  # an answer to our host/llmComplete
            answers[rid] = msg
            waiting.pop(rid).set()
            continue
        if method == "$/cancel":
            cid = params.get("id")
            if cid in hanging:
                hanging.discard(cid)
                send({"jsonrpc": "2.0", "id": cid, "error": {"code": -32800, "message": "cancelled"}})
            continue
        if method == "initialize":
            initialized = True
            engine = params.get("engine") or engine
            info = {
                "id": engine,
                "name": "Fake " + engine,
                "version": "0.0.1",
                "ownsCompaction": True,
                "transcriptSemantics": {
                    "currentTurnFence": "before-current-turn-entry-v1",
                    "turnAdvancementIdempotency": "atomic-idempotent-v1",
                },
            }
            result = {"protocolVersion": 1, "serverVersion": "fake", "pid": os.getpid(), "engine": info}
            send({"jsonrpc": "2.0", "id": rid, "result": result})
            continue
        if not initialized:
            send({"jsonrpc": "2.0", "id": rid, "error": {"code": -32002, "message": "not initialized"}})
            continue
        if method == "shutdown":
            send({"jsonrpc": "2.0", "id": rid, "result": None})
            break
        if params.get("prompt") == "hang":
            hanging.add(rid)
            continue
        if params.get("prompt") == "fail":
            err = {"code": -32000, "message": "boom", "data": {"hook": method, "kind": "RuntimeError: boom"}}
            send({"jsonrpc": "2.0", "id": rid, "error": err})
            continue
        if method == "compact":
            threading.Thread(target=compact, args=(rid, params), daemon=True).start()
            continue
        result = {"echo": method, "params": params, **REPLIES.get(method, {})}
        if method == "assemble":
            result.update(messages=params.get("messages") or [], estimatedTokens=1, systemPromptAddition=MARKER)
        send({"jsonrpc": "2.0", "id": rid, "result": result})


if __name__ == "__main__":
    main()
