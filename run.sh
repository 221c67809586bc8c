#!/usr/bin/env bash
# Set up (once) and start ColorConcept Lab on http://127.0.0.1:7860.
# Extra arguments go to app.py, e.g. ./run.sh --db /tmp/study.sqlite --port 7861
set -euo pipefail
cd "$(dirname "$0")"
scripts/setup.sh requirements.txt
export GRADIO_ANALYTICS_ENABLED=False
exec .venv/bin/python app.py "$@"
