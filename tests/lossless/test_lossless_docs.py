"""docs/lossless.md stays in step with the code: config keys, defaults, env names, and the tools' arguments."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from engines.lossless.config import _ACCEPTED_UNUSED, _ALIASES, LosslessConfig, _env_name
from engines.lossless.tools import SCHEMAS

DOC = Path(__file__).resolve().parents[2] / "docs" / "lossless.md"
TEXT = DOC.read_text(encoding="utf-8")
FIELDS = sorted(LosslessConfig.model_fields.items())


def _table_row(first_cell: str) -> list[str]:
    """The cells of the table row whose first cell is `first_cell` (exactly one such row)."""
    rows = [line for line in TEXT.splitlines() if line.startswith(f"| {first_cell} |")]
    assert len(rows) == 1, f"{first_cell}: {len(rows)} table rows in {DOC.name}"
    return [cell.strip() for cell in re.split(r"(?<!\\)\|", rows[0])[1:-1]]


def _shown(value: Any) -> str:
    """A default as the doc's table writes it."""
    if value is None:
        return "unset"
    if isinstance(value, bool):
        return f"`{str(value).lower()}`"
    if isinstance(value, str):
        return f'`"{value}"`'
    if isinstance(value, list):
        return "`[]`" if not value else f"`{value!r}`"
    return f"`{value}`"


@pytest.mark.parametrize(("name", "field"), FIELDS, ids=[f.alias or n for n, f in FIELDS])
def test_every_config_field_is_documented_with_its_default_and_env_name(name: str, field: Any) -> None:
    key = field.alias
    assert key, f"{name} has no camelCase alias"
    assert f"`{key}`" in TEXT, f"{key} is not documented in {DOC.name}"
    cells = _table_row(f"`{key}`")
    default = field.default_factory() if field.default_factory is not None else field.default
    assert cells[1] == _shown(default), f"{key}: the doc says {cells[1]}, the code {default!r}"
    assert cells[2] == f"`{_env_name(key)}`", f"{key}: environment variable"
    assert cells[3], f"{key}: no meaning given"


def test_the_config_table_lists_only_real_keys() -> None:
    keys = {f.alias for _, f in FIELDS}
    table = re.findall(r"^\| `([a-zA-Z]+)` \| .*`LCM_", TEXT, flags=re.MULTILINE)
    assert sorted(table) == sorted(keys)


def test_accepted_but_unused_keys_and_aliases_are_documented() -> None:
    missing = sorted(k for k in _ACCEPTED_UNUSED if f"`{k}`" not in TEXT)
    assert not missing, f"accepted-but-unused keys missing from {DOC.name}: {missing}"
    for old, new in _ALIASES.items():
        assert f"`{old}`" in TEXT and f"`{_env_name(old)}`" in TEXT, old
        assert f"`{new}`" in TEXT, new


@pytest.mark.parametrize("tool", sorted(SCHEMAS))
def test_every_tool_argument_is_documented(tool: str) -> None:
    section = TEXT.split(f"### `{tool}`", 1)
    assert len(section) == 2, f"no section for {tool}"
    body = section[1].split("\n### ", 1)[0]
    schema = SCHEMAS[tool]
    for arg, spec in schema["properties"].items():
        rows = [line for line in body.splitlines() if line.startswith("| ") and f"`{arg}`" in line.split("|")[1]]
        assert rows, f"{tool}.{arg} is not in its table"
        cells = [c.strip() for c in re.split(r"(?<!\\)\|", rows[0])[1:-1]]
        if "default" in spec:
            assert cells[2] == f"`{str(spec['default']).lower()}`" or cells[2] == f"`{spec['default']}`", (
                f"{tool}.{arg}: the doc's default {cells[2]} is not {spec['default']!r}"
            )
        if arg in schema.get("required", []):
            assert "required" in cells[1], f"{tool}.{arg} is required"
