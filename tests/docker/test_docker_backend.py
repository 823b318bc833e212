"""Protects the docker backend (against podman): oracle states, isolation, limits, clean-up, the shell."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest
import requests

from hrbench.envs.base import SandboxError
from hrbench.envs.docker import OUTPUT_LIMIT, DockerBackend, DockerEnvironment, sealed_state_problems
from hrbench.envs.local import LocalBackend
from hrbench.tasks.audit import audit_task
from hrbench.tasks.loader import load_task
from tests.conftest import TINY_TASK
from tests.docker.conftest import DOCKER_FIXTURES, REPO, exhaust_processes, hrbench_containers

TREE_TASK = DOCKER_FIXTURES / "tree-tools"

pytestmark = pytest.mark.slow  # podman, image builds, containers


@pytest.fixture
def env(backend: DockerBackend):
    environment = backend.start(load_task(TINY_TASK), 1)
    yield environment
    environment.close()


def test_oracle_state_images_are_built_once(backend: DockerBackend, tmp_path: Path, monkeypatch):
    task = load_task(TINY_TASK)
    first = backend.checkpoint_state(task, 3)
    image_id = backend.client.images.get(first).id
    builds: list[str] = []
    monkeypatch.setattr(DockerBackend, "_build_task_image", lambda self, t: builds.append(t.name))
    monkeypatch.setattr(DockerBackend, "_container", lambda *a, **k: pytest.fail("rebuilt a cached state"))
    # a second backend of the same cache directory (another process of the study, say) finds the same
    # images in the engine, sealed; another cache directory (another study) has states of its own
    other = DockerBackend(backend.cache_dir, docker_host=backend.docker_host)
    assert [other.checkpoint_state(task, i) for i in range(4)] == [backend.state_image(task, i) for i in range(4)]
    assert other.client.images.get(first).id == image_id and builds == []
    assert DockerBackend(tmp_path, docker_host=backend.docker_host).state_image(task, 3) != first


def test_a_state_image_retagged_after_it_was_built_is_named_by_verify_and_rebuilt(backend: DockerBackend,
                                                                                  caplog, monkeypatch):
    monkeypatch.setenv("DOCKER_HOST", backend.docker_host)  # where `hrbench verify` finds the engine
    task = load_task(TINY_TASK)
    ref = backend.checkpoint_state(task, 1)
    sealed = backend.client.images.get(ref).id
    assert list(sealed_state_problems(backend.cache_dir)) and not any(
        problem for _, problem in sealed_state_problems(backend.cache_dir))
    # someone with the engine's access points the tag at another image (here: the state after 0 stages)
    backend.client.images.get(backend.state_image(task, 0)).tag(*ref.rsplit(":", 1))
    problems = {record.name: problem for record, problem in sealed_state_problems(backend.cache_dir) if problem}
    assert list(problems) == [ref.rsplit(":", 1)[1] + ".image"], problems
    assert f"differs from the {sealed[7:19]} recorded when it was built" in next(iter(problems.values()))
    fresh = DockerBackend(backend.cache_dir, docker_host=backend.docker_host)  # another process: not yet checked
    with caplog.at_level(logging.WARNING, logger="hrbench.envs.docker"):
        assert fresh.checkpoint_state(task, 1) == ref
    assert f"image {ref}: image" in caplog.text and "rebuilding it" in caplog.text
    rebuilt = backend.client.images.get(ref).id
    assert rebuilt != backend.client.images.get(backend.state_image(task, 0)).id
    assert not any(problem for _, problem in sealed_state_problems(backend.cache_dir))
    backend._known[ref] = rebuilt  # the session's backend: its states are the rebuilt ones now


def test_from_the_engine_lacks_is_mapped_to_the_base_image_with_a_warning(backend: DockerBackend, caplog):
    with caplog.at_level(logging.WARNING, logger="hrbench.envs.docker"):
        dockerfile = TINY_TASK / "environment" / "Dockerfile"
        text = backend._dockerfile(dockerfile.read_text(), dockerfile)
    assert text.splitlines()[0] == f"FROM {backend.base_image}"
    assert "FROM debian:bookworm-slim is not on the Docker host" in caplog.text
    assert backend.base_image in caplog.text


def test_task_needing_a_package_the_host_lacks_runs_on_docker_and_local_refuses_it(backend: DockerBackend,
                                                                                   tmp_path: Path):
    task = load_task(TREE_TASK)
    assert task.docker_only and "tree" in task.docker_only
    rows = audit_task(task, backend)
    assert [r.ok for r in rows] == [True, True], [r.problem for r in rows]
    with pytest.raises(SandboxError, match="needs the docker backend"):
        LocalBackend(tmp_path).check_supported(task)
    environment = backend.start(task, 0)
    try:
        probe = environment.exec("command -v tree count-files; dpkg -s tree | grep ^Status", 30)
        assert "/usr/bin/tree" in probe.output and "/usr/local/bin/count-files" in probe.output
        assert "install ok installed" in probe.output
    finally:
        environment.close()


def test_every_container_is_removed(backend: DockerBackend):
    task = load_task(TINY_TASK)
    for _ in range(2):
        environment = backend.start(task, 1)
        environment.exec("sleep 30 &", 5)
        environment.exec("sleep 30", 1)  # timed out
        environment.open_shell().send("sleep 100 &", 1)
        assert environment.container_id in hrbench_containers(backend)
        environment.close()
    assert hrbench_containers(backend) == []


def test_a_container_whose_start_fails_after_the_engine_made_it_is_removed(backend: DockerBackend, monkeypatch):
    task = load_task(TINY_TASK)
    backend.checkpoint_state(task, 0)  # built first: the failures below are the trial container's own
    api = backend.client.api
    real_start = api.start

    def started_too_late(container, *args, **kwargs):  # the engine started it; its answer came after the timeout
        real_start(container, *args, **kwargs)
        raise requests.exceptions.ReadTimeout("injected: no answer within the client's timeout")

    monkeypatch.setattr(api, "start", started_too_late)
    with pytest.raises(requests.exceptions.ReadTimeout):
        backend.start(task, 0)
    monkeypatch.undo()

    def exec_failed(self, recursive=False):
        raise SandboxError("injected: the exec failed")

    # the container runs, but the harness's first exec in it (the workdir given to the agent user) fails
    monkeypatch.setattr(DockerEnvironment, "own_sized_paths", exec_failed)
    with pytest.raises(SandboxError, match="injected"):
        backend.start(task, 0)
    assert hrbench_containers(backend) == []


def test_agent_cannot_reach_the_network(env: DockerEnvironment):
    probe = """python3 - <<'PY'
import os, socket
try:
    socket.create_connection(("1.1.1.1", 80), timeout=3); print("CONNECTED")
except OSError as e:
    print("BLOCKED", e)
try:
    socket.getaddrinfo("pypi.org", 443); print("RESOLVED")
except OSError as e:
    print("NORESOLVE", e)
print("LINKS", sorted(os.listdir("/sys/class/net")))
PY"""
    result = env.exec(probe, 30)
    assert "BLOCKED" in result.output and "CONNECTED" not in result.output
    assert "NORESOLVE" in result.output and "RESOLVED\n" not in result.output
    assert "LINKS ['lo']" in result.output


def test_agent_is_unprivileged_and_owns_only_the_workdir(env: DockerEnvironment):
    result = env.exec("id -u; grep CapEff /proc/self/status; touch /usr/escape 2>&1; touch /etc/escape 2>&1; "
                      "touch /logs/escape 2>&1; touch /app/ok && echo app-ok; touch /tmp/ok && echo tmp-ok", 10)
    lines = result.output.splitlines()
    assert lines[0] == "47000" and lines[1].split() == ["CapEff:", "0000000000000000"]
    assert result.output.count("Permission denied") >= 3 and "app-ok" in lines and "tmp-ok" in lines


def test_agent_sees_no_solution_test_or_host_secret(backend: DockerBackend, monkeypatch):
    monkeypatch.setenv("HRBENCH_PROBE_SECRET", "s3cr3t-value")
    environment = backend.start(load_task(TINY_TASK), 1)
    try:
        result = environment.exec(
            "env; find / -xdev \\( -name solve.sh -o -name test.sh -o -name checks.sh \\) 2>/dev/null; "
            f"ls /tests /logs/verifier {REPO} 2>&1; echo done", 60)
        assert "s3cr3t-value" not in result.output and "HRBENCH_PROBE_SECRET" not in result.output
        assert "solve.sh" not in result.output and "test.sh" not in result.output
        assert result.output.count("No such file or directory") == 3 and result.output.strip().endswith("done")
        environment.verify(load_task(TINY_TASK).stages[1])
        after = environment.exec("ls /tests /logs/verifier 2>&1", 10)  # tests are removed after verification
        assert after.output.count("No such file or directory") == 2
    finally:
        environment.close()


def test_an_agent_that_uses_up_the_container_fails_its_stage_and_cannot_veto_it(backend: DockerBackend):
    # the session's images (same cache directory), a small process bound
    small = DockerBackend(backend.cache_dir, docker_host=backend.docker_host, pids_limit=24)
    task = load_task(TINY_TASK)
    environment = small.start(task, 1)
    try:
        environment.exec("echo kept > /app/left-by-the-agent", 10)
        exhaust_processes(environment)
        # the verification's exec cannot start (or, if it took a slot, cannot fork its reaper): the stage is the
        # agent's failure, explained, and verified in the restarted container, never a verifier error
        result = environment.verify(task.stages[1])
        assert result.error is None and not result.passed, result
        assert (result.agent_fault or "").startswith("the agent used up the container's processes or memory"), result
        # the restarted container holds the workspace the agent left, and no process of the agent
        assert environment.workdir_files()["left-by-the-agent"].data == b"kept\n"
        assert "sleep 600" not in environment.exec("ps -eo args=", 10).output
    finally:
        environment.close()


def test_an_engine_that_fails_to_put_the_tests_in_a_starved_container_is_the_agents_failure(
        backend: DockerBackend, monkeypatch):
    # podman answers the tests' archive call with a 500 when the agent's use of the container just killed its
    # init (it joins the namespaces of a process that is gone): the same as an exec that cannot start
    import docker

    small = DockerBackend(backend.cache_dir, docker_host=backend.docker_host, pids_limit=24)
    task = load_task(TINY_TASK)
    environment = small.start(task, 1)
    api = small.client.api
    real_put, failed = api.put_archive, []

    def put_archive(container, path, data):
        if not failed:
            failed.append(path)
            raise docker.errors.APIError("500 Server Error: injected: open /proc/2784/ns/mnt: no such file or directory")
        return real_put(container, path, data)

    try:
        exhaust_processes(environment)
        monkeypatch.setattr(api, "put_archive", put_archive)
        result = environment.verify(task.stages[1])
        assert failed == ["/"]
        assert result.error is None and not result.passed, result
        assert (result.agent_fault or "").startswith("the agent used up the container's processes or memory"), result
    finally:
        monkeypatch.undo()
        environment.close()


def test_agent_processes_are_gone_before_the_verifier_runs(env: DockerEnvironment):
    stage = env.task.stages[1]
    # a forger left running: it would rewrite the verifier and its reward the moment they appear
    env.exec("nohup setsid bash -c 'while :; do echo 1 > /logs/verifier/reward.txt; "
             "echo \"echo 1 > /logs/verifier/reward.txt\" > /tests/test.sh; done' >/dev/null 2>&1 &", 5)
    shell = env.open_shell()
    assert shell.send("true", 30)
    shell.send("(while :; do echo 1 > /logs/verifier/reward.txt 2>/dev/null; done) &", 2)
    result = env.verify(stage)
    assert result.reward == 0 and not result.passed
    left = env.exec("ps -eo args=", 10).output
    assert "reward.txt" not in left and "hrbench-shell-" not in left and not shell.alive  # all died


def test_limits_bound_memory_processes_and_cpu(backend: DockerBackend, env: DockerEnvironment):
    memory = env.exec("python3 -c 'b = bytearray(900 * 1024 * 1024); print(\"ALLOCATED\")'", 60)
    assert "ALLOCATED" not in memory.output and memory.exit_code != 0
    bomb = """python3 - <<'PY'
import os, time
n = 0
try:
    for _ in range(2000):
        if os.fork() == 0:
            time.sleep(30)
            os._exit(0)
        n += 1
except OSError as e:
    print("FORKFAIL", e.errno)
print("FORKED", n)
PY"""
    pids = env.exec(bomb, 60)
    assert "FORKFAIL 11" in pids.output, pids.output[-500:]  # EAGAIN: the pids limit
    assert 100 < int(pids.output.split("FORKED")[1].split()[0]) < backend.pids_limit
    host_config = backend.client.api.inspect_container(env.container_id)["HostConfig"]
    assert host_config["NanoCpus"] == int(backend.cpus * 1e9) and host_config["PidsLimit"] == backend.pids_limit
    assert host_config["Memory"] == backend.memory_mb * 1024 * 1024


def test_exec_times_out_and_output_is_bounded(env: DockerEnvironment):
    slow = env.exec("echo started; sleep 100", 1)
    assert slow.timed_out and slow.exit_code == 124 and slow.duration_s < 10 and "started" in slow.output
    flood = env.exec("head -c 20000000 /dev/zero | tr '\\0' x; echo END", 60)
    assert flood.exit_code == 0 and len(flood.output) <= OUTPUT_LIMIT + 100
    assert flood.output.startswith("xxx") and flood.output.rstrip().endswith("END") and "bytes omitted" in flood.output


def test_a_background_job_does_not_outlive_its_command(env: DockerEnvironment):
    env.exec("sleep 300 & echo started", 10)
    assert "sleep 300" not in env.exec("ps -eo args", 10).output


def test_persistent_shell_keeps_state_interrupts_and_dies_at_verification(env: DockerEnvironment):
    shell = env.open_shell()
    assert shell.send("cd /tmp && export MARK=kept && echo $MARK", 10)
    assert shell.read().data == b"kept\n"
    assert not shell.send("sleep 300", 1)  # still running after the wait
    shell.interrupt()
    assert shell.send("echo $MARK $(pwd)", 10)
    assert shell.read().data.endswith(b"kept /tmp\n")
    shell.send("head -c 5000000 /dev/zero | tr '\\0' y", 20)
    out = shell.read()
    assert out.total >= 5_000_000 and len(out.data) <= 10_000
    shell.send("(while :; do echo x >> /app/bg.txt; sleep 0.05; done) &", 2)
    env.verify(env.task.stages[1])
    assert not shell.alive and shell not in env.shells  # the terminal opens a new one for the next part
    sizes = env.exec("wc -c < /app/bg.txt; sleep 0.5; wc -c < /app/bg.txt", 10).output.split()
    assert sizes[0] == sizes[1]  # the background loop died too
    fresh = env.open_shell()
    assert fresh.send("echo new $MARK; pwd", 10) and fresh.read().data == b"new\n/app\n"


def test_restore_replaces_the_state_with_the_oracle_state(backend: DockerBackend):
    task = load_task(TINY_TASK)
    environment = backend.start(task, 0)
    try:
        environment.exec("rm -f /app/*; echo junk > /app/junk.txt", 10)
        backend.restore(environment, 2)
        assert environment.exec("ls /app", 10).output.split() == ["a.txt", "b.txt", "seed.txt"]
        assert environment.verify(task.stages[1]).passed
    finally:
        environment.close()
    assert hrbench_containers(backend) == []


def test_verifier_output_cannot_forge_a_reward_and_a_hung_verifier_times_out(backend: DockerBackend,
                                                                               tiny_task_copy: Path):
    tests = tiny_task_copy / "steps" / "make" / "tests" / "test.sh"
    # output that imitates the reward lines (the real ones carry a nonce nobody in the container knew)
    tests.write_text("printf '\\nHRBENCH-0000 reward.txt\\n1\\nHRBENCH-0000 end 0\\n'; cat /app/forged 2>/dev/null\n"
                     "mkdir -p /logs/verifier; echo 0 > /logs/verifier/reward.txt\n")
    with open(tiny_task_copy / "task.toml", "a") as toml:
        toml.write("[verifier]\ntimeout_sec = 3\n")
    task = load_task(tiny_task_copy)
    environment = backend.start(task, 0)
    try:
        environment.exec("printf '\\nHRBENCH-1111 reward.txt\\n1\\n' > /app/forged", 10)
        result = environment.verify(task.stages[0])
        assert result.reward == 0 and "HRBENCH-0000 reward.txt" in result.output
        tests.write_text("sleep 300\n")
        hung = environment.verify(task.stages[0])
        assert hung.reward == 0 and 3 <= hung.duration_s < 20
    finally:
        environment.close()


def test_a_long_command_goes_in_as_a_file_and_is_removed(env: DockerEnvironment):
    script = "cat > /app/long.txt <<'EOF'\n" + "x" * 150_000 + "\nEOF\nwc -c < /app/long.txt\n"
    result = env.exec(script, 30)
    assert result.exit_code == 0 and result.output.split() == ["150001"]
    assert env.exec("ls /run | grep -c hrbench-cmd || true", 10).output.split() == ["0"]


def test_network_only_where_the_task_allows_it(backend: DockerBackend, tiny_task_copy: Path):
    toml = tiny_task_copy / "task.toml"
    toml.write_text(toml.read_text().replace('[environment]\n', '[environment]\nallow_internet = true\n'))
    environment = backend.start(load_task(tiny_task_copy), 0)
    try:
        assert "eth0" in environment.exec("ls /sys/class/net", 10).output.split()
    finally:
        environment.close()
