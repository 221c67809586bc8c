"""Print the lock file: every package requirements-dev.txt pulls in, at the exact version
installed in the environment that runs this script, with the SHA-256 of its file.

    .venv/bin/python scripts/lock.py > requirements.lock

pip resolves requirements-dev.txt (and the files it includes) again, without installing,
constrained to what is installed here (``pip freeze --all``), and reports the file it would
take for each package with its hash. Packages installed by hand beside them (a profiler, the
project itself) are left out. The hashes are those of the files pip takes on this platform
(Linux x86_64, CPython 3.11 on the project's machines); scripts/setup.sh installs with
``--require-hashes``, so a machine that needs other files needs a lock made on it.
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
from pathlib import Path

HEADER = """\
# Exact versions and file hashes resolved from requirements-dev.txt (and requirements.txt), for
# `pip install --require-hashes -r requirements-dev.txt -c requirements.lock` (scripts/setup.sh).
# Made by scripts/lock.py on Linux x86_64, CPython 3.11; to refresh it, see the README.
"""


def pip(*args: str) -> str:
    return subprocess.run(
        [sys.executable, "-m", "pip", *args], capture_output=True, text=True, check=True
    ).stdout


def resolved(requirements: Path) -> list[tuple[str, str, str]]:
    """(name, version, sha256) of each package pip takes for `requirements` here."""
    with tempfile.TemporaryDirectory() as folder:
        installed = Path(folder, "installed.txt")
        installed.write_text(pip("freeze", "--all", "--exclude-editable"))
        report = Path(folder, "report.json")
        pip(
            "install", "--quiet", "--dry-run", "--ignore-installed", "--report", str(report),
            "-r", str(requirements), "-c", str(installed),
        )  # fmt: skip
        items = json.loads(report.read_text())["install"]
    return sorted(
        (item["metadata"]["name"].lower(), item["metadata"]["version"], _sha256(item)) for item in items
    )


def _sha256(item: dict) -> str:
    hashes = item["download_info"].get("archive_info", {}).get("hashes", {})
    if "sha256" not in hashes:
        raise SystemExit(
            f"pip reported no sha256 for {item['metadata']['name']} ({item['download_info']['url']})"
        )
    return hashes["sha256"]


def main() -> None:
    root = Path(__file__).resolve().parent.parent
    sys.stdout.write(HEADER)
    for name, version, sha256 in resolved(root / "requirements-dev.txt"):
        sys.stdout.write(f"{name}=={version} --hash=sha256:{sha256}\n")


if __name__ == "__main__":
    main()
