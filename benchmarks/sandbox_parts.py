"""What each part of hrbench's confinement costs: machine time per sandbox of the confined sandbox (vs_inspect.py's
confined side: launcher, pooled cgroups, the trial's network namespace, hrbench's bwrap command line) with one
part taken away or added, running `/bin/true`.

The sandboxes run one after another in this process's own cpuacct group (`cpuacct.usage`, nanoseconds: the
whole process tree, kernel included, other users' load excluded). Rounds interleave the variants, so a drift of
the machine's speed falls on all alike; the medians over the rounds are printed, with each variant's paired
difference to the confined sandbox (the median over rounds of variant minus confined in the same round).

    .venv/bin/python benchmarks/sandbox_parts.py [--rounds 5] [--sandboxes 200]
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import subprocess
import sys
from pathlib import Path

from hrbench.envs.launch_env import LAUNCH_ENV
from hrbench.envs.local.confine import (
    SandboxLimits,
    TrialCgroup,
    area_tempdir,
    confined_argv,
    namespace_args,
    new_network_namespace,
    root_mounts,
    sandbox_owner,
)

sys.path.insert(0, str(Path(__file__).resolve().parent))
from trial_profile import own_cpuacct_group, release_cpuacct_group  # noqa: E402

LIMITS = SandboxLimits(max_pids=1 << 20)  # the sandboxes of a round share one trial cgroup
_MB = 1024 * 1024


def without(args: list[str], part: list[str]) -> list[str]:
    """`args` less the first occurrence of the run of arguments `part`."""
    for i in range(len(args) - len(part) + 1):
        if args[i:i + len(part)] == part:
            return args[:i] + args[i + len(part):]
    raise ValueError(f"{part} is not in the command line")


def variants(work: Path, joined_netns: bool) -> dict[str, list[str]]:
    """bwrap arguments of each variant (the confined agent sandbox first)."""
    mounts = root_mounts(LIMITS)
    app = ["--bind", str(work), "/app"]
    tail = namespace_args(chdir="/app", joined_netns=joined_netns)
    confined = mounts + app + tail
    etc = mounts.index("/etc")
    tmp = ["--size", str(LIMITS.tmp_mb * _MB), "--tmpfs", "/tmp"]
    shm = ["--size", str(LIMITS.shm_mb * _MB), "--tmpfs", "/dev/shm"]
    extra_binds = [a for k in range(4) for a in ("--bind", str(work), f"/x{k}")]  # as many as a verifier's
    return {
        "confined (agent)": confined,
        "verifier (nested user namespaces allowed)": mounts + app + namespace_args(
            nested_userns=True, chdir="/app", joined_netns=joined_netns),
        "- the sized root tmpfs": without(confined, ["--size", str(1 << 20), "--tmpfs", "/"]),
        "- the /etc bind": without(confined, mounts[etc - 2:etc + 1]),
        "- the sized /tmp and /dev/shm": without(without(confined, tmp), shm),
        "- the read-only / and /dev": without(without(confined, ["--remount-ro", "/dev"]), ["--remount-ro", "/"]),
        "- --as-pid-1 (bwrap's own reaper)": without(confined, ["--as-pid-1"]),
        "+ four binds": mounts + app + extra_binds + tail,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--sandboxes", type=int, default=200, help="sandboxes per variant per round")
    args = parser.parse_args()
    group = own_cpuacct_group()  # before any thread (the network namespace maker is one)
    if group is None:
        sys.exit("needs root and a cpuacct group apart from cpu (see trial_profile.py)")
    root = area_tempdir("parts")
    work = root / "work"
    work.mkdir()
    sandbox_owner(work)
    netns, trial = new_network_namespace(), TrialCgroup("parts", LIMITS)
    usage = group / "cpuacct.usage"

    def run(bwrap_args: list[str], n: int) -> None:
        argv = confined_argv(bwrap_args, ["/bin/true"], LIMITS, trial, netns)
        for _ in range(n):
            done = subprocess.run(argv, env=LAUNCH_ENV, pass_fds=() if netns is None else (netns,), cwd="/",
                                  start_new_session=True, stdin=subprocess.DEVNULL, capture_output=True, text=True)
            if done.returncode != 0:
                raise SystemExit(f"a sandbox failed ({done.returncode}): {done.stderr.strip()}")
        trial.kill()

    made = variants(work, joined_netns=netns is not None)
    ms: dict[str, list[float]] = {name: [] for name in made}
    try:
        for r in range(args.rounds):
            for name, bwrap_args in made.items():
                run(bwrap_args, 10)  # warm
                before = int(usage.read_text())
                run(bwrap_args, args.sandboxes)
                ms[name].append((int(usage.read_text()) - before) / args.sandboxes / 1e6)
            print(f"round {r + 1}: " + ", ".join(f"{name} {v[-1]:.2f}" for name, v in ms.items()), flush=True)
    finally:
        trial.release()
        release_cpuacct_group(group)
        shutil.rmtree(root, ignore_errors=True)
    reference = ms["confined (agent)"]
    print(f"machine time per sandbox, medians of {args.rounds} rounds of {args.sandboxes}:")
    for name, values in ms.items():
        paired = statistics.median(v - c for v, c in zip(values, reference))
        print(f"  {name:45s} {statistics.median(values):6.2f} ms  ({paired:+.2f} ms against the confined sandbox)")


if __name__ == "__main__":
    main()
