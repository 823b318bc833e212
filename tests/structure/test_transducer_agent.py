"""Protects the simulated transducer through the real harness and verifiers: its declared per-record
error rate is recovered from checkpoint pass rates, and a position decay shows in the later chunk."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from hrbench.envs.local import LocalBackend
from hrbench.harness.records import TrialSpec
from hrbench.harness.trials import run_checkpoint_trial
from hrbench.protocol import Budget, CheckpointProtocol
from hrbench.stats.intervals import wilson_interval
from hrbench.tasks.loader import load_task
from hrbench.transduction.agent import TransducerAgent, TransducerParams

TASK = Path(__file__).resolve().parents[2] / "task_registry" / "lt-arith-orderedids-d1-n12-s0-k2"


def _passes(tmp_path: Path, params: TransducerParams, stage: str, trials: int) -> int:
    task = load_task(TASK)
    backend = LocalBackend(tmp_path / "cache")
    protocol = CheckpointProtocol(budget=Budget(max_turns=2, timeout_sec=30))
    agent = TransducerAgent(params)
    passed = 0
    for i in range(trials):
        spec = TrialSpec(prereg_sha256="2" * 64, agent="t", condition="baseline", protocol="ck", task=task.name,
                         kind="checkpoint", stage=stage, trial_index=i)
        passed += run_checkpoint_trial(spec, task, agent, backend, protocol, seed=11,
                                       trajectory_dir=tmp_path / "traj").passed
    return passed


def test_error_free_transducer_passes_every_chunk(tmp_path: Path):
    assert _passes(tmp_path, TransducerParams(), "part2", 2) == 2


@pytest.mark.slow
def test_flat_error_rate_is_recovered_from_stage_pass_rates(tmp_path: Path):
    e, size, n = 0.1, 6, 40  # q = 0.9^6 = 0.53
    k = _passes(tmp_path, TransducerParams(error_rate=e), "part1", n)
    low, high = wilson_interval(k, n)
    # e = 1 - q^(1/6) is monotone in q: map the interval on q to one on e
    assert 1 - high ** (1 / size) <= e <= 1 - low ** (1 / size)


@pytest.mark.slow
def test_decay_makes_the_later_chunk_pass_less_often(tmp_path: Path):
    params = TransducerParams(error_rate=0.0, decay=0.5)
    first, second = _passes(tmp_path, params, "part1", 30), _passes(tmp_path, params, "part2", 30)
    q1 = math.prod(1 - 0.5 * i / 11 for i in range(6))
    q2 = math.prod(1 - 0.5 * i / 11 for i in range(6, 12))
    assert q2 < 0.1 and q1 > 0.3  # 0.05 and 0.47
    assert second < first and wilson_interval(second, 30)[1] < wilson_interval(first, 30)[0]
