"""Protects the per-task estimators: DESIGN §7 worked examples, Σ stage terms = Γ, zero rules."""

import math

import numpy as np
import pytest

from hrbench.stats import estimate_task, outcomes_from_counts, product_baseline, residual_table
from hrbench.stats.estimate import rule_note
from hrbench.stats.synthetic import simulate_task


def four_repairs(natural_success: int = 10, m0: int = 100):
    # q = 0.8 on each of four stages; natural rollouts either fail at stage 1 or succeed.
    return outcomes_from_counts("repairs", "F", [8] * 4, [10] * 4, [m0 - natural_success, 0, 0, 0, natural_success])


def test_design_worked_example_four_stages():
    est = estimate_task(four_repairs(), zero_rule="bound")  # raw proportions
    assert est.p_expected == pytest.approx(0.4096, abs=1e-12)
    assert est.p_observed == pytest.approx(0.10, abs=1e-12)
    assert est.gamma == pytest.approx(math.log(4.096), abs=1e-12)
    assert round(est.gamma, 3) == 1.410


def test_design_worked_example_two_stage_product():
    assert product_baseline([9, 8], [10, 10], zero_rule="bound").p_expected == pytest.approx(0.72)


@pytest.mark.parametrize("rule", ["jeffreys", "haldane", "bound", "exclude"])
def test_stage_terms_sum_to_gamma_under_every_rule(rule):
    rng = np.random.default_rng(3)
    t = simulate_task("t", "F", [0.9, 0.7, 0.95, 0.8], [0.85, 0.6, 0.9, 0.7], 30, 40, rng)
    est = estimate_task(t, rule)
    assert sum(est.stage_terms) == pytest.approx(est.gamma, abs=1e-12)
    assert math.exp(sum(math.log(q) for q in est.q)) == pytest.approx(est.p_expected)


def test_raw_product_of_natural_conditionals_telescopes_to_k0_over_m0():
    t = outcomes_from_counts("t", "F", [5, 5, 5], [9, 9, 9], [3, 4, 6, 7])
    est = estimate_task(t, "bound")
    assert est.p_observed == pytest.approx(7 / 20)
    assert est.reached == [20, 17, 13] and est.passed == [17, 13, 7]


def test_jeffreys_smooths_expected_and_observed_alike():
    est = estimate_task(four_repairs(), "jeffreys")
    assert est.q == pytest.approx([8.5 / 11] * 4)
    assert est.r == pytest.approx([10.5 / 101, 10.5 / 11, 10.5 / 11, 10.5 / 11])
    assert est.p_observed == pytest.approx(np.prod(est.r))


def test_delta_se_matches_paper_equation_4():
    est = estimate_task(four_repairs(), "bound")
    expected = math.sqrt(4 * 0.2 / (10 * 0.8) + 0.9 / (100 * 0.1))
    assert est.se_delta == pytest.approx(expected)


def test_zero_rule_bound_reports_one_sided_lower_bound_when_no_rollout_succeeds():
    est = estimate_task(four_repairs(natural_success=0), "bound")
    assert est.gamma is None and est.bound == "lower"
    assert est.bound_value is not None and 0 < est.bound_value < math.log(0.4096 * 100)
    assert est.zero_rule_applied and not est.excluded


def test_zero_rule_bound_reports_upper_bound_when_a_stage_never_passes():
    t = outcomes_from_counts("t", "F", [8, 0], [10, 10], [10, 0, 10])
    est = estimate_task(t, "bound")
    assert est.gamma is None and est.bound == "upper" and est.bound_value is not None


@pytest.mark.parametrize("rule", ["bound", "jeffreys", "haldane"])
def test_no_natural_success_gives_no_point_value_and_a_one_sided_interval_under_every_rule(rule):
    rows = residual_table([four_repairs(natural_success=0)], zero_rule=rule, n_boot=200)
    for row in rows:  # the task row and its aggregates (one task: the same values)
        assert row.gamma is None and row.bound == "lower" and "one-sided" in row.flags and row.zero_rule_applied
        assert row.trial_ci_low == row.bound_value and row.trial_ci_high == math.inf
    assert rows[0].ci_low == rows[0].bound_value  # a task row's headline is its tasks-fixed interval


def test_zero_rule_exclude_drops_task_and_counts_it():
    good = four_repairs()
    bad = outcomes_from_counts("bad", "F", [8] * 4, [10] * 4, [100, 0, 0, 0, 0])
    rows = {(r.scope, r.name): r for r in residual_table([good, bad], zero_rule="exclude", n_boot=200)}
    assert rows[("task", "bad")].gamma is None
    fam = rows[("family", "F")]
    assert fam.n_tasks == 1 and fam.n_excluded == 1
    assert fam.gamma == pytest.approx(math.log(4.096))


def test_jeffreys_gives_a_finite_value_where_raw_logs_are_undefined():
    est = estimate_task(four_repairs(natural_success=0), "jeffreys")
    assert est.gamma is not None and math.isfinite(est.gamma) and est.zero_rule_applied


def test_rule_note_says_how_jeffreys_moved_an_all_pass_task_off_its_raw_ratio():
    """Issue 25: an oracle that passes 4/4 everywhere shows P_exp 0.9⁴ = 0.656 under jeffreys, not 1; its row
    says so in one line, with the raw values beside the reported ones."""
    t = outcomes_from_counts("oracle", "f", k=[4, 4, 4, 4], m=[4, 4, 4, 4], depth_counts=[0, 0, 0, 0, 4])
    e = estimate_task(t, "jeffreys")
    note = rule_note([t], "jeffreys", e.p_expected, e.p_observed, e.gamma)
    assert e.p_expected == pytest.approx(0.9**4)
    assert note == ("jeffreys reads every k/m as (k+½)/(m+1) (checkpoint 4/4 at stages 1, 2, 3, 4; natural 4/4 at stages 1, 2, 3, 4): P_exp 0.656 "
                    "(raw 1.000), P_obs 0.656 (raw 1.000), Γ 0.000 (raw 0.000)")
    # haldane moves only the counts at 0 or m; a zero natural count leaves Γ undefined on the raw ratio
    zero = outcomes_from_counts("none", "f", k=[3, 4], m=[4, 4], depth_counts=[4, 0, 0])
    h = estimate_task(zero, "haldane")
    assert "checkpoint 4/4 at stage 2; natural 0/4 at stage 1, 0/0 at stage 2" in rule_note([zero], "haldane", h.p_expected, h.p_observed, None)


def test_rule_note_is_silent_where_nothing_shown_moved_or_no_count_is_at_a_boundary():
    inner = outcomes_from_counts("inner", "f", k=[2, 3], m=[4, 4], depth_counts=[1, 2, 1])
    h = estimate_task(inner, "haldane")
    assert rule_note([inner], "haldane", h.p_expected, h.p_observed, h.gamma) is None  # haldane: raw inside
    j = estimate_task(inner, "jeffreys")
    assert rule_note([inner], "jeffreys", j.p_expected, j.p_observed, j.gamma) is None  # no count at 0 or m
    full = outcomes_from_counts("full", "f", k=[4, 4], m=[4, 4], depth_counts=[0, 1, 3])
    for rule in ("bound", "exclude"):  # raw rules never move a defined estimate
        e = estimate_task(full, rule)
        assert rule_note([full], rule, e.p_expected, e.p_observed, e.gamma) is None
    # a family row sums the raw per-task P's: shown as they are, it carries no note
    rows = {r.name: r for r in residual_table([full, inner], "jeffreys", scopes=("family",))}
    assert rule_note([full, inner], "jeffreys", rows["f"].p_expected, rows["f"].p_observed, rows["f"].gamma) is None
