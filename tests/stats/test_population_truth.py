"""Protects the truth of the tasks-sampled estimand of sim agents (issue 8): the population
average over the declared skill spread, equal to the fixed-task truth without spread."""

import math

import pytest

from hrbench.agents.sim import population_truth, sim_truth
from hrbench.agents.specs import SimParams
from hrbench.protocol import CONDITIONS, CheckpointProtocol
from hrbench.tasks.loader import load_task
from tests.conftest import TINY_TASK


def test_population_truth_equals_task_truth_without_spread():
    task, cond = load_task(TINY_TASK), CONDITIONS["baseline"]
    params = SimParams(skill=0.8, context_rot=0.1)
    fixed = sim_truth(params, task, cond, CheckpointProtocol())
    assert population_truth(params, task, cond, CheckpointProtocol()) == (fixed.p_expected, fixed.p_observed)


def test_population_truth_averages_over_the_declared_skill_spread():
    # No degradation: q_i = r_i = skill_t on every stage, so E_u P = ∫_0^1 (s − a u)^n du in closed form.
    task, cond = load_task(TINY_TASK), CONDITIONS["baseline"]
    s, a, n = 0.9, 0.4, task.n_stages
    p_exp, p_obs = population_truth(SimParams(skill=s, skill_spread=a), task, cond, CheckpointProtocol())
    exact = (s ** (n + 1) - (s - a) ** (n + 1)) / ((n + 1) * a)
    assert p_exp == pytest.approx(exact, rel=1e-4) and p_obs == pytest.approx(exact, rel=1e-4)
    fixed = sim_truth(SimParams(skill=s, skill_spread=a), task, cond, CheckpointProtocol())
    assert not math.isclose(fixed.p_expected, p_exp, rel_tol=1e-3)  # this task's own skill is one draw of u
