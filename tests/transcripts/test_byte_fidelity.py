"""Export writes every imported line back byte for byte: the header, every entry, every message (key
order, JS number spellings, escapes and spacing as the file had them), through the real CLI."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from host_agent_store import FIXTURE
from openclaw_host.transcript_cases import named_cases, random_case, v1_case
from typer.testing import Result

STRESS = range(40)

# A file as a JavaScript writer leaves it: message keys in its own order, numbers JSON.stringify spells
# differently from Python (0.00008939999999999999, 1e+21, 5e-7), escapes where another writer used them.
JS_STYLE = [
    '{"type":"session","version":3,"id":"js-1","timestamp":"2026-01-01T00:00:00.000Z","cwd":"/w"}',
    '{"type":"message","id":"u1","parentId":null,"timestamp":"2026-01-01T00:00:01.000Z",'
    '"message":{"content":"caf\\u00e9 \\ud83e\\udd80 ok","timestamp":1767225601000,"role":"user"}}',
    '{"type":"message","id":"a1","parentId":"u1","timestamp":"2026-01-01T00:00:02.000Z",'
    '"message":{"role":"assistant","content":[{"type":"text","text":"hi"}],"api":"openai-completions",'
    '"provider":"p","model":"m","usage":{"input":1200,"output":5,"cacheRead":0,"cacheWrite":0,'
    '"totalTokens":1205,"cost":{"input":0.00008939999999999999,"output":5e-7,"cacheRead":0,'
    '"cacheWrite":0,"total":1e+21}},"stopReason":"stop","timestamp":1767225602000,"responseId":"r-1"}}',
    '{"type":"custom","customType":"x","data":{"v":1.0,"w":[]},"id":"c1","parentId":"a1",'
    '"timestamp":"2026-01-01T00:00:03.000Z"}',
    '{"type":"message","id":"u2","parentId":"c1","timestamp":"2026-01-01T00:00:04.000Z",'
    '"message":{"role":"user","content":[{"type":"text","text":"next"}],"timestamp":1767225604000}}',
]


def _compact(line: str) -> str:
    return json.dumps(json.loads(line), ensure_ascii=False, separators=(",", ":"))


def _corpus(root: Path) -> list[Path]:
    """Each file twice: as the case writer spaces it (Python's json.dumps) and compact as OpenClaw does."""
    root.mkdir()
    files = [FIXTURE, v1_case(root / "v1.jsonl")]
    files += [w.write(root / f"{name}.jsonl") for name, w in named_cases().items()]
    files += [random_case(seed).write(root / f"stress-{seed}.jsonl") for seed in STRESS]
    compact = []
    for file in files[1:]:
        lines = file.read_text(encoding="utf-8").splitlines()
        header = json.loads(lines[0])
        header["id"] = f"{header['id']}-compact"
        target = root / f"{file.stem}-compact.jsonl"
        body = [json.dumps(header, separators=(",", ":"))] + [_compact(line) for line in lines[1:] if line.strip()]
        target.write_text("".join(line + "\n" for line in body), encoding="utf-8")
        compact.append(target)
    (root / "js-style.jsonl").write_text("".join(line + "\n" for line in JS_STYLE), encoding="utf-8")
    return [*files, *compact, root / "js-style.jsonl"]


@pytest.fixture(scope="module")
def exported(tmp_path_factory: pytest.TempPathFactory, cli_invoke_module: Callable[..., Result]) -> dict[str, Any]:
    root = tmp_path_factory.mktemp("fidelity")
    files = _corpus(root / "in")
    db = root / "ctx.db"
    result = cli_invoke_module("--db", str(db), "import", *map(str, files), "--json")
    report = json.loads(result.stdout)
    skipped = {tuple(s.rsplit(":", 2)[:2]) for s in report["skipped"]}
    out: dict[str, Any] = {}
    con = sqlite3.connect(db)
    by_file = dict(con.execute("SELECT session_file, session_id FROM sessions").fetchall())
    con.close()
    for file in files:
        session_id = by_file[str(file.resolve())]
        target = root / "out" / f"{file.stem}.jsonl"
        done = cli_invoke_module("--db", str(db), "export", "--session", session_id, "--out", str(target))
        assert done.exit_code == 0, done.output
        lines = file.read_text(encoding="utf-8").splitlines()
        kept = [
            line for n, line in enumerate(lines, 1) if line.strip() and (str(file.resolve()), str(n)) not in skipped
        ]
        out[file.name] = (kept, target.read_text(encoding="utf-8").splitlines())
    return out


@pytest.fixture(scope="module")
def cli_invoke_module() -> Callable[..., Result]:
    from typer.testing import CliRunner

    import openclaw_ctx.cli.app as cli

    if not any(c.name == "export" for c in cli.app.registered_commands):
        cli._load_commands()
    return lambda *args: CliRunner().invoke(cli.app, list(args))


def _version(lines: list[str]) -> int:
    return int(json.loads(lines[0]).get("version", 1))


def test_every_imported_line_is_written_back_byte_for_byte(exported: dict[str, Any]) -> None:
    assert len(exported) == 2 * (len(named_cases()) + len(STRESS) + 1) + 2
    lines = 0
    for name, (kept, written) in exported.items():
        if _version(kept) < 3:
            continue  # upgraded on import: see the next test
        assert written[: len(kept)] == kept, name
        lines += len(kept)
    assert lines > 3000


def test_an_upgraded_file_exports_upgraded_and_imports_back_as_itself(
    tmp_path: Path, cli_invoke_module: Callable[..., Result]
) -> None:
    # A v1 file with a blank and a malformed line: the ids its upgrade derives from line numbers must
    # survive export (a v3 file with those ids), or a re-import would fork the branch.
    lines = v1_case(tmp_path / "v1.jsonl").read_text(encoding="utf-8").splitlines()
    source = tmp_path / "v1-gaps.jsonl"
    source.write_text("\n".join([lines[0], "", *lines[1:3], "{not json", *lines[3:]]) + "\n", encoding="utf-8")
    db = tmp_path / "ctx.db"
    assert cli_invoke_module("--db", str(db), "import", str(source)).exit_code == 2  # the malformed line
    out = tmp_path / "out.jsonl"
    assert cli_invoke_module("--db", str(db), "export", "--session", "v1", "--out", str(out)).exit_code == 0
    written = out.read_text(encoding="utf-8").splitlines()
    assert _version(written) == 3 and all("id" in json.loads(line) for line in written[1:])
    again = cli_invoke_module("--db", str(db), "import", str(out), "--json")
    report = json.loads(again.stdout)
    assert again.exit_code == 0 and report["messages_new"] == 0 and report["entries_new"] == 0, report


def test_javascript_number_spellings_and_key_order_survive(exported: dict[str, Any]) -> None:
    kept, written = exported["js-style.jsonl"]
    assert written[:5] == JS_STYLE
    assert "0.00008939999999999999" in written[2] and "1e+21" in written[2]
