"""Protects the real path end to end: a study with the `llm` agent against a real model server
(SmolLM2-135M via llama-cpp-python, JSON mode) runs through `hrbench run`; every trial ends with a
recorded outcome and carries the token counts the server reported."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from hrbench.agents.check import check_agent
from hrbench.agents.specs import LLMAgentSpec
from hrbench.harness.trajectory import read_trajectory
from tests.conftest import FIXTURES, stored_keys, stored_table

HERE = Path(__file__).resolve().parent
REASONS = {"passed", "failed", "timeout", "turn_cap", "early_exit", "harness_error"}

pytestmark = pytest.mark.slow


def test_agents_check_pings_the_real_server(real_server):
    message = check_agent(LLMAgentSpec(id="smollm2", kind="llm", model="smollm2", base_url=real_server,
                                       api_key_env=None, max_output_tokens=16))
    assert "answered" in message and "0 tokens in" not in message


def test_real_model_study_ends_every_trial_with_an_outcome_and_real_tokens(real_server, tmp_path):
    study = tmp_path / "real_study.yaml"
    study.write_text((HERE / "real_study.yaml").read_text().replace("REGISTRY", str(FIXTURES / "registry"))
                     .replace("BASE_URL", real_server))
    out = tmp_path / "out"
    proc = subprocess.run([sys.executable, "-m", "pipelines.cli", "run", str(study), "--out", str(out)],
                          capture_output=True, text=True, timeout=1200)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]

    trials = pd.concat([stored_table(out, k) for t in ("checkpoint_trials", "baseline/natural_trials")
                        for k in stored_keys(out, f"tables/{t}")])
    assert len(trials) == 3 + 1
    assert set(trials["exit_reason"]) <= REASONS
    errors = trials[trials["exit_reason"] == "harness_error"]["error"].tolist()
    assert not errors, errors[:2]  # the endpoint answered every request
    assert (trials["tokens_in"] > 0).all() and (trials["tokens_out"] > 0).all()
    for _, row in trials.iterrows():
        traj = read_trajectory(out / row["trajectory_path"])
        steps = [s for s in traj["steps"] if s["source"] == "agent"]
        assert steps and all(s["metrics"]["prompt_tokens"] > 0 for s in steps)
        assert traj["final_metrics"]["total_prompt_tokens"] == row["tokens_in"]
    summary = json.loads((out / "summary.json").read_text())
    assert any(r["agent"] == "smollm2" for r in summary["residuals"])
