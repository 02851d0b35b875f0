"""The raw material of the example session: module names, words, code, test runs, tracebacks, logs.

Every generator takes the session's seeded `random.Random`, so the example stays byte-for-byte reproducible.
"""

from __future__ import annotations

import base64
import random
import struct
import zlib
from pathlib import Path

__all__ = ["MODULES", "NON_ASCII", "WORDS", "log_text", "module_code", "pytest_output", "tiny_png", "traceback_text"]

MODULES = [
    "src/billing/fx.py",
    "src/billing/invoice.py",
    "src/billing/tax.py",
    "src/billing/api/routes.py",
    "src/billing/api/schemas.py",
    "src/billing/reconcile.py",
    "src/billing/storage/postgres.py",
    "src/billing/webhooks.py",
]
WORDS = (
    "amount balance currency entry posting account journal rate rounding cents period tenant invoice "
    "refund credit debit snapshot cursor batch window ledger drift total fee".split()
)
NON_ASCII = [
    "请帮我看看汇率换算的舍入是不是有问题 🙏",
    "Le client « Café Müller » voit un solde négatif — peux-tu vérifier ?",
    "テストが通らない…もう一度見てくれる？",
    "Ünïcödé in invoice PDFs renders as tofu □□ — ✅ fix please",
    "Спасибо! Теперь добавь тест на нулевую сумму.",
]


def tiny_png(rng: random.Random, size: int = 12) -> str:
    """A valid PNG screenshot stand-in (random RGB pixels), base64."""
    rows = b"".join(b"\x00" + bytes(rng.randrange(256) for _ in range(size * 3)) for _ in range(size))

    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF)

    ihdr = struct.pack(">IIBBBBB", size, size, 8, 2, 0, 0, 0)
    png = b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", ihdr) + chunk(b"IDAT", zlib.compress(rows, 9)) + chunk(b"IEND", b"")
    return base64.b64encode(png).decode("ascii")


def module_code(rng: random.Random, module: str, functions: int, extra: str = "") -> str:
    stem = Path(module).stem
    lines = [
        f'"""{stem.replace("_", " ").title()}: part of the billing service."""',
        "",
        "from __future__ import annotations",
    ]
    lines += ["", "from decimal import ROUND_HALF_EVEN, Decimal", "", extra] if extra else [""]
    for n in range(functions):
        a, b, c = rng.sample(WORDS, 3)
        lines += [
            "",
            f"def {a}_{b}_{n}({a}: Decimal, {c}: int = {rng.randrange(2, 99)}) -> Decimal:",
            f'    """Return the {a} {b} for one {c}, rounded half-even to cents."""',
            f"    if {a} < 0:",
            f'        raise ValueError("negative {a}: " + str({a}))',
            f"    scaled = {a} * Decimal({c}) / Decimal({rng.randrange(100, 10000)})",
            '    return scaled.quantize(Decimal("0.01"), rounding=ROUND_HALF_EVEN)',
        ]
    return "\n".join(lines) + "\n"


def pytest_output(rng: random.Random, count: int, failing: list[str]) -> str:
    lines = [
        "============================= test session starts ==============================",
        "platform linux -- Python 3.12.3, pytest-8.3.4, pluggy-1.5.0",
        f"collected {count} items",
        "",
    ]
    for n in range(count):
        name = f"tests/test_{rng.choice(WORDS)}.py::test_{rng.choice(WORDS)}_{rng.choice(WORDS)}_{n}"
        lines.append(f"{name} {'FAILED' if name in failing or (failing and n == count // 2) else 'PASSED'}")
    if failing:
        lines += [
            "",
            "=================================== FAILURES ===================================",
            "____________________________ test_posting_balances _____________________________",
            "",
            "    def test_posting_balances(ledger):",
            '>       assert ledger.balance("acct-17") == Decimal("120.00")',
            "E       AssertionError: assert Decimal('119.99') == Decimal('120.00')",
            "",
            "tests/test_ledger_v2.py:88: AssertionError",
        ]
    passed = count - (1 if failing else 0)
    rule = "=" * 24
    lines.append(f"{rule} {passed} passed{', 1 failed' if failing else ''} in {rng.uniform(1, 30):.2f}s {rule}")
    return "\n".join(lines)


def traceback_text(rng: random.Random, error: str) -> str:
    frames = [
        f'  File "/srv/app/{rng.choice(MODULES)}", line {rng.randrange(20, 400)}, '
        f"in {rng.choice(WORDS)}_{rng.choice(WORDS)}\n"
        f"    {rng.choice(WORDS)} = {rng.choice(WORDS)}.{rng.choice(WORDS)}({rng.choice(WORDS)})"
        for _ in range(rng.randrange(4, 9))
    ]
    return "Traceback (most recent call last):\n" + "\n".join(frames) + f"\n{error}"


def log_text(rng: random.Random, lines: int) -> str:
    out = []
    for n in range(lines):
        level = rng.choices(["INFO", "DEBUG", "WARN", "ERROR"], [60, 25, 10, 5])[0]
        out.append(
            f"2026-03-13T22:{n // 60 % 60:02d}:{n % 60:02d}.{rng.randrange(1000):03d}Z {level:5} "
            f"billing.{rng.choice(WORDS)} tenant={rng.randrange(1000, 9999)} "
            f"{rng.choice(WORDS)}={rng.randrange(10**6)} {' '.join(rng.sample(WORDS, 4))}"
        )
    return "\n".join(out)
