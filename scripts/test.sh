#!/usr/bin/env bash
# Set everything up, then run the default test suite and the slow suites.
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/setup.sh
.venv/bin/python -m pytest
# Slow suites (marked `slow`): the real-model suite needs a local model server's
# package (built from source once, ~9 minutes on 2 cores; later runs reuse it).
./scripts/real_model.sh >/dev/null
# The deployment suite needs PostgreSQL and Chromium (tests/deploy/test_postgres_deployment.py).
./scripts/deploy_deps.sh
.venv/bin/python -m pytest -m slow || [ $? -eq 5 ]
