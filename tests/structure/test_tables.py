"""Protects the dense and structure tables: stage rewards weighted by task.toml, unreached stages count
zero, failure types and false finishes per trial, D beside W."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from hrbench.agents.oracle import NopAgent, OracleAgent
from hrbench.envs.local import LocalBackend
from hrbench.harness.records import TrialRecord, TrialSpec
from hrbench.harness.trials import run_natural_trial
from hrbench.protocol import CONDITIONS, Budget
from hrbench.structure.depth import DepthEstimate
from hrbench.structure.tables import dense_table, structure_row
from hrbench.tasks.loader import load_task

REGISTRY = Path(__file__).resolve().parents[2] / "task_registry"
TASK = REGISTRY / "lt-table-permuteint-d1-n12-s0-k2"  # weights 7 and 6 (output lines per part)


def _record(outcomes: list[tuple[str, float]], reason: str, **kw) -> TrialRecord:
    spec = TrialSpec(prereg_sha256="0" * 64, agent="a", condition="baseline", protocol="natural-full-own",
                     task=TASK.name, kind="natural", stage=None, trial_index=0)
    stage_rows = [{"stage": s, "passed": r == 1.0, "reward": r, "turns": 1, "wall_s": 0, "agent_s": 0,
                   "verifier_s": 0, "exit_reason": reason} for s, r in outcomes]
    return TrialRecord(**spec.model_dump(), trial_key=spec.key, passed=False, stages_passed=0, stopped_stage=None,
                       turns=3, wall_s=2.0, agent_s=1.0, verifier_s=1.0, exit_reason=reason,
                       stage_outcomes_json=json.dumps(stage_rows), tokens_in=10, tokens_out=5, cost_usd=0.1, **kw)


def test_weighted_reward_with_unreached_stages_as_zero_and_failure_types():
    task = load_task(TASK)
    assert [s.weight for s in task.stages] == [7.0, 6.0]
    rows = dense_table([_record([("part1", 1.0), ("part2", 0.5)], "failed"),
                        _record([("part1", 1.0)], "timeout"),
                        _record([("part1", 0.0)], "harness_error")], [task])
    assert rows[0].reward == pytest.approx((7 + 3) / 13) and rows[0].failure == "early_exit"
    assert rows[0].false_finish  # an early exit at R = 0.77
    assert rows[1].stage_rewards == (1.0, 0.0) and rows[1].reward == pytest.approx(7 / 13)
    assert rows[1].failure == "timeout" and not rows[1].false_finish
    assert rows[2].failure == "harness_error" and (rows[2].tokens, rows[2].cost_usd) == (15, 0.1)


def test_sub_rewards_of_a_stage_give_its_partial_credit_and_counters_are_ignored():
    task = load_task(TASK)
    lines = {f"line_{i:04d}": float(i < 3) for i in range(4)}  # 3 of 4 lines right: the chunk failed
    row, = dense_table([_record([("part1", 0.0), ("part2", 1.0)], "failed",
                                rewards_json=json.dumps({"part1": {"reward": 0.0, **lines},
                                                         "part2": {"reward": 1.0, "runtime_ms": 1234}}))], [task])
    assert row.stage_rewards == (0.75, 1.0)  # part2's counter is not a reward: its verifier's 1 stands
    assert row.reward == pytest.approx((7 * 0.75 + 6) / 13)


def test_rows_for_unknown_tasks_are_refused():
    with pytest.raises(ValueError, match="not given"):
        dense_table([_record([], "failed")], [])


def test_real_rollouts_give_reward_one_for_the_oracle_and_zero_for_doing_nothing(tmp_path: Path):
    task = load_task(TASK)
    backend = LocalBackend(tmp_path / "cache")
    records = []
    for i, agent in enumerate((OracleAgent(), NopAgent())):
        spec = TrialSpec(prereg_sha256="1" * 64, agent=agent.name, condition="baseline", protocol="natural-full-own",
                         task=task.name, kind="natural", stage=None, trial_index=i)
        records.append(run_natural_trial(spec, task, agent, backend, CONDITIONS["baseline"],
                                         Budget(max_turns=3, timeout_sec=30), 0, trajectory_dir=tmp_path / "t"))
    oracle, nop = dense_table(records, [task])
    assert (oracle.reward, oracle.failure) == (1.0, "passed")
    assert (nop.reward, nop.failure, nop.stage_rewards) == (0.0, "early_exit", (0.0, 0.0))


def test_structure_row_puts_depth_beside_work():
    task = load_task(REGISTRY / "calib-encrypted-chain")
    row = structure_row(task, DepthEstimate(status="estimate", depth=10, n_turns=10, models=()))
    assert (row.depth, row.n_turns, row.n_stages, row.dependency_depth) == (10, 10, 1, 1)
    assert row.work_lines == task.work and row.work_chars > row.work_lines
