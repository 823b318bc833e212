"""What orchestration costs: Dagster runs and wall time of a study whose trials are all journaled.

    python benchmarks/orchestration.py                 # 10, 100, 1000 synthetic one-stage tasks
    python benchmarks/orchestration.py --tasks 10 100  # a subset
    python benchmarks/orchestration.py --demo          # the demo: fresh run vs fully journaled re-run

Synthetic mode writes N one-stage tasks and a study with one agent, freezes the protocol, writes
every trial into the journal (as a finished run would leave it), then launches the study's step
jobs exactly as `hrbench run` does (registration, checkpoint trials, expected success, natural
trials, residuals, report). Nothing is left to run, so the wall time is what the jobs, the IO
manager, the checks and the estimators cost around the trials; the runs show that their number
does not grow with the tasks. The setup step (verifier audit of every task) is real work, not
orchestration, and is left out here; `--demo` includes it (a re-run reuses the stored audit).
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import tempfile
import time
from datetime import datetime, timedelta, timezone
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from dagster import DagsterInstance  # noqa: E402

import pipelines.definitions  # noqa: E402,F401  (imports are process start-up, not orchestration: paid before timing)
from hrbench.catalogue import StudyNames  # noqa: E402
from hrbench.harness.records import TrialRecord  # noqa: E402
from hrbench.study_run import StudyRun  # noqa: E402
from hrbench.steps import steps_for  # noqa: E402
from pipelines.defs.study.jobs import step_tags  # noqa: E402
from pipelines.materialize import launch_step  # noqa: E402

AGENT = "sim-bench"


def write_tasks(registry: Path, n: int) -> None:
    for i in range(n):
        root = registry / f"synthetic-{i:04d}"
        (root / "environment").mkdir(parents=True)
        (root / "environment" / "Dockerfile").write_text("FROM debian:bookworm-slim\nWORKDIR /app\n")
        step = root / "steps" / "only"
        (step / "solution").mkdir(parents=True)
        (step / "tests").mkdir()
        (step / "instruction.md").write_text(f"Write {i} into /app/out.txt.\n")
        (step / "solution" / "solve.sh").write_text(f"#!/bin/bash\n# hrbench:key-begin\necho {i} > out.txt\n"
                                                    "# hrbench:key-end\n")
        (step / "tests" / "test.sh").write_text(
            "#!/bin/bash\nmkdir -p /logs/verifier\n"
            f'if [ "$(cat /app/out.txt 2>/dev/null)" = "{i}" ]; then echo 1; else echo 0; fi '
            "> /logs/verifier/reward.txt\n")
        (root / "task.toml").write_text(
            f'version = "1.0"\n[task]\nname = "synthetic-{i:04d}"\ndescription = "one stage"\n'
            f'[metadata.hrbench]\nfamily = "synthetic-{i % 10}"\nstructure = "deep"\n'
            '[environment]\nworkdir = "/app"\n[[steps]]\nname = "only"\n')


def journal_everything(run: StudyRun) -> int:
    """Every checkpoint and natural trial of the study, as finished trials in their journals."""
    n = 0
    # the evidence-order check wants natural rollouts to start after P_expected is fixed (a later step here)
    now = datetime.now(timezone.utc)
    started = {"checkpoint": now.isoformat(timespec="milliseconds"),
               "natural": (now + timedelta(days=1)).isoformat(timespec="milliseconds")}
    for task in run.design.tasks:
        for kind, specs, condition in (("checkpoint", run.runner.checkpoint_specs(AGENT, task.name), None),
                                       ("natural", run.runner.natural_specs(AGENT, task.name, "baseline"), "baseline")):
            journal = run.runner._journal(kind, AGENT, task.name, condition)
            for i, spec in enumerate(specs):
                passed = (hash(spec.key) + i) % 5 != 0  # mostly passing, never all: every estimate is defined
                journal.append(TrialRecord(
                    **spec.model_dump(), trial_key=spec.key, passed=passed, stages_passed=int(passed),
                    stopped_stage=None if passed else "only", turns=2, wall_s=0.1, agent_s=0.05, verifier_s=0.05,
                    exit_reason="passed" if passed else "failed", stage_outcomes_json="[]", started_at=started[kind]))
                n += 1
    return n


def synthetic(n_tasks: int) -> dict:
    with tempfile.TemporaryDirectory(prefix="hrbench-orch-") as scratch:
        root = Path(scratch)
        write_tasks(root / "registry", n_tasks)
        study = root / "study.yaml"
        study.write_text(yaml.safe_dump({
            "name": "orchestration", "tasks": {"registry": str(root / "registry")},
            "agents": [{"id": AGENT, "kind": "sim", "sim": {"skill": 0.9}}],
            "trials": {"checkpoint": 3, "natural": 5}, "bootstrap": {"n_boot": 200, "seed": 1}, "concurrency": 4,
        }))
        out = root / "out"
        run = StudyRun.from_file(study, out, progress=False)
        run.write_preregistration()
        trials = journal_everything(run)
        instance = DagsterInstance.ephemeral()
        dagster_names = StudyNames.of(run.study.name)
        instance.add_dynamic_partitions(dagster_names.agents, [AGENT])
        names = [t.name for t in run.design.tasks]
        per_step = {}
        start = time.perf_counter()
        for step in steps_for(run.study)[1:]:
            t0 = time.perf_counter()
            agent = AGENT if step.partitioned != "none" else None
            launch_step(instance, dagster_names.name(step.job), {"hrbench/study": "orchestration", **step_tags(step, agent, names)},
                        study, out)
            per_step[step.job] = time.perf_counter() - t0
        wall = time.perf_counter() - start
        runs = len(instance.get_runs())
    return {"tasks": n_tasks, "trials": trials, "runs": runs, "wall_s": wall, "per_step": per_step}


def _runs(home: Path) -> int:
    count = subprocess.run([sys.executable, "-c", (
        "from dagster import DagsterInstance; "
        f"print(len(DagsterInstance.local_temp(tempdir={str(home)!r}).get_runs()))")],
        capture_output=True, text=True).stdout.strip()
    return int(count)


def demo() -> None:
    with tempfile.TemporaryDirectory(prefix="hrbench-demo-") as scratch:
        out = Path(scratch) / "demo-out"
        command = [sys.executable, "-m", "pipelines.cli", "demo", "--out", str(out)]
        timings, runs = [], []
        for label in ("fresh", "journaled re-run"):
            t0 = time.perf_counter()
            done = subprocess.run(command, cwd=REPO, capture_output=True, text=True)
            timings.append(time.perf_counter() - t0)
            if done.returncode != 0:
                sys.exit(f"demo ({label}) failed:\n{done.stderr[-3000:]}")
            runs.append(_runs(out / ".dagster") - sum(runs))
        shutil.rmtree(out, ignore_errors=True)
    fresh, rerun = timings
    print(f"demo: fresh {fresh:.1f} s ({runs[0]} Dagster runs), fully journaled re-run {rerun:.1f} s "
          f"({runs[1]} runs) = {100 * rerun / fresh:.1f}% of fresh")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tasks", type=int, nargs="*", default=[10, 100, 1000])
    parser.add_argument("--demo", action="store_true", help="time the demo fresh and re-run instead")
    args = parser.parse_args()
    if args.demo:
        demo()
        return
    print(f"{'tasks':>6} {'trials':>7} {'runs':>5} {'wall s':>8} {'ms/task':>8}  slowest steps")
    for n in args.tasks:
        r = synthetic(n)
        slowest = ", ".join(f"{k.removesuffix('_job')} {v:.1f}s" for k, v in
                            sorted(r["per_step"].items(), key=lambda kv: -kv[1])[:3])
        print(f"{r['tasks']:>6} {r['trials']:>7} {r['runs']:>5} {r['wall_s']:>8.1f} "
              f"{1000 * r['wall_s'] / r['tasks']:>8.1f}  {slowest}", flush=True)


if __name__ == "__main__":
    main()
