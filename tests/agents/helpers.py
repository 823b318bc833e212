"""Shared helpers for the real-agent tests: trial specs, solutions of the fixture task, runners."""

from __future__ import annotations

from pathlib import Path

from hrbench.agents.llm import LLMAgent
from hrbench.harness.records import TrialSpec
from hrbench.harness.trajectory import load_matched_prefix
from hrbench.harness.trials import run_checkpoint_trial, run_natural_trial
from hrbench.protocol import CONDITIONS, Budget, CheckpointProtocol
from tests.agents.scripted_server import reply

SOLVE = {
    "make": "echo $(( $(cat seed.txt) + 1 )) > a.txt\n",
    "double": "echo $(( $(cat a.txt) * 2 )) > b.txt\n",
    "report": 'echo "total=$(cat b.txt)" > report.txt\n',
}
FAST = Budget(max_turns=8, timeout_sec=60, command_timeout_sec=5)


def solved(stage: str) -> str:
    return reply([SOLVE[stage]], complete=True, duration=2)


def spec(kind: str = "natural", stage: str | None = None, condition: str = "baseline", index: int = 0,
         protocol: str | None = None) -> TrialSpec:
    if protocol is None:
        protocol = "natural-" + CONDITIONS[condition].history.value + "-" + CONDITIONS[condition].state.value \
            if kind == "natural" else "ckpt"
    return TrialSpec(prereg_sha256="f" * 64, agent="scripted", condition=condition, protocol=protocol,
                     task="tiny-chain", kind=kind, stage=stage, trial_index=index)


def natural(llm_spec, task, backend, tmp: Path, condition: str = "baseline", budget: Budget = FAST, index: int = 0):
    agent = LLMAgent(llm_spec)
    record = run_natural_trial(spec("natural", condition=condition, index=index), task, agent, backend,
                               CONDITIONS[condition], budget, seed=0, trajectory_dir=tmp / "trajectories")
    return record, agent


def checkpoint(llm_spec, task, backend, tmp: Path, stage: str, history: str = "fresh", budget: Budget = FAST,
               index: int = 0):
    agent = LLMAgent(llm_spec)
    protocol = CheckpointProtocol(history=history, budget=budget)
    # A `matched` transcript comes from the natural rollouts recorded under tmp (the runner takes them
    # from its journal; here the test's own trajectories stand in for it).
    recorded = sorted((tmp / "trajectories").rglob("natural_all/*.json.gz"))
    record = run_checkpoint_trial(spec("checkpoint", stage=stage, index=index), task, agent, backend, protocol,
                                  seed=0, trajectory_dir=tmp / "trajectories",
                                  matched_prefix=lambda stage_index: load_matched_prefix(recorded, stage_index, index))
    return record, agent
