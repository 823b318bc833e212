"""One trial under hostile load, run as a program so its peak memory is its own:

    python -m tests.security.hostile_trial CASE OUT_JSON

CASE is `reply_200mb` (a command agent replies with a 200 MB line), `verifier_1gb` (the stage's
verifier prints 1 GB) or `tmp_2gb` (the agent's command writes 2 GB into /tmp). Writes the trial's
exit reason, its trajectory's last steps and the process's peak RSS (VmHWM) to OUT_JSON.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
import tempfile
from pathlib import Path

from hrbench.agents.command import CommandAgent
from hrbench.agents.specs import CommandAgentSpec
from hrbench.agents.oracle import OracleAgent
from hrbench.envs.local import LocalBackend
from hrbench.harness.records import TrialSpec
from hrbench.harness.trajectory import read_trajectory
from hrbench.harness.trials import run_checkpoint_trial
from hrbench.protocol import Budget, CheckpointProtocol
from hrbench.tasks.loader import load_task

TINY_TASK = Path(__file__).resolve().parents[1] / "fixtures" / "registry" / "tiny-chain"
BUDGET = Budget(max_turns=3, timeout_sec=60, command_timeout_sec=30)
PROGRAMS = {
    # one reply line of 200 MB, written as fast as the pipe takes it
    "reply_200mb": "sys.stdin.readline(); sys.stdin.readline()\n"
                   "chunk = 'x' * (1 << 20)\n"
                   "sys.stdout.write('{\"analysis\": \"')\n"
                   "for _ in range(200):\n    sys.stdout.write(chunk)\n"
                   "sys.stdout.write('\"}\\n'); sys.stdout.flush()\n"
                   "for line in sys.stdin: pass\n",
    "tmp_2gb": "for line in sys.stdin:\n"
               "    msg = json.loads(line)\n"
               "    if msg['type'] != 'observation': continue\n"
               "    keys = 'head -c 2G /dev/zero > /tmp/big; echo rc=$?; ls -l /tmp\\n' if msg['turn'] == 1 else ''\n"
               "    print(json.dumps({'commands': [{'keystrokes': keys, 'duration': 30}] if keys else [],\n"
               "                      'task_complete': msg['turn'] > 1}), flush=True)\n",
}


def _peak_rss_kb() -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1])
    raise RuntimeError("no VmHWM in /proc/self/status")


def main(case: str, out: Path) -> None:
    work = Path(tempfile.mkdtemp(prefix="hrbench-hostile-"))
    os.chmod(work, 0o755)  # the agent program's directory must be readable by the sandbox uid
    try:
        registry = work / "tiny-chain"
        shutil.copytree(TINY_TASK, registry)
        if case == "verifier_1gb":
            test = registry / "steps" / "make" / "tests" / "test.sh"
            test.write_text("head -c 1000000000 /dev/zero | tr '\\0' v\n" + test.read_text())
            agent = OracleAgent()
        else:
            program = work / "agent" / "agent.py"  # beside the task package, not above it (that is refused)
            program.parent.mkdir(mode=0o755)
            program.write_text("import json, sys\n" + PROGRAMS[case])
            agent = CommandAgent(CommandAgentSpec(id="hostile", kind="command",
                                                  argv=["/usr/bin/python3", str(program)]))
        task = load_task(registry)
        spec = TrialSpec(prereg_sha256="0" * 64, agent="hostile", condition="baseline", protocol=case,
                         task=task.name, kind="checkpoint", stage="make", trial_index=0)
        record = run_checkpoint_trial(spec, task, agent, LocalBackend(work / "cache"),
                                      CheckpointProtocol(budget=BUDGET), 0, trajectory_dir=work / "trajectories")
        steps = read_trajectory(work / record.trajectory_path)["steps"] if record.trajectory_path else []
        out.write_text(json.dumps({"exit_reason": record.exit_reason, "error": record.error, "passed": record.passed,
                                   "peak_rss_kb": _peak_rss_kb(), "steps": steps[-3:]}))
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main(sys.argv[1], Path(sys.argv[2]))
