#!/usr/bin/env bash
# Set up (once) and run the whole test suite. Extra arguments go to pytest.
set -euo pipefail
cd "$(dirname "$0")"
scripts/setup.sh requirements-dev.txt
scripts/ensure_chromium.sh
scripts/lint.sh
export GRADIO_ANALYTICS_ENABLED=False HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 HF_DATASETS_OFFLINE=1
# Tests keep their databases and files in a tmpfs where the machine has one (/dev/shm), a
# folder of this run's, removed when it ends (TEST_BASETEMP names another folder): the data is
# thrown away after each test, and on a disk the commits' fsyncs took a third of the time of
# the database-heavy modules (BENCHMARKS.md, "The suite's temporary folder"). No test checks
# what survives a power cut, which is all that an fsync buys.
basetemp=()
if [[ -n "${TEST_BASETEMP:-}" ]]; then
  basetemp=(--basetemp "$TEST_BASETEMP")
elif [[ -d /dev/shm && -w /dev/shm ]]; then
  # A short name: messages cut long paths in the middle, and Ray's socket paths have a limit
  run_tmp=$(mktemp -d /dev/shm/cct.XXXXXX)
  trap 'rm -rf "$run_tmp"' EXIT
  trap 'exit 143' TERM
  trap 'exit 130' INT
  basetemp=(--basetemp "$run_tmp")
fi
# Two processes, one per core; a module stays in one process (its shared server, its fixtures),
# and modules go out in the order tests/conftest.py sets (heaviest first). The log ends with
# the 30 slowest steps, so that a slow run says where its time went.
.venv/bin/python -m pytest -n "${TEST_WORKERS:-2}" --dist loadfile --no-loadscope-reorder --durations=30 "${basetemp[@]}" "$@"
