#!/usr/bin/env bash
# Set up (once) and run the whole test suite. Extra arguments go to pytest.
set -euo pipefail
cd "$(dirname "$0")"
scripts/setup.sh requirements-dev.txt
scripts/ensure_chromium.sh
scripts/lint.sh
export GRADIO_ANALYTICS_ENABLED=False HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 HF_DATASETS_OFFLINE=1
# Two processes, one per core; a module stays in one process (its shared server, its fixtures),
# and modules go out in the order tests/conftest.py sets (heaviest first). The log ends with
# the 30 slowest steps, so that a slow run says where its time went.
exec .venv/bin/python -m pytest -n "${TEST_WORKERS:-2}" --dist loadfile --no-loadscope-reorder --durations=30 "$@"
