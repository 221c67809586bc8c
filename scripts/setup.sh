#!/usr/bin/env bash
# Create .venv and install a requirements file into it, once, at the exact versions and
# file hashes of requirements.lock (a constraints file: see the README to refresh it).
# Usage: scripts/setup.sh REQUIREMENTS_FILE
# A second run with unchanged requirements and lock installs nothing: the hash of every
# requirements file and of the lock is stamped into .venv after a successful install.
set -euo pipefail
cd "$(dirname "$0")/.."
req="${1:-requirements.txt}"
py="${PYTHON:-python3}"

if ! "$py" -c 'import sys; sys.exit(sys.version_info < (3, 11))' 2>/dev/null; then
    echo "ColorConcept Lab needs Python 3.11 or newer; '$py' is $("$py" --version 2>&1)." >&2
    echo "Set PYTHON=/path/to/python3.11 and run again." >&2
    exit 1
fi
if [ ! -x .venv/bin/python ]; then
    echo "Creating virtual environment in .venv"
    "$py" -m venv .venv
fi
stamp=".venv/.installed-$(basename "$req").sha256"
want=$(cat requirements*.txt requirements.lock | sha256sum | cut -d' ' -f1)
# requirements-dev.txt includes requirements.txt, so its stamp covers both.
for s in "$stamp" .venv/.installed-requirements-dev.txt.sha256; do
    if [ -f "$s" ] && [ "$(cat "$s")" = "$want" ]; then
        exit 0
    fi
done
echo "Installing $req into .venv (first run: a few minutes)"
.venv/bin/python -m pip install -q --upgrade pip
.venv/bin/python -m pip install -q --require-hashes -r "$req" -c requirements.lock
echo "$want" > "$stamp"
