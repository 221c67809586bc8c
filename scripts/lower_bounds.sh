#!/usr/bin/env bash
# Install every requirement at its lower bound and run the fast tests against them.
# Usage: scripts/lower_bounds.sh [PYTEST_ARGS...]  (default: a few fast test modules, with
# those that pin the Gradio internals the app relies on: the page's config and scripts)
# `name>=X` (with or without a ceiling) becomes `name==X`; exact pins stay as they are. The
# environment is a fresh venv outside the work tree (LOWER_BOUNDS_VENV, default
# /tmp/colorconcept-lower-bounds), made anew on every run; .venv is not touched.
set -euo pipefail
cd "$(dirname "$0")/.."
venv="${LOWER_BOUNDS_VENV:-/tmp/colorconcept-lower-bounds}"
py="${PYTHON:-python3}"
fast_tests=(
    tests/test_doctests.py
    tests/evaluation/color/test_colorspace.py
    tests/evaluation/color/test_metrics.py
    tests/storage/test_db.py
    tests/evaluation/pipeline/test_transactions.py
    tests/evaluation/pipeline/test_imports.py
    tests/evaluation/pipeline/test_runs.py
    tests/app/test_common.py
    tests/app/test_stability.py
    tests/app/test_page_size.py
    tests/app/test_page_scripts.py
    tests/test_requirements.py
)

"$py" -m venv --clear "$venv"
pins="$venv/lower-bounds.txt"
sed -E -e 's/#.*//' -e '/^-r/d' -e 's/[[:space:]]+$//' -e '/^$/d' -e 's/>=([^,]+)(,.*)?$/==\1/' \
    requirements.txt requirements-dev.txt > "$pins"
echo "Installing the lower bounds into $venv:"
paste -sd' ' "$pins"
"$venv/bin/python" -m pip install -q --upgrade pip
"$venv/bin/python" -m pip install -q -r "$pins"
"$venv/bin/python" -m pytest -q -m "not browser" -p no:cacheprovider "${@:-${fast_tests[@]}}"
