"""Stage-trials per second for sim agents on the local backend, and where the wall time goes.

Runs checkpoint trials (one stage each) and natural rollouts of a sim agent over the
built-in tasks, first with one worker (so time can be attributed) and then with the
study's pool. "Outside agent and verifier" = wall time not spent inside a stage's
agent turns (agent decision + sandboxed commands) or its verifier: snapshot copies,
journal writes, scheduling.

    .venv/bin/python benchmarks/trial_throughput.py [--trials 10] [--workers 2]
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path

import yaml

from hrbench.study_run import StudyRun

STUDY = {
    "name": "throughput",
    "tasks": {"registry": "builtin"},
    "agents": [{"id": "sim", "kind": "sim", "sim": {"skill": 0.9, "context_rot": 0.1, "defect_rate": 0.2,
                                                      "defect_penalty": 0.3}}],
    "trials": {"checkpoint": 10, "natural": 10},
}


def measure(trials: int, workers: int) -> dict:
    with tempfile.TemporaryDirectory() as tmp:
        study = {**STUDY, "trials": {"checkpoint": trials, "natural": trials}, "concurrency": workers}
        path = Path(tmp) / "study.yaml"
        path.write_text(yaml.safe_dump(study))
        run = StudyRun.from_file(path, Path(tmp) / "out", progress=False)
        for task in run.design.tasks:  # snapshots are built once per study; keep them out of the rate
            for i in range(task.n_stages):
                run.runner.backend.checkpoint_state(task, i)
        start = time.perf_counter()
        records = []
        for task in run.design.tasks:
            records += run.runner.run_checkpoint_trials("sim", task.name)
            records += run.runner.run_natural_trials("sim", task.name)
        wall = time.perf_counter() - start
    stage_runs = [o for r in records for o in json.loads(r.stage_outcomes_json)]
    inside = sum(o["wall_s"] for o in stage_runs)
    return {
        "workers": workers, "trials": len(records), "stage_trials": len(stage_runs), "wall_s": wall,
        "stage_trials_per_s": len(stage_runs) / wall,
        "verifier_share": sum(o["verifier_s"] for o in stage_runs) / (wall * workers),
        "outside_share": max(0.0, 1 - inside / (wall * workers)),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=10, help="m_i and m_0 per task")
    parser.add_argument("--workers", type=int, default=2, help="pool size for the second measurement")
    args = parser.parse_args()
    for workers in (1, args.workers):
        m = measure(args.trials, workers)
        print(f"workers={m['workers']}: {m['stage_trials']} stage-trials in {m['wall_s']:.1f} s = "
              f"{m['stage_trials_per_s']:.1f} stage-trials/s; verifier {m['verifier_share']:.0%} of worker time; "
              f"outside agent+verifier {m['outside_share']:.0%}")


if __name__ == "__main__":
    main()
