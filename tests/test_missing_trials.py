"""Protects "missing is not failed" (issue 21): a trial without a result after its attempts is left out of
q̂ and P̂_obs (the estimators use m_used, checked against closed forms), counted per cell as m_planned,
m_used and m_missing in every table, tolerated up to `retries.max_missing_share`, and beyond it the trial
check fails naming the cells, the last error and that re-running the same command retries them."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from hrbench import analysis, quality
from hrbench.protocol import Retries
from hrbench.simulate import simulated_trials
from hrbench.stats import TaskOutcomes, estimate_task
from hrbench.stats.estimate import delta_se
from hrbench.study_run import StudyRun
from tests.conftest import as_stored

AGENT = "steady"
TASKS = ["gradebook-pipeline", "expense-ledger", "file-housekeeping"]


@pytest.fixture(scope="module")
def run(tmp_path_factory) -> StudyRun:
    folder = tmp_path_factory.mktemp("missing")
    study = folder / "study.yaml"
    study.write_text(f"name: missing\ntasks: {{include: {TASKS}}}\n"
                     "agents: [{id: steady, kind: sim, sim: {skill: 0.85}}]\n"
                     "trials: {checkpoint: 10, natural: 20}\nbootstrap: {n_boot: 200, seed: 1}\n")
    return StudyRun.from_file(study, folder / "out", progress=False)


@pytest.fixture(scope="module")
def tables(run: StudyRun) -> tuple[pd.DataFrame, pd.DataFrame]:
    checkpoint, natural = as_stored(run.design, AGENT,
                                    *simulated_trials(run.design, run.runner, AGENT, np.random.default_rng(3)))
    started = "2026-01-01T12:00:00.000+00:00"  # the harness records when each trial started
    return checkpoint.assign(started_at=started), natural.assign(started_at=started)


def _lose(frame: pd.DataFrame, rows: list[int], reason: str = "verifier_error") -> pd.DataFrame:
    """The rows' trials ended without a result (their outcome is unknown: passed False, as the harness writes)."""
    frame = frame.copy()
    index = frame.index[rows]
    frame.loc[index, "exit_reason"] = reason
    frame.loc[index, "passed"] = False
    frame.loc[index, "stages_passed"] = 0
    frame.loc[index, "error"] = "the verifier timed out after 60s"
    return frame


def _estimates(run: StudyRun, checkpoint: pd.DataFrame, natural: pd.DataFrame):
    est = analysis.Estimand.declared(run.study, "baseline")
    stages = analysis.stage_estimates(run.design, AGENT, checkpoint, [est])
    expected = analysis.expected_success(run.design, AGENT, stages)
    observed = analysis.observed_success(run.design, AGENT, checkpoint, natural, [est])
    residuals = analysis.horizon_residuals(run.design, AGENT, checkpoint, natural, expected, [est])
    return as_stored(run.design, AGENT, stages, expected, observed, residuals)


def test_missing_trials_are_left_out_and_every_estimate_uses_m_used(run: StudyRun, tables):
    checkpoint, natural = tables
    task = TASKS[0]
    first_stage = checkpoint[(checkpoint["task"] == task)].sort_values(["stage", "trial_index"])
    stage_name = first_stage["stage"].iloc[0]
    lost_ck = [checkpoint.index.get_loc(i) for i in first_stage[first_stage["stage"] == stage_name].index[:3]]
    lost_nat = [natural.index.get_loc(i) for i in natural[natural["task"] == task].index[:2]]
    checkpoint, natural = _lose(checkpoint, lost_ck), _lose(natural, lost_nat, "harness_error")
    stages, expected, observed, residuals = _estimates(run, checkpoint, natural)

    # q̂ of the stage: Jeffreys (k + ½)/(m_used + 1) over the 7 trials with a result
    row = stages[(stages["task"] == task) & (stages["stage"] == stage_name)].iloc[0]
    kept = checkpoint[(checkpoint["task"] == task) & (checkpoint["stage"] == stage_name)
                      & (checkpoint["exit_reason"] != "verifier_error")]
    assert (row["m"], row["m_planned"], row["m_missing"]) == (7, 10, 3)
    assert row["q_hat"] == pytest.approx((kept["passed"].sum() + 0.5) / (7 + 1), rel=1e-12)

    # P̂_obs = Π r̂_i over the 18 rollouts with a result; Γ = ln(Π q̂ / Π r̂)
    t = run.design.task(task)
    depths = natural[(natural["task"] == task) & (natural["exit_reason"] != "harness_error")]["stages_passed"]
    reached, p_obs = len(depths), 1.0
    for i in range(t.n_stages):
        passed = int((depths > i).sum())
        p_obs *= (passed + 0.5) / (reached + 1)
        reached = passed
    q = stages[stages["task"] == task].sort_values("stage_index")["q_hat"].to_numpy()
    obs = observed[observed["task"] == task].iloc[0]
    assert (obs["m0"], obs["m0_planned"], obs["m0_missing"]) == (18, 20, 2)
    assert obs["p_observed"] == pytest.approx(p_obs, rel=1e-12)
    res = residuals[(residuals["scope"] == "task") & (residuals["name"] == task)].iloc[0]
    assert res["gamma"] == pytest.approx(math.log(np.prod(q) / p_obs), rel=1e-9)
    n_units = t.n_stages
    assert (res["m_planned"], res["m_used"], res["m_missing"]) == (10 * n_units + 20, 10 * n_units + 20 - 5, 5)
    overall = residuals[residuals["scope"] == "all"].iloc[0]
    assert overall["m_missing"] == 5 and overall["m_planned"] == sum(
        10 * run.design.task(n).n_stages + 20 for n in TASKS)


def test_the_delta_se_uses_each_stages_own_m_used():
    """Var(P̂_exp) = Σ_i (Π_{j≠i} q_j)² q_i(1−q_i)/m_i with unequal m_i, plus P_obs(1−P_obs)/m0 (paper eq. 4)."""
    t = TaskOutcomes(name="t", family="f", weight=1.0,
                     checkpoint_passes=(np.array([1] * 8 + [0] * 2), np.array([1] * 5 + [0] * 2)),
                     natural_depths=np.array([2] * 9 + [1] * 4 + [0] * 4))
    e = estimate_task(t, "jeffreys")
    q1, q2 = 8.5 / 11, 5.5 / 8
    assert e.q == pytest.approx([q1, q2]) and e.checkpoint_m == [10, 7] and e.m0 == 17
    p_exp, p_obs = q1 * q2, e.p_observed
    var = (q2**2 * q1 * (1 - q1) / 10 + q1**2 * q2 * (1 - q2) / 7) / p_exp**2 + p_obs * (1 - p_obs) / 17 / p_obs**2
    assert delta_se(np.array(e.q), np.array([10, 7]), p_obs, 17) == pytest.approx(math.sqrt(var), rel=1e-12)


def test_a_task_whose_trials_are_all_missing_has_no_estimate_and_the_others_are_unchanged(run: StudyRun, tables):
    checkpoint, natural = tables
    before = _estimates(run, checkpoint, natural)[3]
    gone = [i for i, t in enumerate(natural["task"]) if t == TASKS[1]]
    stages, expected, observed, after = _estimates(run, checkpoint, _lose(natural, gone))
    tasks = lambda f: f[f["scope"] == "task"].set_index("name")  # noqa: E731
    for name in (TASKS[0], TASKS[2]):
        for column in ("gamma", "p_expected", "p_observed", "trial_ci_low", "trial_ci_high"):
            assert tasks(after).loc[name, column] == tasks(before).loc[name, column]
    lost = tasks(after).loc[TASKS[1]]
    assert pd.isna(lost["gamma"]) and lost["m_used"] == lost["m_planned"] - 20 and lost["m_missing"] == 20
    assert observed[observed["task"] == TASKS[1]]["p_observed"].isna().all()
    verdicts = [quality.check_horizon_residuals(after, run.design, [AGENT], "baseline"),
                quality.check_observed_success(observed, run.design, [AGENT], "baseline"),
                quality.check_stage_estimates(stages, run.design, [AGENT], "baseline")]
    assert [v.description() for v in verdicts] == [None, None, None]


def test_missing_trials_within_the_tolerance_pass_the_checks(run: StudyRun, tables):
    checkpoint, natural = tables
    natural = _lose(natural, [0])  # 1 of a cell's 20: max_missing_share 0.05 tolerates 1
    checkpoint = _lose(checkpoint, [0])
    specs = lambda kind: [s for t in TASKS for s in getattr(run.runner, f"{kind}_specs")(AGENT, t)]  # noqa: E731
    assert quality.check_trials("natural_trials", natural, specs("natural"), run.prereg_sha256).success
    # 1 of a checkpoint cell's 10 exceeds 0.05 (0 tolerated), not 0.1
    strict = quality.check_trials("checkpoint_trials", checkpoint, specs("checkpoint"), run.prereg_sha256)
    assert not strict.success
    assert quality.check_trials("checkpoint_trials", checkpoint, specs("checkpoint"), run.prereg_sha256,
                                Retries(max_missing_share=0.1)).success
    stages = _estimates(run, checkpoint, natural)[0]
    assert quality.check_stage_estimates(stages, run.design, [AGENT], "baseline").success
    assert stages["m"].min() == 9 and (stages["m_planned"] == 10).all()


def test_beyond_the_tolerance_the_check_names_the_cells_the_last_error_and_the_remedy(run: StudyRun, tables):
    _, natural = tables
    rows = [i for i, t in enumerate(natural["task"]) if t == TASKS[2]][:3]
    verdict = quality.check_trials("natural_trials", _lose(natural, rows), [
        s for t in TASKS for s in run.runner.natural_specs(AGENT, t)], run.prereg_sha256)
    assert not verdict.success
    message = verdict.description()
    assert f"cell={AGENT}/{TASKS[2]}/natural-full-own" in message
    assert "m_missing=3" in message and "last_error=verifier_error: the verifier timed out after 60s" in message
    assert "re-run the same command: 3 trial(s) will be retried" in message
    assert "report it" not in message


def test_stage_estimates_from_more_trials_than_planned_are_impossible_and_say_report_it(run: StudyRun, tables):
    stages = _estimates(run, *tables)[0].copy()
    stages.loc[stages.index[0], "m"] = 11
    verdict = quality.check_stage_estimates(stages, run.design, [AGENT], "baseline")
    assert not verdict.success and "report it" in verdict.description()


def test_the_retries_section_is_part_of_the_pre_registration(tmp_path_factory):
    def design(retries: str):
        folder = tmp_path_factory.mktemp("prereg")
        study = folder / "study.yaml"
        study.write_text(f"name: missing\ntasks: {{include: {TASKS[:1]}}}\n"
                         f"agents: [{{id: steady, kind: sim, sim: {{skill: 0.85}}}}]\n{retries}")
        return StudyRun.from_file(study, folder / "out", progress=False).design

    default, other = design(""), design("retries: {max_attempts: 5, max_missing_share: 0.1}\n")
    assert default.preregistration.body()["study"]["retries"] == {
        "max_attempts": 3, "backoff_sec": 2.0, "transient": ["harness_error", "verifier_error"],
        "max_missing_share": 0.05}
    assert default.prereg_sha256 != other.prereg_sha256


def test_when_no_task_has_an_estimate_the_message_says_how_many_trials_a_re_run_retries(run: StudyRun, tables):
    checkpoint, natural = tables
    with pytest.raises(analysis.MissingTrials, match=r"re-run the same command: 60 trial\(s\) will be retried"):
        analysis.task_outcomes(run.design, checkpoint, _lose(natural, list(range(len(natural)))),
                               analysis.Estimand.declared(run.study, "baseline"))
