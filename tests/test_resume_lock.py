"""Protects resume and exclusivity of an output directory: one run holds OUT at a time (a second says
who holds it and exits), a dead run's lock is taken over, and trials that ended in harness_error on
one `hrbench run` are retried on the next, leaving none in the estimate."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pandas as pd
import pytest

from hrbench.agents.command import CommandAgent
from hrbench.agents.specs import CommandAgentSpec
from hrbench.envs.local import LocalBackend
from hrbench.harness.journal import TrialJournal, run_trials
from hrbench.harness.trials import run_checkpoint_trial
from hrbench.locking import LOCK_NAME, OutDirBusy, OutDirLock
from hrbench.protocol import Budget, CheckpointProtocol, Retries
from hrbench.tasks.loader import load_task
from tests.agents.helpers import SOLVE, spec
from tests.agents.scripted_server import ScriptedServer, reply
from tests.conftest import FIXTURES, stored_keys, stored_table
from tests.faults import FaultInjector, slow_verifier_registry

ROOT = Path(__file__).resolve().parent.parent
PARTS = {"1": "make", "2": "double", "3": "report"}


def _hrbench(*args: str, **kwargs) -> subprocess.Popen:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.Popen([sys.executable, "-m", "pipelines.cli", *args], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=env, cwd=ROOT, **kwargs)


def _partitions(out: Path, table: str) -> list[tuple[str, str]]:
    return [tuple(k.split("/")[-2:]) for k in stored_keys(out, f"tables/{table}")]


def _trial_tables(out: Path) -> pd.DataFrame:
    return pd.concat([stored_table(out, f"tables/{t}/{a}/{k}") for t in ("checkpoint_trials", "baseline/natural_trials")
                      for a, k in _partitions(out, t)])


def _journal_keys(out: Path) -> list[str]:
    return [json.loads(line)["trial_key"] for path in (out / "journal").rglob("*.jsonl") if path.parent.name != "attempts"
            for line in path.read_text().splitlines()]


# -- the lock ------------------------------------------------------------------------------------


def test_a_second_lock_on_one_out_dir_names_its_holder(tmp_path: Path):
    with OutDirLock(tmp_path / "out", command="hrbench run study.yaml --out out") as first:
        assert first.holder().pid == os.getpid()
        with pytest.raises(OutDirBusy) as info:
            OutDirLock(tmp_path / "out").acquire()
    message = str(info.value)
    assert message.startswith(f"{tmp_path / 'out'} is in use by another hrbench run (pid {os.getpid()} on ")
    assert "hrbench run study.yaml --out out); wait for it to finish, or use another --out directory" in message
    with OutDirLock(tmp_path / "out") as again:  # released: free again, and the file was emptied
        assert again.took_over is None


def test_the_lock_of_a_killed_run_is_taken_over(tmp_path: Path):
    out = tmp_path / "out"
    holder = subprocess.Popen(
        [sys.executable, "-c", "import sys, time\nfrom hrbench.locking import OutDirLock\n"
         "OutDirLock(sys.argv[1], command='hrbench run killed.yaml').acquire()\nprint('locked', flush=True)\n"
         "time.sleep(120)\n", str(out)],
        stdout=subprocess.PIPE, text=True, env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert holder.stdout.readline().strip() == "locked"
    with pytest.raises(OutDirBusy, match=f"pid {holder.pid} on .*hrbench run killed.yaml"):
        OutDirLock(out).acquire()
    holder.send_signal(signal.SIGKILL)
    holder.wait(timeout=10)
    with OutDirLock(out) as lock:  # the kernel dropped the dead run's flock; its record is still there
        assert lock.took_over is not None and lock.took_over.pid == holder.pid
        assert lock.holder().pid == os.getpid()


def test_an_out_dir_that_is_a_file_is_one_clear_error(tmp_path: Path):
    (tmp_path / "out").write_text("not a directory")
    with pytest.raises(OutDirBusy, match=r"out: cannot be an output directory: a file is in the way"):
        OutDirLock(tmp_path / "out").acquire()


def test_two_concurrent_runs_on_one_out_dir_the_second_exits_and_no_trial_runs_twice(tmp_path: Path):
    study = tmp_path / "study.yaml"
    study.write_text(f"name: lock-test\ntasks: {{registry: {FIXTURES / 'registry'}}}\n"
                     "agents: [{id: steady, kind: sim, sim: {skill: 0.9}}]\n"
                     "trials: {checkpoint: 4, natural: 4}\nbootstrap: {n_boot: 200, seed: 1}\n")
    out = tmp_path / "out"
    first = _hrbench("run", str(study), "--out", str(out))
    deadline = time.monotonic() + 60
    while not ((out / LOCK_NAME).is_file() and (out / LOCK_NAME).read_text().strip()):
        assert first.poll() is None and time.monotonic() < deadline, first.communicate()
        time.sleep(0.05)
    second = _hrbench("run", str(study), "--out", str(out))
    _, second_err = second.communicate(timeout=60)
    assert first.poll() is None, "the first run ended before the second tried: the test proved nothing"
    _, first_err = first.communicate(timeout=240)
    assert first.returncode == 0, first_err[-3000:]
    assert second.returncode == 1
    assert f"error: {out} is in use by another hrbench run (pid {first.pid} on " in second_err
    assert "Traceback" not in second_err
    keys = _trial_tables(out)["trial_key"]
    assert len(keys) == 3 * 4 + 4 and keys.is_unique
    journal = _journal_keys(out)
    assert len(journal) == len(set(journal)) == len(keys)


# -- resume after harness_error --------------------------------------------------------------------


def _player(body: dict) -> str:
    """A stateless model that solves each part of tiny-chain it is given."""
    last = body["messages"][-1]["content"]
    if "Here is part " in last:
        return reply([SOLVE[PARTS[last.split("Here is part ", 1)[1][0]]]], complete=True)
    return reply(complete=True)


def test_trials_that_ended_in_harness_error_are_retried_by_the_next_run(tmp_path: Path):
    server = ScriptedServer()
    try:
        server.responder = _player
        server.script = [{"status": 500}] * 2  # the endpoint is down for the first two calls
        study = tmp_path / "study.yaml"
        study.write_text(
            f"name: resume-test\ntasks: {{registry: {FIXTURES / 'registry'}}}\n"
            f"agents: [{{id: flaky, kind: llm, model: m, base_url: '{server.base_url}', api_key_env: null, "
            "max_retries: 0, timeout_sec: 20}]\n"
            "checkpoint: {budget: {max_turns: 4, timeout_sec: 60, command_timeout_sec: 5}}\n"
            "trials: {checkpoint: 2, natural: 2}\nbootstrap: {n_boot: 200, seed: 1}\nconcurrency: 2\n"
            # no retry inside the run, and no tolerance: the first run stops, the second must finish the trials
            "retries: {max_attempts: 1, max_missing_share: 0}\n")
        out = tmp_path / "out"
        first = _hrbench("run", str(study), "--out", str(out))
        _, first_err = first.communicate(timeout=240)
        attempts = [json.loads(line) for path in (out / "journal").rglob("attempts/*.jsonl")
                    for line in path.read_text().splitlines()]
        assert len(attempts) == 2 and {a["exit_reason"] for a in attempts} == {"harness_error"}, first_err[-2000:]
        assert all("failed 1 attempt(s)" in a["error"] for a in attempts)
        assert first.returncode == 1 and "re-run the same command: " in first_err, first_err[-2000:]
        assert "report it" not in first_err

        second = _hrbench("run", str(study), "--out", str(out))
        _, second_err = second.communicate(timeout=240)
        assert second.returncode == 0, second_err[-3000:]
        trials = _trial_tables(out)
        assert len(trials) == 3 * 2 + 2 and trials["trial_key"].is_unique
        assert (trials["exit_reason"] != "harness_error").all()
        retried = {a["trial_key"] for a in attempts}
        assert retried <= set(trials["trial_key"])  # the failed trials ran again and now have results
        estimates = stored_table(out, "tables/baseline/stage_estimates/flaky.parquet")
        assert (estimates["m"] == 2).all()  # every declared trial is in the estimate, none missing
    finally:
        server.close()


@pytest.mark.slow
def test_trials_whose_verifier_was_killed_are_retried_by_the_next_run(tmp_path: Path):
    """The bug of issue 21: a second `hrbench run` exited 0 without retrying `verifier_error` trials."""
    registry = slow_verifier_registry(FIXTURES / "registry", tmp_path / "registry", seconds=0.5)
    study = tmp_path / "study.yaml"
    study.write_text(f"name: verifier-resume\ntasks: {{registry: {registry}}}\n"
                     "agents: [{id: steady, kind: sim, sim: {skill: 0.9}}]\n"
                     "trials: {checkpoint: 2, natural: 2}\nbootstrap: {n_boot: 200, seed: 1}\nconcurrency: 2\n"
                     "retries: {max_attempts: 1, max_missing_share: 0}\n")  # no in-run retry, no tolerance
    out = tmp_path / "out"
    first = _hrbench("run", str(study), "--out", str(out))
    injector = FaultInjector(first, out, limit=3, pause=(0.0, 0.005), chance=1.0)
    injector.start()
    _, first_err = first.communicate(timeout=300)
    injector.join(timeout=10)
    assert injector.killed >= 1
    attempts = [json.loads(line) for path in (out / "journal").rglob("attempts/*.jsonl")
                for line in path.read_text().splitlines()]
    assert "verifier_error" in {a["exit_reason"] for a in attempts}, (injector.killed, first_err[-2000:])
    assert first.returncode == 1 and "re-run the same command: " in first_err, first_err[-2000:]

    second = _hrbench("run", str(study), "--out", str(out))
    _, second_err = second.communicate(timeout=300)
    assert second.returncode == 0, second_err[-3000:]
    trials = _trial_tables(out).set_index("trial_key")
    assert trials["exit_reason"].isin(["passed", "failed"]).all()  # every trial has its result now
    retried = {a["trial_key"] for a in attempts}
    assert (trials.loc[sorted(retried), "attempts"] == 2).all()


CRASH_ONCE = """
import hashlib, json, os, sys
SOLVE = %r
for line in sys.stdin:
    msg = json.loads(line)
    if msg["type"] == "begin_trial":
        marker = hashlib.sha256(msg["trial_key"].encode()).hexdigest()[:16]
        if not os.path.exists(marker):  # its working directory (declared in its config) persists across runs
            open(marker, "w").close()
            sys.exit("agent: crashed on its first call")
    elif msg["type"] == "observation":
        print(json.dumps({"analysis": "", "plan": "", "commands": [{"keystrokes": SOLVE[msg["stage"]],
                          "duration": 1}], "task_complete": True}), flush=True)
"""


def test_a_command_agent_that_crashes_once_completes_on_the_next_run(tmp_path: Path):
    # The program runs in its own sandbox as the sandbox uid: its folder must be reachable by that uid
    # (pytest's tmp_path is not) and declared writable, and it runs Debian's python3 (the venv's is not there).
    state = Path(tempfile.mkdtemp(prefix="hrbench-crashy-"))
    os.chmod(state, 0o777)
    (state / "agent.py").write_text(CRASH_ONCE % SOLVE)
    agent_spec = CommandAgentSpec(id="crashy", kind="command", argv=["/usr/bin/python3", "agent.py"], cwd=str(state),
                                  writable=[str(state)], reply_timeout_sec=20)
    task, backend, out = load_task(FIXTURES / "registry" / "tiny-chain"), LocalBackend(tmp_path / "cache"), tmp_path
    protocol = CheckpointProtocol(budget=Budget(max_turns=4, timeout_sec=60, command_timeout_sec=5))
    specs = [spec("checkpoint", stage=s, index=i) for s in ("make", "double") for i in range(2)]

    def execute(trial):
        return run_checkpoint_trial(trial, task, CommandAgent(agent_spec), backend, protocol, 0,
                                    trajectory_dir=out / "trajectories")

    def journal() -> TrialJournal:
        return TrialJournal(out / "journal" / "crashy.jsonl", out)

    once = Retries(max_attempts=1)  # what the next run does (in-run retries: tests/harness/test_journal.py)
    first = run_trials(specs, execute, journal(), concurrency=2, progress=False, retries=once)
    assert {r.exit_reason for r in first} == {"harness_error"}
    assert all("crashed on its first call" in r.error for r in first)
    second = run_trials(specs, execute, journal(), concurrency=2, progress=False, retries=once)
    assert [r.exit_reason for r in second] == ["passed"] * 4
    attempts = journal().attempts()
    assert sorted(r.trial_key for r in attempts) == sorted(s.key for s in specs)
    assert all((out / r.trajectory_path).is_file() and ".attempt-1." in r.trajectory_path for r in attempts)
    assert all((out / r.trajectory_path).is_file() for r in second)
