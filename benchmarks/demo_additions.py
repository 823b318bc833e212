"""What the demo's transduction family and depth measurement add to its run: wall and CPU time.

The demo runs each step as one Dagster run over every task (the runs per step do not grow with
the task count), so what its transduction tasks and its `depth:` section add is the work of
their trials and depth rollouts. This runs exactly that work, on the local backend with the demo's
agents, trial counts and concurrency, into a scratch output directory:

* the checkpoint trials and the natural rollouts of every condition of the demo, for each agent and
  each transduction task (the partitions run as the demo runs them, `concurrency` trials at once);
* the `task_depth` table (every task the demo's `depth:` names, several tasks at once).

CPU time counts this process and its sandboxes (children), so it is the figure that holds on a
shared machine; wall time is the one to compare with the demo's.

    .venv/bin/python benchmarks/demo_additions.py
"""

from __future__ import annotations

import resource
import tempfile
import time
from pathlib import Path

from hrbench.protocol import DEMO_STUDY
from hrbench.structure.study_depth import measure_study_depth
from hrbench.study_run import StudyRun
from hrbench.transduction.positions import is_transduction_task


def _cpu() -> float:
    own, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


def _timed(label: str, work) -> tuple[float, float]:
    wall, cpu = time.monotonic(), _cpu()
    count = work()
    wall, cpu = time.monotonic() - wall, _cpu() - cpu
    print(f"{label:<40} {count:>5} {wall:>8.1f} s wall {cpu:>8.1f} s CPU")
    return wall, cpu


def main() -> None:
    with tempfile.TemporaryDirectory(prefix="hrbench-demo-additions-") as tmp:
        run = StudyRun.from_file(DEMO_STUDY, Path(tmp), progress=False)
        study, runner = run.study, run.runner
        tasks = [t.name for t in run.design.tasks if is_transduction_task(t)]
        agents = [a.id for a in study.agents]
        print(f"demo additions: {len(tasks)} transduction tasks x {len(agents)} agents x "
              f"{len(study.condition_names)} condition(s); depth of {len(study.depth.tasks or run.design.tasks)} "
              f"tasks with {study.depth.agents or agents}")
        print(f"{'':<40} {'rows':>5}")
        totals = [
            _timed("checkpoint trials", lambda: sum(len(runner.run_checkpoint_trials(a, t))
                                                    for a in agents for t in tasks)),
            _timed("natural rollouts", lambda: sum(len(runner.run_natural_trials(a, t, c)) for a in agents
                                                   for t in tasks for c in study.condition_names)),
            _timed("task_depth", lambda: len(measure_study_depth(run.design, runner.backend, run.stores))),
        ]
        print(f"{'total':<40} {'':>5} {sum(w for w, _ in totals):>8.1f} s wall "
              f"{sum(c for _, c in totals):>8.1f} s CPU")


if __name__ == "__main__":
    main()
