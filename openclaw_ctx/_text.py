"""Character classes shared by search and summaries."""

from __future__ import annotations

import re

__all__ = ["CJK_CHAR"]

# Han, kana, Hangul (with their compatibility and extension blocks) and half-width katakana.
CJK_CHAR = re.compile(
    "[\u1100-\u11ff\u2e80-\u2fdf\u3040-\u30ff\u3100-\u31ff\u3400-\u4dbf\u4e00-\u9fff"
    "\ua960-\ua97f\uac00-\ud7ff\uf900-\ufaff\uff66-\uff9f\U00020000-\U0002fa1f]"
)
