"""The examples in the docstrings run, one case per module that has any.

Modules are found by scanning the source for ``>>>``, so a new example is collected without
editing this file; pytest's ``--doctest-modules`` is not used because it would import every
module of the project (the app, the GPU models) to find the few that have examples.
"""

import doctest
import importlib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("annotation", "evaluation", "storage", "app")


def modules_with_examples() -> list[str]:
    """Dotted names of the modules under `PACKAGES` whose source holds a ``>>>`` line."""
    names = []
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            if any(line.lstrip().startswith(">>>") for line in path.read_text().splitlines()):
                parts = path.relative_to(ROOT).with_suffix("").parts
                names.append(".".join(parts[:-1] if parts[-1] == "__init__" else parts))
    return names


MODULES = modules_with_examples()


def test_the_scan_finds_the_modules_with_examples():
    assert "evaluation.color.colorspace" in MODULES
    assert "annotation.qc.stats" in MODULES
    assert len(MODULES) >= 13


@pytest.mark.parametrize("name", MODULES)
def test_the_examples_of_a_module_hold(name):
    module = importlib.import_module(name)
    result = doctest.testmod(module)
    assert result.attempted > 0, f"{name} has '>>>' lines but doctest found no example in it"
    assert result.failed == 0, f"{result.failed} of {result.attempted} examples in {name} failed (see above)"
