"""The curated public API (`openclaw_ctx.__all__`), the README's Python example, and `openclaw_ctx.testing`."""

from __future__ import annotations

import ast
import re
import subprocess
import sys
from pathlib import Path

import pytest

import openclaw_ctx
from openclaw_ctx import testing
from openclaw_ctx.errors import SummarizerError
from openclaw_ctx.messages import to_wire
from openclaw_ctx.summarize import SummaryRequest

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
INIT = ROOT / "openclaw_ctx" / "__init__.py"


def run_python(code: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    """Run `code` in a fresh interpreter, so nothing this test process imported hides a cycle."""
    return subprocess.run([sys.executable, "-c", code], cwd=cwd, capture_output=True, text=True, timeout=120)


def readme_example() -> tuple[str, str]:
    """The Python block of "Use it from Python" and the output block after it."""
    section = README.read_text(encoding="utf-8").split("## Use it from Python", 1)[1].split("\n## ", 1)[0]
    code = re.search(r"```python\n(.*?)```", section, re.S)
    output = re.search(r"```text\n(.*?)```", section, re.S)
    assert code and output, "the section has a ```python block and a ```text block with its output"
    return code.group(1), output.group(1)


def type_checking_imports() -> dict[str, set[str]]:
    """What the `if TYPE_CHECKING:` block of openclaw_ctx/__init__.py imports, by module."""
    tree = ast.parse(INIT.read_text(encoding="utf-8"))
    block = next(node for node in tree.body if isinstance(node, ast.If) and ast.unparse(node.test) == "TYPE_CHECKING")
    found: dict[str, set[str]] = {}
    for node in block.body:
        assert isinstance(node, ast.ImportFrom) and node.module
        found.setdefault(node.module, set()).update(alias.name for alias in node.names)
    return found


def is_submodule(name: str) -> bool:
    package = ROOT / "openclaw_ctx"
    return (package / name).is_dir() or (package / f"{name}.py").is_file()


# --- the README example -------------------------------------------------------------------------


def test_the_readme_python_example_runs_and_prints_what_the_readme_says(tmp_path: Path) -> None:
    code, expected = readme_example()
    done = run_python(code, tmp_path)
    assert done.returncode == 0, done.stderr
    assert done.stdout == expected
    assert (tmp_path / "agent.db").exists()


# --- the public names -----------------------------------------------------------------------------


def test_every_public_name_resolves_in_a_fresh_interpreter(tmp_path: Path) -> None:
    code = "import openclaw_ctx as o\nmissing = [n for n in o.__all__ if getattr(o, n, None) is None]\nprint(missing)"
    done = run_python(code, tmp_path)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"


@pytest.mark.parametrize("first", ["openclaw_ctx.host", "openclaw_ctx.store", "openclaw_ctx.cli.app", "engines.legacy"])
def test_no_import_cycle_whichever_module_is_imported_first(first: str, tmp_path: Path) -> None:
    done = run_python(f"import {first}\nfrom openclaw_ctx import *\nprint(Runtime.__name__, Store.__name__)", tmp_path)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["Runtime", "Store"]


def test_importing_the_package_loads_no_runtime(tmp_path: Path) -> None:
    # The CLI imports the package first; its startup must not pay for the runtime.
    code = "import sys, openclaw_ctx\nprint(sorted(m for m in sys.modules if m.startswith('openclaw_ctx')))"
    done = run_python(code, tmp_path)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "['openclaw_ctx', 'openclaw_ctx._version']"


def test_all_the_lazy_sources_and_the_type_checking_imports_name_the_same_things() -> None:
    sources = {module: set(names) for module, names in openclaw_ctx._SOURCES.items()}
    assert type_checking_imports() == sources
    assert set(openclaw_ctx.__all__) == set(openclaw_ctx._SOURCE_OF) | {"__version__"}
    assert openclaw_ctx.__all__ == sorted(openclaw_ctx.__all__)


def test_an_unknown_name_is_an_attribute_error() -> None:
    with pytest.raises(AttributeError, match="no_such_name"):
        _ = openclaw_ctx.no_such_name


def test_nothing_in_the_project_imports_the_package_face() -> None:
    offenders = []
    for path in [*ROOT.joinpath("openclaw_ctx").rglob("*.py"), *ROOT.joinpath("engines").rglob("*.py")]:
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import) and any(alias.name == "openclaw_ctx" for alias in node.names):
                offenders.append(str(path.relative_to(ROOT)))
            if isinstance(node, ast.ImportFrom) and node.module == "openclaw_ctx" and node.level == 0:
                # `from openclaw_ctx import registry` names a subpackage, not the public API.
                offenders += [f"{path.relative_to(ROOT)}: {a.name}" for a in node.names if not is_submodule(a.name)]
    assert offenders == []


# --- openclaw_ctx.testing ---------------------------------------------------------------------------


def test_message_factories_build_the_wire_shapes() -> None:
    call = testing.tool_call("c1", "read_file", {"path": "a.py"})
    assert to_wire(testing.user("hi", timestamp=5)) == {"role": "user", "content": "hi", "timestamp": 5}
    assert to_wire(testing.tool_use(call))["content"] == [
        {"type": "toolCall", "id": "c1", "name": "read_file", "arguments": {"path": "a.py"}}
    ]
    assert testing.tool_use(call).stop_reason == "toolUse"
    assert testing.reply("done").stop_reason == "stop" and testing.reply("done").model == "scripted"
    assert testing.assistant(None).content == []
    result = testing.tool_result("c1", "boom", is_error=True)
    assert (result.tool_call_id, result.tool_name, result.is_error) == ("c1", "bash", True)


async def test_fake_summarizer_answers_records_and_raises() -> None:
    request = SummaryRequest(kind="history", source_text="abc", target_tokens=10)
    fixed = testing.FakeSummarizer("short", model="m")
    out = await fixed.summarize(request)
    assert (out.text, out.summarizer, out.model) == ("short", "fake", "m")
    assert fixed.requests == [request]
    computed = testing.FakeSummarizer(lambda r: r.source_text.upper())
    assert (await computed.summarize(request)).text == "ABC"
    failing = testing.FakeSummarizer(error=SummarizerError("down"))
    with pytest.raises(SummarizerError):
        await failing.summarize(request)
    assert failing.requests == [request]
