"""No module outside migrations/ grows past 400 lines: a big module is a package waiting to be found."""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
LIMIT = 400
SOURCE_TREES = ("openclaw_ctx", "engines", "bench", "examples")


def test_every_module_is_at_most_400_lines() -> None:
    too_big = {
        str(path.relative_to(ROOT)): n
        for tree in SOURCE_TREES
        for path in sorted((ROOT / tree).rglob("*.py"))
        if (n := len(path.read_text(encoding="utf-8").splitlines())) > LIMIT
    }
    assert too_big == {}, f"modules over {LIMIT} lines (split them by concept): {too_big}"


def test_the_trees_it_guards_exist() -> None:
    for tree in SOURCE_TREES:
        assert any((ROOT / tree).rglob("*.py")), tree
