"""Per-trial outcomes of the demo's three sim agents on some demo tasks, as JSON lines, to diff two checkouts.

A checkpoint trial of every stage and a natural rollout under each of the four conditions per agent and
task, seed 7, 2 workers; each line: the trial key, passed, stages passed, exit reason, rewards (every
sub-reward), Harbor reward, artifacts and the per-stage outcomes (no timings). A change to the trial path
that must not change outcomes (docs/performance.md) prints the same lines before and after:

    PYTHONPATH=/tmp/before .venv/bin/python benchmarks/trial_outcomes.py TASK,TASK,... N > before.jsonl
    PYTHONPATH=.           .venv/bin/python benchmarks/trial_outcomes.py TASK,TASK,... N > after.jsonl
    diff <(sort before.jsonl) <(sort after.jsonl)

The tasks come from the task registry of the checkout imported (so each side runs its own task files).
"""
import json, sys, tempfile
from pathlib import Path
from concurrent.futures import ThreadPoolExecutor
import hrbench
from hrbench.agents.sim import SimAgent
from hrbench.agents.specs import SimParams
from hrbench.envs.local import LocalBackend
from hrbench.harness.records import TrialSpec
from hrbench.harness.trials import run_checkpoint_trial, run_natural_trial
from hrbench.protocol import CONDITIONS, Budget, CheckpointProtocol
from hrbench.tasks.loader import load_task

REG = Path(hrbench.__file__).resolve().parent.parent / "task_registry"
TASKS = sys.argv[1].split(",")
TRIALS = int(sys.argv[2])
AGENTS = {"sim-steady": SimParams(skill=0.95, skill_spread=0.1),
          "sim-rotting": SimParams(skill=0.95, skill_spread=0.1, context_rot=0.3),
          "sim-fragile": SimParams(skill=0.95, skill_spread=0.1, defect_rate=0.7, defect_penalty=0.7)}
budget = Budget(max_turns=10, timeout_sec=120)
with tempfile.TemporaryDirectory() as tmp:
    backend = LocalBackend(Path(tmp) / "cache")
    jobs = []
    for name in TASKS:
        task = load_task(REG / name)
        for agent, params in AGENTS.items():
            for i in range(TRIALS):
                for stage in task.stages:
                    jobs.append(("ck", task, agent, params, stage.name, i))
                for cond in ("baseline", "context_reset", "state_repair", "compaction"):
                    jobs.append(("nat", task, agent, params, cond, i))

    def one(job):
        kind, task, agent, params, what, i = job
        if kind == "ck":
            spec = TrialSpec(prereg_sha256="0" * 64, agent=agent, condition="baseline", protocol="p", task=task.name,
                             kind="checkpoint", stage=what, trial_index=i)
            r = run_checkpoint_trial(spec, task, SimAgent(params), backend, CheckpointProtocol(budget=budget), 7,
                                     trajectory_dir=Path(tmp) / "traj")
        else:
            spec = TrialSpec(prereg_sha256="0" * 64, agent=agent, condition=what, protocol="natural", task=task.name,
                             kind="natural", stage=None, trial_index=i)
            r = run_natural_trial(spec, task, SimAgent(params), backend, CONDITIONS[what], budget, 7,
                                  trajectory_dir=Path(tmp) / "traj")
        outs = [{k: o[k] for k in ("stage", "passed", "reward", "turns", "exit_reason", "rewards", "error")}
                for o in json.loads(r.stage_outcomes_json)]
        return json.dumps({"key": spec.key, "passed": r.passed, "stages_passed": r.stages_passed,
                           "exit_reason": r.exit_reason, "rewards": r.rewards_json, "harbor_reward": r.harbor_reward,
                           "artifacts": r.artifacts_json, "stages": outs}, sort_keys=True)

    with ThreadPoolExecutor(2) as pool:
        for line in pool.map(one, jobs):
            print(line)
