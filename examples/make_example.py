"""Generate `examples/coding-session.jsonl`: a long, realistic OpenClaw (v3 JSONL) coding-agent session.

Deterministic: the same seed writes the same bytes, so ``python examples/make_example.py`` on any machine
reproduces the committed file exactly. The session is a developer and an agent working on a billing
service: reads, edits, test runs, stack traces, a few very large tool outputs, two screenshots, thinking
blocks, usage on every assistant message, non-ASCII text, model and thinking-level changes and labels.

`PLANTED_FACTS` are stated in the opening turns only and never repeated later; a context engine that
compacts the session should still be able to answer them at the end.
"""

from __future__ import annotations

import base64
import json
import random
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

if __package__ in (None, ""):  # run as a script (python examples/make_example.py): make `examples` importable
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from examples.example_content import (  # noqa: E402
    MODULES,
    NON_ASCII,
    WORDS,
    log_text,
    module_code,
    pytest_output,
    tiny_png,
    traceback_text,
)

__all__ = ["OUTPUT", "PLANTED_FACTS", "SEED", "build_lines", "main"]

SEED = 20260314
OUTPUT = Path(__file__).with_name("coding-session.jsonl")

# name -> exact text that appears once in the transcript (in the first dozen turns).
PLANTED_FACTS: dict[str, str] = {
    "staging_db_port": "54329",
    "deploy_key_id": "DK-7741-QZ",
    "tenant_uuid": "3f6c2a9e-8b1d-4e7a-9c55-0d2b7f41e8a3",
    "ledger_module": "src/billing/ledger_v2.py",
    "drift_error_code": "ERR_LEDGER_DRIFT_0042",
    "release_codename": "TANGERINE_HARBOR",
    "feature_flag": "billing.ledger_v2.dual_write",
    "oncall_channel": "#billing-oncall-emea",
}


class _Session:
    """Appends entries in order, keeping the tree links, clock and token accounting."""

    def __init__(self, rng: random.Random) -> None:
        self.rng = rng
        self.clock = datetime(2026, 3, 14, 9, 2, 11, 117000, tzinfo=UTC)
        self.lines: list[dict[str, Any]] = []
        self.parent: str | None = None
        self.ids: set[str] = set()
        self.context_chars = 9000  # system prompt and tool schemas
        self.call_no = 0
        self.model = "claude-sonnet-4-5"

    def _id(self) -> str:
        while True:
            value = f"{self.rng.getrandbits(32):08x}"
            if value not in self.ids:
                self.ids.add(value)
                return value

    def _stamp(self, seconds: float) -> tuple[str, int]:
        self.clock += timedelta(milliseconds=int(seconds * 1000) + self.rng.randrange(1, 900))
        return self.clock.strftime("%Y-%m-%dT%H:%M:%S.") + f"{self.clock.microsecond // 1000:03d}Z", int(
            self.clock.timestamp() * 1000
        )

    def entry(self, kind: str, seconds: float = 1.0, **fields: Any) -> str:
        entry_id = self._id()
        iso, _ = self._stamp(seconds)
        self.lines.append({"type": kind, "id": entry_id, "parentId": self.parent, "timestamp": iso, **fields})
        self.parent = entry_id
        return entry_id

    def message(self, message: dict[str, Any], seconds: float) -> str:
        entry_id = self.entry("message", seconds, message=message)
        message["timestamp"] = int(datetime.fromisoformat(self.lines[-1]["timestamp"]).timestamp() * 1000)
        self.context_chars += len(json.dumps(message, ensure_ascii=False))
        return entry_id

    def user(self, text: str, images: int = 0) -> None:
        content: str | list[dict[str, Any]] = text
        if images:
            content = [{"type": "text", "text": text}]
            content += [{"type": "image", "data": tiny_png(self.rng), "mimeType": "image/png"} for _ in range(images)]
        self.message({"role": "user", "content": content}, self.rng.uniform(20, 240))

    def assistant(self, thinking: str | None, text: str | None, calls: list[tuple[str, dict[str, Any]]]) -> list[str]:
        blocks: list[dict[str, Any]] = []
        if thinking:
            signature = base64.b64encode(self.rng.randbytes(48)).decode("ascii")
            blocks.append({"type": "thinking", "thinking": thinking, "thinkingSignature": signature})
        if text:
            blocks.append({"type": "text", "text": text})
        ids = []
        for name, arguments in calls:
            self.call_no += 1
            call_id = f"toolu_{self.rng.getrandbits(64):016x}{self.call_no:04d}"
            ids.append(call_id)
            blocks.append({"type": "toolCall", "id": call_id, "name": name, "arguments": arguments})
        out_chars = sum(len(json.dumps(b, ensure_ascii=False)) for b in blocks)
        prompt = self.context_chars // 4
        cached = int(prompt * self.rng.uniform(0.6, 0.92))
        output = max(12, out_chars // 4)
        usage: dict[str, Any] = {
            "input": prompt - cached,
            "output": output,
            "cacheRead": cached,
            "cacheWrite": self.rng.randrange(0, 900),
            "totalTokens": 0,
        }
        usage["totalTokens"] = usage["input"] + usage["output"] + usage["cacheRead"] + usage["cacheWrite"]
        cost = {
            "input": round(usage["input"] * 3e-6, 6),
            "output": round(output * 15e-6, 6),
            "cacheRead": round(cached * 0.3e-6, 6),
            "cacheWrite": round(usage["cacheWrite"] * 3.75e-6, 6),
        }
        cost["total"] = round(sum(cost.values()), 6)
        usage["cost"] = cost
        message = {
            "role": "assistant",
            "content": blocks,
            "api": "anthropic-messages",
            "provider": "anthropic",
            "model": self.model,
            "usage": usage,
            "stopReason": "toolUse" if calls else "stop",
        }
        self.message(message, self.rng.uniform(3, 40))
        return ids

    def result(self, call_id: str, name: str, text: str, *, error: bool = False, details: Any = None) -> None:
        message: dict[str, Any] = {
            "role": "toolResult",
            "toolCallId": call_id,
            "toolName": name,
            "content": [{"type": "text", "text": text}],
        }
        if details is not None:
            message["details"] = details
        message["isError"] = error
        self.message(message, self.rng.uniform(0.2, 25))


def _opening(s: _Session) -> None:
    """The first turns, where every planted fact is stated exactly once."""
    f, rng = PLANTED_FACTS, s.rng
    s.entry("session_info", name="ledger v2 migration")
    s.entry("model_change", provider="anthropic", modelId=s.model)
    s.entry("thinking_level_change", thinkingLevel="medium")
    s.user(
        f"We're migrating billing to the new ledger in {f['ledger_module']}. Start by reading it and the config. "
        f"Context: the release codename is {f['release_codename']}, ships behind the flag {f['feature_flag']}."
    )
    ids = s.assistant(
        "The user wants an overview first. Read the module and the staging config before changing anything.",
        "I'll read the ledger module and the staging config first.",
        [("read", {"path": f["ledger_module"]}), ("read", {"path": "config/staging.toml"})],
    )
    s.result(ids[0], "read", module_code(rng, f["ledger_module"], 14, 'DRIFT_TOLERANCE = Decimal("0.005")'))
    s.result(
        ids[1],
        "read",
        f'[database]\nhost = "pg-staging.internal"\nport = {f["staging_db_port"]}\nname = "billing"\n'
        f'pool_size = 12\n\n[tenants]\ndefault = "{f["tenant_uuid"]}"\n',
    )
    s.assistant(
        None,
        f"The staging database listens on port {f['staging_db_port']} and the default tenant is "
        f"`{f['tenant_uuid']}`. The ledger has 14 rounding helpers; all quantize half-even.",
        [],
    )
    s.entry("label", targetId=s.parent, label="config read")
    s.user(f"Nightly reconcile failed with {f['drift_error_code']}. Here's the stack from the job.")
    ids = s.assistant(
        "A drift error: compare ledger totals with the journal. Grep for the code first.",
        None,
        [("grep", {"pattern": f["drift_error_code"], "path": "src/"})],
    )
    s.result(
        ids[0], "grep", f'src/billing/reconcile.py:212:    raise LedgerDriftError("{f["drift_error_code"]}", delta)'
    )
    ids = s.assistant(
        None,
        "Let me run the reconcile job against staging to reproduce.",
        [("bash", {"command": "python -m billing.reconcile --env staging --dry-run", "timeout": 600})],
    )
    s.result(
        ids[0],
        "bash",
        traceback_text(rng, f"billing.reconcile.LedgerDriftError: {f['drift_error_code']} delta=0.01"),
        error=True,
        details={"exitCode": 1},
    )
    s.assistant(
        "Off-by-one-cent: rounding happens per line, not per total.",
        "Reproduced: the drift is one cent per posting batch because rounding happens per line instead of per total.",
        [],
    )
    s.user(
        f"Before you deploy anything: use deploy key {f['deploy_key_id']}, "
        f"and page {f['oncall_channel']} if staging breaks."
    )
    s.assistant(None, "Understood — I'll use that deploy key and notify the on-call channel if staging breaks.", [])


def _task(s: _Session, n: int) -> None:
    """One generated request → tool rounds → answer turn."""
    rng = s.rng
    module = rng.choice(MODULES)
    a, b = rng.sample(WORDS, 2)
    asks = [
        f"Add a test for {a} {b} in {module}.",
        f"Refactor the {a} handling in {module}; keep the API.",
        f"Why does {module} log a warning about {a}? Fix it.",
        "Run the full test suite and fix what fails.",
        f"Make `{a}_{b}` handle zero and negative amounts in {module}.",
    ]
    ask = asks[n % len(asks)]
    if n % 9 == 4:
        ask = NON_ASCII[(n // 9) % len(NON_ASCII)] + " (" + module + ")"
    s.user(ask, images=1 if n in (11, 37) else 0)
    rounds = rng.randrange(2, 7)
    for r in range(rounds):
        kind = rng.choice(["read", "read", "edit", "bash", "grep", "write"]) if r else "read"
        thinking = (
            f"Step {r + 1}: {' '.join(rng.sample(WORDS, 9))}. Check {module} before editing."
            if rng.random() < 0.7
            else None
        )
        if kind == "read":
            ids = s.assistant(thinking, None, [("read", {"path": module})])
            s.result(ids[0], "read", module_code(rng, module, rng.randrange(3, 36)))
        elif kind == "edit":
            old = '    return scaled.quantize(Decimal("0.01"), rounding=ROUND_HALF_EVEN)'
            new = old.replace("ROUND_HALF_EVEN", "ROUND_HALF_UP") if rng.random() < 0.5 else old + f"  # {a}"
            ids = s.assistant(
                thinking, f"Editing {module}.", [("edit", {"path": module, "oldText": old, "newText": new})]
            )
            s.result(ids[0], "edit", f"Successfully replaced text in {module}.", details={"diff": f"-{old}\n+{new}"})
        elif kind == "grep":
            ids = s.assistant(
                thinking, None, [("grep", {"pattern": f"def {a}_", "path": "src/billing", "glob": "*.py"})]
            )
            s.result(
                ids[0],
                "grep",
                "\n".join(
                    f"{rng.choice(MODULES)}:{rng.randrange(10, 400)}:def {a}_{rng.choice(WORDS)}_{k}("
                    for k in range(rng.randrange(1, 30))
                ),
            )
        elif kind == "write":
            path = f"tests/test_{Path(module).stem}_{a}.py"
            ids = s.assistant(
                thinking,
                f"Writing {path}.",
                [("write", {"path": path, "content": module_code(rng, path, rng.randrange(2, 8))})],
            )
            s.result(ids[0], "write", f"Successfully wrote {rng.randrange(400, 4000)} bytes to {path}")
        else:
            big = rng.random() < 0.22
            command = rng.choice(
                ["pytest -q", "pytest -vv tests/", "tail -n 800 /var/log/billing/staging.log", "ruff check src"]
            )
            ids = s.assistant(thinking, None, [("bash", {"command": command, "timeout": 300})])
            if "log" in command:
                out = log_text(rng, rng.randrange(170, 300) if big else rng.randrange(10, 40))
            elif "pytest" in command:
                fail = rng.random() < 0.35
                out = pytest_output(
                    rng, rng.randrange(320, 600) if big else rng.randrange(8, 40), ["x"] if fail else []
                )
            else:
                out = (
                    "All checks passed!"
                    if rng.random() < 0.6
                    else traceback_text(rng, "ImportError: cannot import name 'FxRate'")
                )
            s.result(
                ids[0], "bash", out, error="Traceback" in out, details={"exitCode": 1 if "Traceback" in out else 0}
            )
    done = f"Done with `{module}` ({rounds} steps). Notes: {', '.join(rng.sample(WORDS, 6))}."
    s.assistant(None, done, [])
    if n % 17 == 8:
        s.entry("label", targetId=s.parent, label=f"checkpoint {n}")
    if n == 30:
        s.model = "claude-opus-4-1"
        s.entry("model_change", provider="anthropic", modelId=s.model)
    if n in (22, 51):
        s.entry("thinking_level_change", thinkingLevel="high" if n == 22 else "low")
    if n == 45:
        s.entry("custom", customType="openclaw.usage-meter", data={"turns": n, "budgetUsd": 25})


def build_lines(seed: int = SEED, tasks: int = 72) -> list[str]:
    """The transcript's lines (header first), as JSON text."""
    rng = random.Random(seed)
    s = _Session(rng)
    header = {
        "type": "session",
        "version": 3,
        "id": "9b2f64d1-5c3e-4a8f-b7d2-1e0c9a6f3b58",
        "timestamp": "2026-03-14T09:02:11.117Z",
        "cwd": "/home/mira/src/billing-service",
    }
    _opening(s)
    for n in range(tasks):
        _task(s, n)
    s.user("Thanks. Summarise the state of the migration for the release notes.")
    s.assistant(None, "The ledger migration is ready for review; rounding now happens on totals.", [])
    return [json.dumps(line, ensure_ascii=False, separators=(",", ":")) for line in [header, *s.lines]]


def main(argv: list[str] | None = None) -> int:
    """Write the example transcript (or to the path given as the only argument)."""
    args = sys.argv[1:] if argv is None else argv
    target = Path(args[0]) if args else OUTPUT
    target.write_text("\n".join(build_lines()) + "\n", encoding="utf-8", newline="\n")
    print(f"wrote {target} ({target.stat().st_size:,} bytes)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
