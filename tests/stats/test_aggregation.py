"""Protects family aggregation: compose within task, same weights; never multiply stage averages."""

import math

import numpy as np
import pytest

from hrbench.stats import outcomes_from_counts, residual_table


def test_multiplying_stage_averages_gives_a_different_wrong_number():
    # Two tasks of one family with opposite difficulty profiles, both with Γ = 0.
    a = outcomes_from_counts("a", "F", [10, 2], [10, 10], [0, 8, 2])  # q = (1.0, 0.2), r = (1.0, 0.2)
    b = outcomes_from_counts("b", "F", [2, 10], [10, 10], [8, 0, 2])  # q = (0.2, 1.0), r = (0.2, 1.0)
    rows = {r.name: r for r in residual_table([a, b], zero_rule="bound", n_boot=200)}
    fam = rows["F"]
    assert fam.p_expected == pytest.approx(0.2)  # (0.2 + 0.2) / 2, composed within each task
    assert fam.gamma == pytest.approx(0.0)
    stage_avg = np.mean([[1.0, 0.2], [0.2, 1.0]], axis=0)
    wrong = float(np.prod(stage_avg))  # 0.6 × 0.6 = 0.36
    assert wrong == pytest.approx(0.36)
    assert math.log(wrong / fam.p_observed) == pytest.approx(math.log(1.8))  # a spurious residual


def test_family_uses_the_same_declared_weights_for_expected_and_observed():
    a = outcomes_from_counts("a", "F", [8], [10], [5, 5], weight=3.0)  # P_exp .8, P_obs .5
    b = outcomes_from_counts("b", "F", [4], [10], [8, 2], weight=1.0)  # P_exp .4, P_obs .2
    fam = [r for r in residual_table([a, b], zero_rule="bound", n_boot=200) if r.scope == "family"][0]
    assert fam.p_expected == pytest.approx((3 * 0.8 + 0.4) / 4)
    assert fam.p_observed == pytest.approx((3 * 0.5 + 0.2) / 4)
    assert fam.gamma == pytest.approx(math.log(2.8 / 1.7))


def test_table_has_task_family_and_all_rows_with_labels():
    a = outcomes_from_counts("a", "F", [9, 9], [10, 10], [1, 1, 8])
    b = outcomes_from_counts("b", "G", [9, 9], [10, 10], [5, 3, 2])
    rows = residual_table([a, b], n_boot=200)
    assert [(r.scope, r.name) for r in rows] == [("task", "a"), ("task", "b"), ("family", "F"), ("family", "G"), ("all", "all")]
    for r in rows:
        assert r.quadrant is not None and r.ci_method and r.se_delta is not None
    assert rows[0].stage_term_ci is not None and rows[-1].stage_terms is None
    assert rows[0].ci_method == "mover-jeffreys" and rows[0].ci_estimand == "tasks: fixed"
    # Two families of one task each: no between-task information, so no tasks-sampled interval.
    assert rows[-1].ci_method == "too-few-tasks" and rows[-1].ci_low is None and rows[-1].ci_estimand == "tasks: sampled"
    assert rows[-1].trial_ci_method == "mover-effective-jeffreys" and rows[-1].trial_ci_low < rows[-1].trial_ci_high
    assert "too-few-tasks" in rows[-1].flags
