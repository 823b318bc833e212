"""Protects the whole real-agent path: a study with an `llm` agent against a scripted
OpenAI-compatible endpoint runs through `hrbench run` and yields residual rows, with token
counts and ATIF trajectories on every trial row."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pandas as pd

from hrbench.harness.loop import CONFIRM_PROMPT
from hrbench.harness.trajectory import read_trajectory
from tests.agents.helpers import SOLVE
from tests.agents.scripted_server import reply
from tests.conftest import FIXTURES, stored_keys, stored_table

STUDY = Path(__file__).resolve().parent / "studies" / "llm_scripted.yaml"
PARTS = {"1": "make", "2": "double", "3": "report"}


def tiny_chain_player(body: dict) -> str:
    """A stateless model: solves each part it is given, except on one seed in four, where it
    writes a wrong answer for part 2 (so observed and expected success differ)."""
    messages = body["messages"]
    if "response_format" not in body and "Transcript:" in messages[-1]["content"]:
        return "summary of the work so far"
    last = messages[-1]["content"]
    if CONFIRM_PROMPT in last:
        return reply(complete=True)
    if "Here is part " in last:
        part = last.split("Here is part ", 1)[1][0]
        command = SOLVE[PARTS[part]]
        if part == "2" and body.get("seed", 0) % 4 == 0:
            command = "echo 0 > b.txt\n"
        return reply([command], complete=True)
    return reply(complete=True)


def test_llm_study_runs_end_to_end_and_yields_residual_rows(server, tmp_path):
    server.responder = tiny_chain_player
    study = tmp_path / "llm_scripted.yaml"
    study.write_text(STUDY.read_text().replace("REGISTRY", str(FIXTURES / "registry"))
                     .replace("BASE_URL", server.base_url))
    out = tmp_path / "out"
    proc = subprocess.run([sys.executable, "-m", "pipelines.cli", "run", str(study), "--out", str(out)],
                          capture_output=True, text=True, timeout=240)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]

    summary = json.loads((out / "summary.json").read_text())
    rows = [r for r in summary["residuals"] if r["agent"] == "scripted"]
    assert {r["scope"] for r in rows} >= {"task", "all"}
    assert all(r["p_expected"] is not None and r["p_observed"] is not None for r in rows)

    trials = pd.concat([stored_table(out, k) for t in ("checkpoint_trials", "baseline/natural_trials")
                        for k in stored_keys(out, f"tables/{t}")])
    assert len(trials) == 3 * 3 + 4
    assert set(trials["exit_reason"]) <= {"passed", "failed", "timeout", "turn_cap", "early_exit", "harness_error"}
    assert (trials["exit_reason"] != "harness_error").all(), trials["error"].dropna().tolist()[:2]
    assert (trials["tokens_in"] > 0).all() and (trials["cost_usd"] > 0).all()
    assert trials["tokens_in"].sum() == sum(u["prompt_tokens"] for u in server.responses)
    for path in trials["trajectory_path"]:
        assert read_trajectory(out / path)["schema_version"].startswith("ATIF")
    assert server.requests and all(r["model"] == "scripted-model" for r in server.requests)
