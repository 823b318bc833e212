"""Protects verifier integrity on the docker backend: checks.sh's `untrusted` runs agent code in a
nested sandbox inside the container, and the audit's tamper check runs there and can fail.

The tasks and attacks are tests/test_tamper.py's (the local suite): a hardened verifier (agent code
only through `untrusted`, expectations from pristine copies) and a naive one (runs the agent's tool
directly, trusts the workspace), which the tamper check must flag, so these tests can fail."""

from __future__ import annotations

from pathlib import Path

import pytest

from hrbench.envs.docker import DockerBackend
from hrbench.tasks.audit import audit_task
from hrbench.tasks.loader import load_task
from tests.docker.conftest import hrbench_containers
from tests.test_tamper import FORGER, HARDENED, NAIVE, PROBE, _task

pytestmark = pytest.mark.slow  # podman, image builds, containers

# PROBE reads CapEff from /proc/self/status; the nested sandbox in a container has an empty /proc
# (docs/docker.md: the container's masked /proc paths forbid a fresh proc mount), so the capability
# check is a privileged operation instead: with any capability in its user namespace, a mount succeeds.
NO_CAPS_PROC = """expect_fail no_caps '' -- untrusted 'grep -q "^CapEff:[[:space:]]*0*$" /proc/self/status && exit 1 || exit 0'"""
NO_CAPS_MOUNT = "expect_fail no_caps '' -- untrusted 'mkdir -p /tmp/m && mount -t tmpfs none /tmp/m'"
# The survivor PROBE starts is a `sleep`, and so is the container's main process: give it a name of its own.
SURVIVOR = ("untrusted 'nohup sleep 300 >/dev/null 2>&1 & echo started'", "grep -cx sleep)")
NAMED_SURVIVOR = ("cp /bin/sleep /tmp/hrb-survivor; untrusted 'nohup /tmp/hrb-survivor 300 >/dev/null 2>&1 & echo started'",
                  "grep -cx hrb-survivor)")
DOCKER_PROBE = (PROBE.replace(NO_CAPS_PROC, NO_CAPS_MOUNT).replace(SURVIVOR[0], NAMED_SURVIVOR[0])
                .replace(SURVIVOR[1], NAMED_SURVIVOR[1]))


def test_probe_has_the_checks_this_module_replaces():
    assert all(line in PROBE for line in (NO_CAPS_PROC, *SURVIVOR))
    assert all(line in DOCKER_PROBE for line in (NO_CAPS_MOUNT, *NAMED_SURVIVOR))


def test_untrusted_runs_agent_code_in_a_nested_sandbox_in_the_container(backend: DockerBackend, tmp_path: Path):
    """No reward, tests or results in view, no way out, no capabilities, nothing survives it."""
    task = load_task(_task(tmp_path, DOCKER_PROBE))
    environment = backend.start(task)
    try:
        result = environment.verify(task.stages[0])
    finally:
        environment.close()
    print(result.output)
    assert "mode: userns-noproc" in result.output  # bwrap is in the image; none would mean agent code never runs
    assert result.reward == 1.0 and "FAIL" not in result.output, result.output


@pytest.mark.parametrize("kind", ["hardened", "naive"])
def test_forging_code_in_the_agents_program(backend: DockerBackend, tmp_path: Path, kind: str):
    task = load_task(_task(tmp_path, HARDENED if kind == "hardened" else NAIVE))
    environment = backend.start(task)
    try:
        environment.exec(f"cat > /app/tool.py <<'HRB_EOF'\n{FORGER}HRB_EOF\n", 30)
        result = environment.verify(task.stages[0])
    finally:
        environment.close()
    assert result.reward == (0.0 if kind == "hardened" else 1.0), result.output


def test_audit_tamper_check_flags_the_naive_verifier_and_passes_the_hardened_one(backend: DockerBackend,
                                                                                 tmp_path: Path):
    hardened = audit_task(load_task(_task(tmp_path / "hardened", HARDENED)), backend)
    assert [r.ok for r in hardened] == [True], hardened[0].problem
    assert hardened[0].forged_reward == 0.0 and hardened[0].edited_inputs_reward == 0.0
    assert not any("tamper" in note for note in hardened[0].notes), hardened[0].notes
    naive = audit_task(load_task(_task(tmp_path / "naive", NAIVE)), backend)[0]
    assert not naive.ok and naive.reference_reward == 1.0 and naive.nothing_reward == 0.0
    # (a/b): the planted payload ran in the verifier's own view, found through the container's workdir
    assert "tamper (a/b): the verifier ran agent code directly (/app/tool.py)" in naive.problem
    assert "ran UNCONFINED" in naive.problem
    # (c) ran: e_0's inputs were read out of the container, edited, and sigma replayed over them (the naive
    # verifier passes, but so it should: the tool sigma writes is the same whatever the data)
    assert naive.edited_inputs_reward == 1.0
    assert hrbench_containers(backend) == []
