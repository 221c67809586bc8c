"""Print the lock file: the exact version of every package a requirements file pulls in.

Run it with the Python of the environment to lock; it reads what is installed there, walks
the requirements of `requirements-dev.txt` (and the files it includes) with their extras and
environment markers, and prints ``name==version`` for each package reached, sorted by name.
Packages installed by hand beside them (a profiler, the project itself) are left out, and so
is pip, which installs the rest and is upgraded by scripts/setup.sh before it does.

    .venv/bin/python scripts/lock.py > requirements.lock
"""

from __future__ import annotations

import sys
from importlib import metadata
from pathlib import Path

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

HEADER = """\
# Exact versions resolved from requirements-dev.txt (and requirements.txt), for
# `pip install -r requirements-dev.txt -c requirements.lock` (scripts/setup.sh does this).
# Made by scripts/lock.py; to refresh it, see the README ("Two commands").
"""


def top_level(path: Path) -> list[Requirement]:
    """The requirements written in `path`, following ``-r`` includes."""
    found = []
    for line in path.read_text().splitlines():
        line = line.split("#", 1)[0].strip()
        if line.startswith("-r"):
            found += top_level(path.parent / line[2:].strip())
        elif line:
            found.append(Requirement(line))
    return found


def closure(roots: list[Requirement]) -> dict[str, str]:
    """Canonical name -> installed version of `roots` and everything they require here."""
    versions: dict[str, str] = {}
    todo = [(req, frozenset(req.extras)) for req in roots]
    seen: set[tuple[str, frozenset]] = set()
    while todo:
        req, extras = todo.pop()
        name = canonicalize_name(req.name)
        if (name, extras) in seen:
            continue
        seen.add((name, extras))
        dist = metadata.distribution(req.name)
        versions[name] = dist.version
        for text in dist.requires or []:
            child = Requirement(text)
            wanted = child.marker is None or any(
                child.marker.evaluate({"extra": extra}) for extra in (extras or {""})
            )
            if wanted:
                todo.append((child, frozenset(child.extras)))
    return versions


def main() -> None:
    root = Path(__file__).resolve().parent.parent
    versions = closure(top_level(root / "requirements-dev.txt"))
    sys.stdout.write(HEADER)
    for name in sorted(set(versions) - {"pip"}):
        sys.stdout.write(f"{name}=={versions[name]}\n")


if __name__ == "__main__":
    main()
