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
# The docker backend's suite (tests/docker) runs against podman's Docker API (no Docker engine needed),
# set up here: idempotent, the first run debootstraps a base image (~1.5 minutes), later ones take
# well under a second.
./scripts/podman.sh setup
# Suites of tens of minutes (marked `long`, e.g. the four-condition interventions study) run only
# when asked: HRBENCH_LONG=1 ./scripts/test.sh
if [ "${HRBENCH_LONG:-0}" = 1 ]; then marks="slow"; else marks="slow and not long"; fi
.venv/bin/python -m pytest -m "$marks" || [ $? -eq 5 ]
