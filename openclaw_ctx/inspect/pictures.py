"""Pictures for people: SVG through Graphviz `dot`, and terminal sparklines.

Graphviz is an outside program, not a Python dependency: :func:`render_svg` looks for `dot` on the
PATH and says how to install it when it is missing.
"""

from __future__ import annotations

import asyncio
import shutil
from collections.abc import Sequence

from openclaw_ctx.errors import MissingDependencyError, OpenClawCtxError

__all__ = ["SPARK_BARS", "render_svg", "sparkline"]

SPARK_BARS = "▁▂▃▄▅▆▇█"
_INSTALL_HINT = (
    "Graphviz `dot` is not installed or not on PATH; install Graphviz (Debian/Ubuntu: "
    "`apt-get install graphviz`, macOS: `brew install graphviz`), or use --format dot and render it elsewhere"
)


async def render_svg(dot_source: str, *, dot: str | None = None) -> str:
    """Render Graphviz DOT source to SVG by piping it through `dot -Tsvg`.

    Args:
        dot_source: The graph in DOT.
        dot: Path of the `dot` program (default: found on PATH).

    Raises:
        MissingDependencyError: `dot` is not installed.
        OpenClawCtxError: `dot` rejected the graph (its message is included).
    """
    program = dot or shutil.which("dot")
    if program is None:
        raise MissingDependencyError(_INSTALL_HINT)
    try:
        proc = await asyncio.create_subprocess_exec(
            program,
            "-Tsvg",
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
        )
    except OSError as exc:
        raise MissingDependencyError(f"{_INSTALL_HINT} ({program}: {exc.strerror})") from exc
    out, err = await proc.communicate(dot_source.encode("utf-8"))
    if proc.returncode != 0:
        raise OpenClawCtxError(f"Graphviz dot failed (exit {proc.returncode}): {err.decode(errors='replace').strip()}")
    return out.decode("utf-8")


def sparkline(values: Sequence[float], *, width: int | None = None) -> str:
    """A one-line bar chart of `values` (scaled from 0 to their maximum).

    With `width` smaller than the number of values, consecutive values are grouped and each bar
    shows its group's maximum, so a peak is never averaged away.
    """
    if not values:
        return ""
    points = list(values)
    if width is not None and 0 < width < len(points):
        size = len(points) / width
        points = [max(points[int(i * size) : max(int(i * size) + 1, int((i + 1) * size))]) for i in range(width)]
    top = max(points)
    if top <= 0:
        return SPARK_BARS[0] * len(points)
    last = len(SPARK_BARS) - 1
    return "".join(SPARK_BARS[min(last, max(0, round(v / top * last)))] for v in points)
