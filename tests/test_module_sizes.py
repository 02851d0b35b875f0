"""No module of the project is over 400 lines (migrations/ excepted: a migration is written once, never edited)."""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CHECKED = ("openclaw_ctx", "engines", "bench", "examples")
MAX_LINES = 400


def line_count(path: Path) -> int:
    with path.open(encoding="utf-8") as handle:
        return sum(1 for _ in handle)


def test_no_module_is_over_400_lines() -> None:
    sizes = {path: line_count(path) for folder in CHECKED for path in sorted((ROOT / folder).rglob("*.py"))}
    too_big = [f"{path.relative_to(ROOT)}: {lines}" for path, lines in sizes.items() if lines > MAX_LINES]
    assert sizes, "the checked folders hold modules"
    assert not too_big, f"{len(too_big)} modules over {MAX_LINES} lines; split them by concept:\n" + "\n".join(too_big)
