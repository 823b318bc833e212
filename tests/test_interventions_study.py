"""Protects the interventions study (long: ~4.5x the demo's trials, run with HRBENCH_LONG=1): known truth
is recovered under every condition, and the interventions say what moves the residual (issue 9)."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest
from tests.conftest import stored_keys, stored_table

REPO = Path(__file__).resolve().parent.parent


def _covers(row: dict, value: float) -> bool:
    return row["ci_low"] <= value <= row["ci_high"]


@pytest.mark.slow
@pytest.mark.long
def test_interventions_study_recovers_the_known_residuals_and_what_moves_them(tmp_path: Path):
    out = tmp_path / "interventions"
    start = time.monotonic()
    result = subprocess.run([sys.executable, "-m", "pipelines.cli", "run", str(REPO / "examples" / "studies" / "interventions.yaml"),
                             "--out", str(out)], cwd=REPO,
                            capture_output=True, text=True, timeout=5400)
    elapsed = time.monotonic() - start
    assert result.returncode == 0, result.stderr[-3000:]
    print(f"interventions study wall time: {elapsed:.0f} s")  # measured, not asserted: see benchmarks/

    prereg = json.loads((out / "preregistration.json").read_text())["prereg_sha256"]
    for table in stored_keys(out, "tables"):
        assert set(stored_table(out, table)["prereg_sha256"]) == {prereg}, table
    summary = json.loads((out / "summary.json").read_text())
    assert summary["prereg_sha256"] == prereg and (out / "report.html").is_file()
    overall = {(r["agent"], r["condition"]): r for r in summary["residuals"] if r["scope"] == "all"}
    contrast = {(r["agent"], r["condition"]): r for r in summary["contrasts"] if r["scope"] == "all"}
    verdict = {r["agent"]: r for r in summary["sensitivity"] if r["scope"] == "all"}

    # The existing acceptance: the null agent covers 0, a degrading agent excludes 0 and covers its truth.
    steady, rotting = overall[("sim-steady", "baseline")], overall[("sim-rotting", "baseline")]
    assert steady["true_gamma"] == pytest.approx(0.0) and _covers(steady, 0.0)
    assert rotting["true_gamma"] > 0.5 and rotting["ci_low"] > 0.0

    # Context rot only: a context reset removes the residual, a state repair does not; the mirror image
    # for state sensitivity only.
    for agent, fixes, keeps in (("sim-rotting", "context_reset", "state_repair"),
                                ("sim-fragile", "state_repair", "context_reset")):
        assert _covers(overall[(agent, fixes)], 0.0), (agent, fixes)
        assert not _covers(overall[(agent, keeps)], 0.0), (agent, keeps)
        assert not _covers(contrast[(agent, fixes)], 0.0), (agent, fixes)
    # Neither: every condition contains 0; without a declared equivalence margin that is no null claim.
    for condition in ("baseline", "context_reset", "state_repair", "compaction"):
        assert _covers(overall[("sim-steady", condition)], 0.0), condition
    assert verdict["sim-steady"]["verdict"] == "inconclusive"
    # Each of these intervals contains its sim truth (the intervals named above; with ~20 intervals at 95%
    # some other one misses its truth in most seeds: benchmarks/conditions_acceptance.py counts them all).
    named = [overall[("sim-rotting", c)] for c in ("baseline", "context_reset", "state_repair")] + \
        [overall[("sim-fragile", c)] for c in ("baseline", "state_repair", "context_reset")]
    for row in named:  # the headline interval is about the population of tasks: its truth is tasks: sampled
        assert row["ci_estimand"] == "tasks: sampled"
        assert _covers(row, row["true_gamma_sampled"]), (row["agent"], row["condition"])
        assert row["trial_ci_low"] <= row["true_gamma"] <= row["trial_ci_high"], (row["agent"], row["condition"])
    for agent, condition in (("sim-rotting", "context_reset"), ("sim-fragile", "state_repair")):
        row = contrast[(agent, condition)]
        assert row["ci_estimand"] == "tasks: sampled" and _covers(row, row["true_delta_gamma_sampled"])
        assert row["trial_ci_low"] <= row["true_delta_gamma"] <= row["trial_ci_high"], (agent, condition)
    families = [r for r in summary["residuals"] if r["scope"] == "family"]
    assert families and all(r["n_tasks"] >= 5 and r["ci_method"] == "cluster-t" for r in families)
