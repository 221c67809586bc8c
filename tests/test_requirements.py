"""requirements.lock agrees with the requirement files it was made from, and those files name
every package the code imports."""

import ast
import sys
from importlib.metadata import packages_distributions
from pathlib import Path

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from packaging.version import Version

ROOT = Path(__file__).resolve().parent.parent
PRODUCT = {"app.py", "annotation", "app", "evaluation", "storage"}
"""What a user installs with requirements.txt; the rest (tests, bench, scripts) with
requirements-dev.txt."""
STANDALONE = sorted(path.parent for path in ROOT.glob("bench/*/requirements.txt"))
"""Tools that run in an environment of their own, named by their folder's requirements.txt
(the Mitsuba renderer of bench/independent_renders/): they import nothing of the project, and
their imports are checked against that file, not the project's."""


def requirements(name: str) -> list[Requirement]:
    """The requirements written in `name`, following ``-r`` includes."""
    found = []
    for line in (ROOT / name).read_text().splitlines():
        line = line.split("#", 1)[0].strip()
        if line.startswith("-r"):
            found += requirements(line[2:].strip())
        elif line:
            found.append(Requirement(line))
    return found


def locked() -> dict[str, tuple[Version, str]]:
    """Canonical name -> (version, the line's hash option) of each line of the lock."""
    pins = {}
    for line in (ROOT / "requirements.lock").read_text().splitlines():
        if line and not line.startswith("#"):
            pin, _, digest = line.partition(" ")
            name, version = pin.split("==")
            pins[canonicalize_name(name)] = (Version(version), digest)
    return pins


def test_every_requirement_is_locked_at_a_version_it_allows():
    versions = {name: version for name, (version, _) in locked().items()}
    wrong = {}
    for req in requirements("requirements-dev.txt"):
        version = versions.get(canonicalize_name(req.name))
        if version is None or not req.specifier.contains(version, prereleases=True):
            wrong[str(req)] = version
    assert wrong == {}, "run scripts/lock.py again (README, 'Two commands')"


def test_every_locked_file_has_a_sha256():
    pins = locked()
    assert len(pins) > 100
    assert {name for name, (_, digest) in pins.items() if not digest.startswith("--hash=sha256:")} == set()


def imported(path: Path) -> set[str]:
    """The top-level names `path` imports (``import a.b``, ``from a.b import c``), anywhere in it."""
    names = set()
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Import):
            names |= {alias.name.partition(".")[0] for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.level == 0:
            names.add(node.module.partition(".")[0])
    return names


def third_party_imports() -> dict[str, dict[str, set[str]]]:
    """``"product"``/``"dev"`` -> imported top-level name -> the files importing it; the
    repository's own packages (its top-level folders and modules) and the standard library
    left out."""
    found = {"product": {}, "dev": {}}
    tops = [top for top in ROOT.iterdir() if not top.name.startswith(".") and top.name != "data"]
    tops = [top for top in tops if top.is_dir() or top.suffix == ".py"]  # not the virtual environment
    left_out = {top.stem for top in tops} | set(sys.stdlib_module_names) | {"__future__"}
    for top in sorted(tops):
        for path in [top] if top.is_file() else sorted(top.rglob("*.py")):
            own = next((folder for folder in STANDALONE if folder in path.parents), None)
            kind = own.relative_to(ROOT).as_posix() if own else "product" if top.name in PRODUCT else "dev"
            for name in imported(path) - left_out:
                found.setdefault(kind, {}).setdefault(name, set()).add(path.relative_to(ROOT).as_posix())
    return found


def test_every_imported_package_is_named_in_the_requirements():
    """An import satisfied only because another package happens to bring its distribution
    (certifi through httpx, starlette through Gradio) breaks when that package drops it."""
    distributions = packages_distributions()
    named = {
        "product": {canonicalize_name(req.name) for req in requirements("requirements.txt")},
        "dev": {canonicalize_name(req.name) for req in requirements("requirements-dev.txt")},
    }
    for folder in STANDALONE:
        kind = folder.relative_to(ROOT).as_posix()
        named[kind] = {canonicalize_name(req.name) for req in requirements(f"{kind}/requirements.txt")}
    found = third_party_imports()
    assert {"torch", "gradio", "sqlite_utils"} <= set(found["product"]) and "pytest" in found["dev"]
    assert {"mitsuba", "numpy"} <= set(found["bench/independent_renders"]) and "mitsuba" not in found["dev"]
    missing = {}
    for kind, names in found.items():
        for name, files in names.items():
            # A standalone tool's packages need not be installed here: its import name stands in.
            dists = {canonicalize_name(d) for d in distributions.get(name, [name])}
            if not dists & named[kind]:
                missing[name] = (sorted(dists) or "not installed", sorted(files)[:3])
    assert missing == {}, "name these in requirements.txt (the app's code) or requirements-dev.txt"


def test_the_import_scan_sees_imports_inside_functions(tmp_path):
    source = tmp_path / "module.py"
    source.write_text("import os.path\nfrom . import sibling\n\ndef f():\n    from certifi import where\n")
    assert imported(source) == {"os", "certifi"}
