"""Protects the simulated agents' ground truth: closed form = generative story = real sandbox runs."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest

from hrbench.agents.sim import SimAgent, sim_truth, task_skill
from hrbench.envs.local import LocalBackend
from hrbench.harness.loop import trial_context
from hrbench.harness.records import TrialSpec
from hrbench.harness.trials import run_checkpoint_trial, run_natural_trial
from hrbench.agents.specs import SimParams
from hrbench.protocol import CONDITIONS, CheckpointProtocol
from hrbench.tasks.loader import load_task
from tests.conftest import TINY_TASK

ROTTING = SimParams(skill=0.9, context_rot=0.2, defect_rate=0.4, defect_penalty=0.6)


def simulate_natural(params: SimParams, n: int, history_weight: float, own_state: bool, reps: int, seed: int):
    """The generative story of DESIGN §5, coded independently of sim_truth."""
    rng = np.random.default_rng(seed)
    depth = np.zeros(reps, dtype=int)
    for r in range(reps):
        defects = 0
        for i in range(n):
            p = params.skill * math.exp(-params.context_rot * history_weight * i
                                        - params.defect_penalty * (defects if own_state else 0))
            if rng.random() >= p:
                break
            depth[r] += 1
            defects += rng.random() < params.defect_rate
    return depth


@pytest.mark.parametrize("condition, weight, own", [
    ("baseline", 1.0, True), ("context_reset", 0.0, True), ("state_repair", 1.0, False),
    ("compaction", ROTTING.compaction_retention, True),
])
def test_closed_form_matches_monte_carlo_of_the_generative_story(condition: str, weight: float, own: bool):
    task = load_task(TINY_TASK)
    truth = sim_truth(ROTTING, task, CONDITIONS[condition], CheckpointProtocol())
    depth = simulate_natural(ROTTING, task.n_stages, weight, own, reps=40_000, seed=3)
    p_obs = float((depth == task.n_stages).mean())
    assert p_obs == pytest.approx(truth.p_observed, abs=0.01)
    reached = np.array([(depth >= i).sum() for i in range(task.n_stages)])
    passed = np.array([(depth >= i + 1).sum() for i in range(task.n_stages)])
    assert passed / reached == pytest.approx(truth.r, abs=0.015)
    assert truth.q == pytest.approx([0.9] * 3)
    assert math.prod(truth.r) == pytest.approx(truth.p_observed)
    assert truth.gamma == pytest.approx(math.log(truth.p_expected / truth.p_observed))


def test_no_degradation_means_zero_true_residual():
    truth = sim_truth(SimParams(skill=0.8), load_task(TINY_TASK), CONDITIONS["baseline"], CheckpointProtocol())
    assert truth.gamma == pytest.approx(0.0, abs=1e-12)
    assert truth.p_expected == pytest.approx(0.8 ** 3)


def test_task_skill_spread_is_deterministic_and_bounded():
    params = SimParams(skill=0.95, skill_spread=0.2)
    assert task_skill(params, "a") == task_skill(params, "a")
    assert 0.75 < task_skill(params, "a") <= 0.95


def _spec(kind: str, stage: str | None = None, index: int = 0) -> TrialSpec:
    return TrialSpec(prereg_sha256="0" * 64, agent="sim", condition="baseline", protocol="p", task="tiny-chain",
                     kind=kind, stage=stage, trial_index=index)


def test_defects_are_real_files_that_lower_later_stages_unless_repaired(tmp_path: Path):
    task = load_task(TINY_TASK)
    backend = LocalBackend(tmp_path / "cache")
    always_defect = SimParams(skill=1.0, defect_rate=1.0, defect_penalty=50.0)  # a defect makes later stages fail
    budget = CheckpointProtocol().budget
    own = run_natural_trial(_spec("natural"), task, SimAgent(always_defect), backend, CONDITIONS["baseline"], budget, 1,
                            trajectory_dir=tmp_path / "t")
    assert own.stages_passed == 1 and own.stopped_stage == "double" and own.exit_reason == "failed"
    repaired = run_natural_trial(_spec("natural", index=1), task, SimAgent(always_defect), backend,
                                 CONDITIONS["state_repair"], budget, 1, trajectory_dir=tmp_path / "t")
    assert repaired.passed and repaired.stages_passed == 3
    # A checkpoint starts from the oracle state: no defects, so the stage passes.
    ck = run_checkpoint_trial(_spec("checkpoint", "report"), task, SimAgent(always_defect), backend,
                              CheckpointProtocol(), 1, trajectory_dir=tmp_path / "t")
    assert ck.passed and ck.exit_reason == "passed"


def test_context_rot_follows_the_history_the_harness_shows(tmp_path: Path):
    task = load_task(TINY_TASK)
    backend = LocalBackend(tmp_path / "cache")
    rot = SimParams(skill=1.0, context_rot=50.0)  # any visible earlier stage makes it fail
    budget = CheckpointProtocol().budget
    full = run_natural_trial(_spec("natural"), task, SimAgent(rot), backend, CONDITIONS["baseline"], budget, 1,
                             trajectory_dir=tmp_path / "t")
    reset = run_natural_trial(_spec("natural", index=1), task, SimAgent(rot), backend, CONDITIONS["context_reset"],
                              budget, 1, trajectory_dir=tmp_path / "t")
    assert full.stages_passed == 1 and full.exit_reason == "failed"
    assert reset.passed


def test_same_trial_key_replays_the_same_outcome(tmp_path: Path):
    task = load_task(TINY_TASK)
    backend = LocalBackend(tmp_path / "cache")
    budget = CheckpointProtocol().budget
    runs = [run_natural_trial(_spec("natural", index=i % 6), task, SimAgent(ROTTING), backend,
                              CONDITIONS["baseline"], budget, 11, trajectory_dir=tmp_path / "t")
            for i in range(12)]
    assert [r.stages_passed for r in runs[:6]] == [r.stages_passed for r in runs[6:]]


def test_every_real_trial_outcome_is_the_draw_the_model_made(tmp_path: Path):
    """The sandboxed path adds no failures of its own (a verifier time-out, a sandbox error, a wrong
    stage) and loses none: each checkpoint trial passes exactly when its first draw, recomputed from
    the trial key's seed, falls below the task's skill. A coin-flip skill makes both outcomes common."""
    task = load_task(TINY_TASK)
    backend = LocalBackend(tmp_path / "cache")
    params = SimParams(skill=0.6, skill_spread=0.2)
    skill = task_skill(params, task.name)
    outcomes, draws = [], []
    for i in range(5):
        for stage in ("make", "double", "report"):
            spec = _spec("checkpoint", stage, index=i)
            result = run_checkpoint_trial(spec, task, SimAgent(params), backend, CheckpointProtocol(), 5,
                                          trajectory_dir=tmp_path / "t")
            assert result.exit_reason in ("passed", "failed"), (spec.key, result.exit_reason, result.error)
            outcomes.append(result.passed)
            draws.append(np.random.default_rng(trial_context(spec, task, 5).seed).random() < skill)
    assert outcomes == draws
    assert 0 < sum(outcomes) < len(outcomes)  # both outcomes were exercised
