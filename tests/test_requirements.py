"""requirements.lock agrees with the requirement files it was made from."""

from pathlib import Path

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from packaging.version import Version

ROOT = Path(__file__).resolve().parent.parent


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
