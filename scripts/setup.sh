#!/usr/bin/env bash
# Set up hrbench on a fresh Debian machine with Python 3.11: system tools, a venv, the package.
# Idempotent: re-running only installs what is missing.
set -euo pipefail
cd "$(dirname "$0")/.."

missing=()
command -v bwrap >/dev/null || missing+=(bubblewrap)   # the local sandbox
command -v prlimit >/dev/null || missing+=(util-linux)  # memory/process limits inside it
if ((${#missing[@]})); then
  sudo=""; [ "$(id -u)" -eq 0 ] || sudo="sudo"
  echo "setup: installing ${missing[*]}" >&2
  $sudo apt-get update -qq && $sudo apt-get install -y -qq "${missing[@]}" >/dev/null
fi

# Verifiers run offline: pytest for Debian's python3, which every sandbox binds read-only (docs/tasks.md).
sudo_=""; [ "$(id -u)" -eq 0 ] || sudo_="sudo"
$sudo_ bash scripts/verifier_toolchain.sh >/dev/null

python=${PYTHON:-python3.11}
command -v "$python" >/dev/null || python=python3
if [ ! -x .venv/bin/python ]; then
  echo "setup: creating .venv with $("$python" --version)" >&2
  "$python" -m venv .venv
fi
# Quiet, but keep errors; pip's index warnings on this machine are noise. The package's dependencies
# (pyproject.toml) include great-expectations 1.x for the data-quality checks (docs/quality.md).
.venv/bin/python -m pip install -q -e ".[test]" 2> >(grep -v "^WARNING: Location" >&2)
echo "setup: ready (.venv/bin/hrbench)" >&2
