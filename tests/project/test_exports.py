"""Every public module declares ``__all__``, and every name it lists exists."""

from __future__ import annotations

import importlib
import pkgutil
import types

import pytest

import engines
import openclaw_ctx


def public_modules() -> list[str]:
    names = ["openclaw_ctx", "engines"]
    for package in (openclaw_ctx, engines):
        for info in pkgutil.walk_packages(package.__path__, package.__name__ + "."):
            leaf = info.name.rsplit(".", 1)[-1]
            # __main__ runs the CLI when imported; private modules need no export list.
            if leaf == "__main__" or leaf.startswith("_"):
                continue
            names.append(info.name)
    return sorted(names)


MODULES = public_modules()


def test_the_walk_finds_the_core_modules() -> None:
    for name in (
        "openclaw_ctx.cli.app",
        "openclaw_ctx.inspect.sql",
        "openclaw_ctx.store.store",
        "openclaw_ctx.cli.commands.db",
    ):
        assert name in MODULES


@pytest.mark.parametrize("name", MODULES)
def test_module_exports_exist(name: str) -> None:
    module = importlib.import_module(name)
    exported = getattr(module, "__all__", None)
    if exported is None:
        # Only a bare package (nothing but submodules) may go without an export list.
        own = [
            attr
            for attr, value in vars(module).items()
            # `annotations` is the `from __future__ import annotations` feature flag
            if not attr.startswith("_") and attr != "annotations" and not isinstance(value, types.ModuleType)
        ]
        assert own == [], f"{name} defines public names {own} but has no __all__"
        return
    assert isinstance(exported, list | tuple), f"{name}.__all__ is a {type(exported).__name__}"
    assert len(set(exported)) == len(exported), f"{name}.__all__ lists a name twice"
    missing = [attr for attr in exported if not hasattr(module, attr)]
    assert missing == [], f"{name}.__all__ lists names it does not define: {missing}"


def test_package_version_is_exported() -> None:
    assert "__version__" in openclaw_ctx.__all__
    assert isinstance(openclaw_ctx.__version__, str) and openclaw_ctx.__version__
