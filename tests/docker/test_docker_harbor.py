"""Protects Harbor parity on the docker backend: the reference solution runs as a file from its
uploaded solution/ folder (as local runs it), and a verification's artifacts are collected and saved
with the trial row, bounded, with symlinks recorded and never followed, as local saves them."""

from __future__ import annotations

import io
import json
import shutil
import tarfile
from pathlib import Path

import pytest

from hrbench.agents.oracle import OracleAgent
from hrbench.envs.docker import DockerBackend, _extract_bounded
from hrbench.envs.local import LocalBackend
from hrbench.harness.records import TrialSpec
from hrbench.harness.trials import artifacts_folder, run_natural_trial
from hrbench.protocol import CONDITIONS, CheckpointProtocol
from hrbench.tasks.harbor import ARTIFACTS_LIMIT_BYTES, ARTIFACTS_MANIFEST
from hrbench.tasks.loader import load_task
from tests.conftest import FIXTURES
from tests.docker.conftest import exhaust_processes, hrbench_containers

pytestmark = pytest.mark.slow  # podman, image builds, containers

# stage `make`: the key step is a sibling helper run by solve.sh's own path ($0), which only works when
# solve.sh runs as a file from /solution; it also leaves Harbor artifacts: a log under /logs/artifacts
# (naming [solution.env]'s value), a declared file, a declared symlink to a system file, a declared
# file over the per-stage limit
SOLVE = """#!/bin/bash
# hrbench:key-begin
bash "$(dirname "$0")/helper.sh"
# hrbench:key-end
echo "solved by $0 with $SOLVER" > /logs/artifacts/run.log
ln -sf /etc/hostname /app/link.txt
head -c 5000000 /dev/zero > /app/big.bin
"""
ARTIFACTS = 'artifacts = ["/app/a.txt", "/app/link.txt", "/app/big.bin"]\n'
SEALED = FIXTURES / "harbor" / "sealed"  # a separate verifier's task (tests/harbor/test_separate_verifier.py)


@pytest.fixture
def harbor_task(tiny_task_copy: Path) -> Path:
    solution = tiny_task_copy / "steps" / "make" / "solution"
    (solution / "helper.sh").write_text("echo $(( $(cat seed.txt) + 1 )) > a.txt\n")
    (solution / "solve.sh").write_text(SOLVE)
    toml = tiny_task_copy / "task.toml"
    toml.write_text(ARTIFACTS + toml.read_text() + '[solution.env]\nSOLVER = "${HRBENCH_TEST_SOLVER:-the-oracle}"\n')
    return tiny_task_copy


def test_the_solution_runs_as_a_file_from_its_read_only_folder_which_is_removed_after(backend: DockerBackend,
                                                                                      harbor_task: Path):
    task = load_task(harbor_task)
    stage = task.stages[0]
    env = backend.start(task, 0)
    try:
        probe = env.run_solution(stage, 'touch /solution/x 2>&1; stat -c "%U %a" /solution /solution/solve.sh\n'
                                        'echo "me=$0 id=$(id -u) pwd=$(pwd) solver=$SOLVER"; ls /solution\n')
        assert "Permission denied" in probe.output, probe.output
        assert "root 755\nroot 755\n" in probe.output
        assert "me=/solution/solve.sh id=47000 pwd=/app solver=the-oracle" in probe.output
        assert "helper.sh" in probe.output.split()
        result = env.run_solution(stage)
        assert result.exit_code == 0, result.output
        assert env.exec("cat a.txt /logs/artifacts/run.log; ls /solution 2>&1", 10).output.splitlines() == [
            "4", "solved by /solution/solve.sh with the-oracle", "ls: cannot access '/solution': No such file or directory"]
        assert env.verify(stage).passed
    finally:
        env.close()
    assert hrbench_containers(backend) == []


def _artifacts(backend, task, tmp_path: Path) -> tuple[dict, dict]:
    spec = TrialSpec(prereg_sha256="0" * 64, agent="oracle", condition="baseline", protocol="p", task=task.name,
                     kind="natural", stage=None, trial_index=0)
    record = run_natural_trial(spec, task, OracleAgent(), backend, CONDITIONS["baseline"],
                               CheckpointProtocol().budget, 1, trajectory_dir=tmp_path / "trajectories")
    assert record.passed, record.error
    folder = artifacts_folder(tmp_path / "trajectories", spec.key)
    manifest = json.loads((folder / "make" / ARTIFACTS_MANIFEST).read_text())
    return json.loads(record.artifacts_json), {e["path"]: (e["status"], e["saved"], e["bytes"]) for e in manifest}


def test_artifacts_are_saved_with_the_row_as_local_saves_them(backend: DockerBackend, harbor_task: Path,
                                                              tmp_path: Path):
    task = load_task(harbor_task)
    on_docker = _artifacts(backend, task, tmp_path / "docker")
    on_local = _artifacts(LocalBackend(tmp_path / "local-cache"), task, tmp_path / "local")
    saved, manifest = on_docker
    assert manifest == {
        "/logs/artifacts/run.log": ("saved", "files/logs/artifacts/run.log", 45),
        "/app/a.txt": ("saved", "files/app/a.txt", 2),
        "/app/link.txt": ("symlink", None, 0),  # recorded, not followed
        "/app/big.bin": ("over_limit", None, 5_000_000),
    }
    assert on_docker == on_local
    root = tmp_path / "docker"
    contents = {Path(p).name: (root / p).read_text() for p in saved["make"]}
    assert contents == {"run.log": "solved by /solution/solve.sh with the-oracle\n", "a.txt": "4\n"}
    # later stages see the persisted /logs/artifacts and save it again (no declared artifact of theirs)
    assert sorted(Path(p).name for p in saved["double"]) == ["a.txt", "run.log"]
    assert hrbench_containers(backend) == []


def test_extraction_past_the_total_leaves_placeholders_never_copied(tmp_path: Path):
    size = ARTIFACTS_LIMIT_BYTES - 1000
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        for name in "edcba":  # the engine's order; save_artifacts walks sorted names
            info = tarfile.TarInfo(f"out/{name}")
            info.size = size
            tar.addfile(info, io.BytesIO(b"x" * size))
        evil = tarfile.TarInfo("../escape")
        evil.size = 1
        tar.addfile(evil, io.BytesIO(b"x"))
    placeholders = _extract_bounded([buf.getvalue()], tmp_path / "x")
    assert placeholders == {tmp_path / "x" / "out" / "a"}  # 4 x 3.99 MB read, the fifth is past 4x the limit
    assert (tmp_path / "x" / "out" / "a").stat().st_size == size and not (tmp_path / "escape").exists()


def test_a_harbor_multi_step_task_runs_on_docker_as_on_local(backend: DockerBackend, tmp_path: Path):
    """tests/fixtures/harbor/ledger: a step's workdir/ files and setup.sh, the environment's and a step's
    healthcheck, [environment.env] and [steps.verifier.env], a task-level verifier for the last step, and
    artifacts (tests/harbor/test_harbor_study.py runs it on local)."""
    task = load_task(FIXTURES / "harbor" / "ledger")
    spec = TrialSpec(prereg_sha256="0" * 64, agent="oracle", condition="baseline", protocol="p", task=task.name,
                     kind="natural", stage=None, trial_index=0)
    record = run_natural_trial(spec, task, OracleAgent(), backend, CONDITIONS["baseline"],
                               CheckpointProtocol().budget, 1, trajectory_dir=tmp_path / "trajectories")
    assert record.passed and record.stages_passed == 2, (record.error, record.stage_outcomes_json)
    saved = json.loads(record.artifacts_json)
    assert [Path(p).name for p in saved["open"]] == ["open.log", "ledger.txt"]
    assert (tmp_path / saved["open"][0]).read_text() == "opened with 100\n"
    assert (tmp_path / saved["close"][-1]).read_text() == "EUR 100\nclosed\n"
    assert hrbench_containers(backend) == []


def test_a_separate_verifier_runs_in_its_own_container_on_the_collected_files_only(backend: DockerBackend):
    # tests/fixtures/harbor/sealed: passes only when the answer and the collect hook's snapshot were handed
    # over and the agent's scratch file was not (tests/harbor/test_separate_verifier.py does the same on local)
    task = load_task(SEALED)
    env = backend.start(task, 0)
    try:
        env.run_solution(task.stages[0])
        check = env.verify(task.stages[0])
        assert check.passed, check.output
        assert "[[verifier.collect]] 'wc -c < /app/answer.txt > /logs/artifacts/answer-size.txt': exit 0" \
            in check.output
        # the agent's link to a file of its container holding the answer travels as a link, never followed:
        # it dangles in the verifier's container (a copy that followed it would hand over the answer)
        env.exec("echo 42 > /output/real.txt; rm /app/answer.txt; ln -s /output/real.txt /app/answer.txt", 10)
        linked = env.verify(task.stages[0])
        assert not linked.passed and "no answer" in linked.output, linked.output
    finally:
        env.close()
    assert hrbench_containers(backend) == []


# the sealed task's verifier passes only in an image holding the judge's file (which the agent's image lacks)
JUDGE_CHECK = '[ "$(cat /opt/judge/expected 2>/dev/null)" = 42 ] || { echo "not the judge image"; ok=0; }\n'


def test_a_separate_verifier_runs_in_the_image_of_its_verifier_environment(backend: DockerBackend, tmp_path: Path):
    task_dir = tmp_path / "sealed"
    shutil.copytree(SEALED, task_dir)
    test_sh = task_dir / "tests" / "test.sh"
    test_sh.write_text(test_sh.read_text().replace("ok=1\n", "ok=1\n" + JUDGE_CHECK, 1))
    # Harbor's layout: tests/Dockerfile builds the verifier's image over the tests/ folder
    (task_dir / "tests" / "Dockerfile").write_text(
        f"FROM {backend.base_image}\nRUN mkdir -p /opt/judge && echo 42 > /opt/judge/expected\n"
        "COPY test.sh /tests/test.sh\n")
    task = load_task(task_dir)
    env = backend.start(task, 0)
    try:
        env.run_solution(task.stages[0])
        assert env.exec("cat /opt/judge/expected", 10).exit_code != 0  # the agent's container has no judge
        check = env.verify(task.stages[0])
        assert check.passed, check.output
        # a [verifier.environment] docker_image comes before the Dockerfile (here an image tagged by hand that
        # the engine has: no registry is reachable)
        backend.client.images.build(fileobj=io.BytesIO(
            f"FROM {backend.base_image}\nRUN mkdir -p /opt/judge && echo 42 > /opt/judge/expected\n".encode()),
            tag="hrbench-test/judge:1", network_mode="none", rm=True, pull=False)
        (task_dir / "tests" / "Dockerfile").write_text(f"FROM {backend.base_image}\n")  # no judge: unused
        toml = task_dir / "task.toml"
        toml.write_text(toml.read_text().replace("[environment]\n", '[verifier.environment]\ndocker_image = '
                                                                     '"hrbench-test/judge:1"\n\n[environment]\n', 1))
        task = load_task(task_dir)
        assert env.verify(task.stages[0]).passed
        toml.write_text(toml.read_text().replace('docker_image = "hrbench-test/judge:1"\n', "", 1))
        judged = env.verify(load_task(task_dir).stages[0])  # the tests/Dockerfile without a judge
        assert not judged.passed and "not the judge image" in judged.output, judged.output
    finally:
        env.close()
    assert hrbench_containers(backend) == []


def test_an_agent_that_uses_up_its_container_cannot_touch_a_separate_verifier(backend: DockerBackend):
    # the agent holds every process slot of its container after its turn: the hooks, the handover and the
    # verifier run anyway (the agent's container restarted with its workspace, the verifier in a container of
    # its own), and the stage's verdict is the verifier's on what the agent left, never a verifier error
    small = DockerBackend(backend.cache_dir, docker_host=backend.docker_host, pids_limit=24)
    task = load_task(SEALED)
    env = small.start(task, 0)
    try:
        env.run_solution(task.stages[0])
        exhaust_processes(env)
        solved = env.verify(task.stages[0])
        assert solved.passed and solved.error is None and solved.agent_fault is None, solved
        assert "[[verifier.collect]] 'wc -c < /app/answer.txt > /logs/artifacts/answer-size.txt': exit 0" \
            in solved.output
        env.exec("rm /app/answer.txt", 10)
        exhaust_processes(env)
        unsolved = env.verify(task.stages[0])
        assert not unsolved.passed and unsolved.error is None and "no answer" in unsolved.output, unsolved
    finally:
        env.close()
    assert hrbench_containers(small) == []
