"""Scans of the project's own source, for rules a test pins down (one transaction
discipline, refusals that cut what they quote)."""

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def matching_lines(pattern: re.Pattern, roots: tuple[str, ...]) -> list[str]:
    """``path:line`` of every line of the Python files under `roots` (folders of the
    checkout) where `pattern` is found."""
    return [
        f"{path.relative_to(ROOT)}:{number}"
        for root in roots
        for path in sorted((ROOT / root).rglob("*.py"))
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
        if pattern.search(line)
    ]
