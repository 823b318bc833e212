#!/usr/bin/env bash
# Set everything up, then run the default test suite and the slow suites.
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/setup.sh
.venv/bin/python -m pytest
# The same default suite with every store on moto's S3 server on loopback (docs/storage.md): a
# session fixture starts it once, each output directory gets its own prefix in one bucket.
HRBENCH_STORE=s3 .venv/bin/python -m pytest
# Slow suites (marked `slow`): the real-model suite needs a local model server's
# package (built from source once, ~9 minutes on 2 cores; later runs reuse it).
./scripts/real_model.sh >/dev/null
# The deployment suite needs PostgreSQL and Chromium (tests/deploy/test_postgres_deployment.py).
./scripts/deploy_deps.sh
# The docker backend's suite runs against podman's Docker API (no Docker engine needed). It audits every
# built-in task on docker (~1 minute each), which would take CI's budget past its limit next to the rest,
# so it runs only when asked: HRBENCH_DOCKER=1 ./scripts/test.sh (podman is set up then; idempotent,
# the first run debootstraps a base image, ~1.5 minutes).
ignore=(--ignore=tests/docker)
if [ "${HRBENCH_DOCKER:-0}" = 1 ]; then ./scripts/podman.sh setup; ignore=(); fi
# Suites of tens of minutes (marked `long`, e.g. the four-condition interventions study) run only
# when asked: HRBENCH_LONG=1 ./scripts/test.sh
if [ "${HRBENCH_LONG:-0}" = 1 ]; then marks="slow"; else marks="slow and not long"; fi
.venv/bin/python -m pytest -m "$marks" "${ignore[@]}" || [ $? -eq 5 ]
