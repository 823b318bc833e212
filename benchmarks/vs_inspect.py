"""Cost per extra trial, side by side: hrbench (isolated) vs inspect-ai's `local` sandbox (isolates nothing)
vs the bare floor of two bubblewrap sandboxes, on the same trivial one-stage task, 2 workers.

The task: the workspace holds seed.txt (41); the agent's one command writes seed + 1 to answer.txt; the
verifier checks it is 42.
  * hrbench: a checkpoint trial of the oracle agent (benchmarks/sandbox_overhead.py's task): a fresh
    workspace, the command in the agent's sandbox, test.sh in the verifier's sandbox.
  * inspect-ai: one sample per trial, `sandbox="local"` (a temporary directory, plain subprocesses), the
    mock model, a solver that execs the command and a scorer that execs the check, `max_samples=2`.
    inspect-ai is installed by this script into a throwaway venv (default /tmp/hrbench-inspect-venv).
  * floor: per trial two `bwrap --unshare-all` processes (the command, then the check) over a fresh
    directory, two threads: namespaces and exec with nothing else.
  * confined: the floor's two sandboxes with hrbench's own confinement and nothing else of the harness:
    per trial its pooled cgroups and network namespace, each sandbox through the launcher (cgroups,
    rlimits, uid and capability drop) and hrbench's bwrap command line (masked /etc, sized /tmp and
    /dev/shm, read-only root and /dev), over a fresh directory. hrbench / confined is what the harness
    adds to its isolation; confined / floor is what the isolation costs.

Each side runs in a fresh process at n and 2n trials; per extra trial = (wall(2n) - wall(n)) / n, which
removes every fixed cost (imports, eval start-up, log writing). Rounds interleave the sides so the shared
machine's load falls on all alike; the medians over the rounds and their ratios are printed, for the wall
time and for the machine time of each side's whole process tree (a fresh cgroup-v1 `cpuacct` group per
measurement, kernel included, other users' load excluded: the steadier figure on a shared machine).

    .venv/bin/python benchmarks/vs_inspect.py [--rounds 3] [--trials 60] [--before CHECKOUT]
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

HERE = Path(__file__).resolve()
WORKERS = 2
COMMAND = "echo $(( $(cat seed.txt) + 1 )) > answer.txt"
CHECK = '[ "$(cat answer.txt)" = 42 ]'


def run_hrbench(trials: int) -> float:
    sys.path.insert(0, str(HERE.parent))
    from sandbox_overhead import measure

    with tempfile.TemporaryDirectory() as tmp:
        wall, _, passed = measure(trials, WORKERS, Path(tmp))
    assert passed == trials, f"hrbench: {passed} of {trials} passed"
    return wall


def run_inspect(trials: int) -> float:
    from inspect_ai import Task, eval
    from inspect_ai.dataset import Sample
    from inspect_ai.scorer import CORRECT, INCORRECT, Score, accuracy, scorer
    from inspect_ai.solver import solver
    from inspect_ai.util import sandbox

    @solver
    def agent():
        async def solve(state, generate):
            await sandbox().exec(["bash", "-c", COMMAND])
            return state
        return solve

    @scorer(metrics=[accuracy()])
    def verifier():
        async def score(state, target):
            result = await sandbox().exec(["bash", "-c", CHECK])
            return Score(value=CORRECT if result.success else INCORRECT)
        return score

    samples = [Sample(input="Write seed + 1 into answer.txt.", target="42", id=i, files={"seed.txt": "41\n"})
               for i in range(trials)]
    with tempfile.TemporaryDirectory() as tmp:
        start = time.perf_counter()
        logs = eval(Task(dataset=samples, solver=agent(), scorer=verifier(), sandbox="local"), model="mockllm/model",
                    max_samples=WORKERS, log_dir=tmp, display="none")
        wall = time.perf_counter() - start
    scores = logs[0].results.scores[0].metrics["accuracy"].value
    assert scores == 1.0, f"inspect-ai: accuracy {scores}"
    return wall


def run_floor(trials: int) -> float:
    bwrap = shutil.which("bwrap")
    base = [bwrap, "--unshare-all", "--die-with-parent", "--new-session", "--ro-bind", "/usr", "/usr",
            "--symlink", "usr/bin", "/bin", "--symlink", "usr/lib", "/lib", "--symlink", "usr/lib64", "/lib64",
            "--proc", "/proc", "--dev", "/dev", "--chdir", "/app"]

    def one(i: int, root: Path) -> bool:
        work = root / str(i)
        work.mkdir()
        (work / "seed.txt").write_text("41\n")
        sandbox = [*base, "--bind", str(work), "/app", "bash", "-c"]
        subprocess.run([*sandbox, COMMAND], check=True)
        return subprocess.run([*sandbox, CHECK]).returncode == 0

    with tempfile.TemporaryDirectory() as tmp:
        start = time.perf_counter()
        with ThreadPoolExecutor(WORKERS) as pool:
            passed = sum(pool.map(lambda i: one(i, Path(tmp)), range(trials)))
        wall = time.perf_counter() - start
    assert passed == trials, f"floor: {passed} of {trials} passed"
    return wall


def confined_trial(root: Path):
    """The confined side's trial as a function of its index (True when it passed), each in a folder of `root`."""
    from hrbench.envs.launch_env import LAUNCH_ENV
    from hrbench.envs.local.confine import (
        SandboxLimits,
        TrialCgroup,
        confined_argv,
        namespace_args,
        new_network_namespace,
        root_mounts,
        sandbox_owner,
    )

    limits = SandboxLimits()

    def sandbox(work: Path, group: TrialCgroup, netns: int | None, command: str, verifier: bool) -> int:
        args = root_mounts(limits) + ["--bind", str(work), "/app"] + namespace_args(
            nested_userns=verifier, chdir="/app", joined_netns=netns is not None)
        argv = confined_argv(args, ["/bin/bash", "-c", command], limits, group, netns)
        code = subprocess.run(argv, env=LAUNCH_ENV, pass_fds=() if netns is None else (netns,), cwd="/",
                              start_new_session=True, stdin=subprocess.DEVNULL).returncode
        group.kill()
        return code

    def one(i: int) -> bool:
        work = root / str(i)
        work.mkdir()
        (work / "seed.txt").write_text("41\n")
        sandbox_owner(work)
        netns = new_network_namespace()
        agent, verifier = TrialCgroup(f"c{i}", limits), TrialCgroup(f"c{i}-verifier", limits)
        try:
            assert sandbox(work, agent, netns, COMMAND, verifier=False) == 0
            return sandbox(work, verifier, netns, CHECK, verifier=True) == 0
        finally:
            agent.release()
            verifier.release()
            if netns is not None:
                os.close(netns)

    return one


def run_confined(trials: int) -> float:
    from hrbench.envs.local.confine import area_tempdir

    root = area_tempdir("vs-inspect")  # a folder the sandbox uid can reach, as the harness's are
    try:
        one = confined_trial(root)
        start = time.perf_counter()
        with ThreadPoolExecutor(WORKERS) as pool:
            passed = sum(pool.map(one, range(trials)))
        wall = time.perf_counter() - start
    finally:
        shutil.rmtree(root, ignore_errors=True)
    assert passed == trials, f"confined: {passed} of {trials} passed"
    return wall


SIDES = {"hrbench": run_hrbench, "inspect": run_inspect, "floor": run_floor, "confined": run_confined}


def inspect_python(venv: Path) -> str:
    """The throwaway venv's python, with inspect-ai installed on first use."""
    python = venv / "bin" / "python"
    if not python.exists():
        subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    if subprocess.run([str(python), "-c", "import inspect_ai"], capture_output=True).returncode != 0:
        subprocess.run([str(python), "-m", "pip", "install", "-q", "inspect-ai"], check=True)
    return str(python)


def one_measurement(python: str, side: str, trials: int, code: str | None = None) -> tuple[float, float]:
    """(wall of the trials, machine time of the side's whole process, imports included) in seconds;
    `code`: a checkout whose hrbench the side imports instead (PYTHONPATH)."""
    env = {**os.environ, "PYTHONPATH": code} if code else None
    side = "hrbench" if side == "hrbench-before" else side
    out = subprocess.run([python, str(HERE), "--side", side, "--trials", str(trials)], capture_output=True,
                         text=True, check=True, cwd=HERE.parent.parent, env=env).stdout
    wall, cpu = out.strip().splitlines()[-1].split()
    return float(wall), float(cpu)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--trials", type=int, default=60, help="n: each side runs n and 2n trials per round")
    parser.add_argument("--venv", type=Path, default=Path(tempfile.gettempdir()) / "hrbench-inspect-venv")
    parser.add_argument("--before", help="another checkout (e.g. `git archive` of the code before a change): "
                                         "measured as a fourth side, hrbench-before, in the same rounds")
    parser.add_argument("--side", choices=sorted(SIDES), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.side:
        sys.path.insert(0, str(HERE.parent))
        from trial_profile import group_cpu, own_cpuacct_group, release_cpuacct_group

        group = own_cpuacct_group()  # before any thread: every process of this side is counted
        wall = SIDES[args.side](args.trials)
        cpu = sum(group_cpu(group)) if group else float("nan")
        if group:
            release_cpuacct_group(group)
        print(wall, cpu)
        return
    pythons = {"hrbench": sys.executable, "inspect": inspect_python(args.venv), "floor": sys.executable,
               "confined": sys.executable}
    if args.before:
        pythons["hrbench-before"] = sys.executable
    sides = list(pythons)
    version = subprocess.run([pythons["inspect"], "-c", "import inspect_ai; print(inspect_ai.__version__)"],
                             capture_output=True, text=True).stdout.strip()
    print(f"{WORKERS} workers, n = {args.trials}, {args.rounds} rounds; inspect-ai {version}; "
          f"load at start {Path('/proc/loadavg').read_text().split()[0]}")
    wall: dict[str, list[float]] = {side: [] for side in sides}
    cpu: dict[str, list[float]] = {side: [] for side in sides}
    for r in range(args.rounds):
        order = sides[r % len(sides):] + sides[:r % len(sides)]  # rotate who goes first
        for side in order:
            code = args.before if side == "hrbench-before" else None
            small = one_measurement(pythons[side], side, args.trials, code)
            large = one_measurement(pythons[side], side, 2 * args.trials, code)
            wall[side].append(1000 * (large[0] - small[0]) / args.trials)
            cpu[side].append(1000 * (large[1] - small[1]) / args.trials)
        print(f"round {r + 1}: " + ", ".join(f"{s} {wall[s][-1]:.1f} ms ({cpu[s][-1]:.1f} ms CPU)" for s in sides)
              + f" per extra trial (load {Path('/proc/loadavg').read_text().split()[0]})", flush=True)
    for label, values in (("wall at 2 workers", wall), ("machine time (cpuacct: the side's whole process tree, "
                                                          "kernel included)", cpu)):
        med = {side: statistics.median(v) for side, v in values.items()}
        print(f"medians per extra trial, {label}: " + ", ".join(f"{s} {m:.1f} ms" for s, m in med.items())
              + f"; hrbench / inspect-ai = {med['hrbench'] / med['inspect']:.2f}, "
              f"hrbench / two-bwrap floor = {med['hrbench'] / med['floor']:.2f}, "
              f"hrbench / confined = {med['hrbench'] / med['confined']:.2f}, "
              f"confined / floor = {med['confined'] / med['floor']:.2f}"
              + (f"; hrbench-before / inspect-ai = {med['hrbench-before'] / med['inspect']:.2f}, "
                 f"hrbench-before / floor = {med['hrbench-before'] / med['floor']:.2f}" if args.before else ""))


if __name__ == "__main__":
    main()
