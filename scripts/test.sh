#!/usr/bin/env bash
# Set everything up, then run the default test suite and the slow suites.
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/setup.sh
.venv/bin/python -m pytest
# Slow suites (marked `slow`): run whenever they exist; exit code 5 = none collected.
.venv/bin/python -m pytest -m slow || [ $? -eq 5 ]
