#!/usr/bin/env bash
# Formatting and lint, as configured in pyproject.toml. ./test.sh runs it first.
# To fix what it reports: .venv/bin/ruff format . && .venv/bin/ruff check --fix .
set -euo pipefail
cd "$(dirname "$0")/.."
.venv/bin/ruff format --check --quiet . || {
    echo "ruff format: the files above need formatting; run .venv/bin/ruff format ." >&2
    exit 1
}
.venv/bin/ruff check --quiet .
