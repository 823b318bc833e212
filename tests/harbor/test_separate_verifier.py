"""Protects Harbor's separate verifier environments and [[verifier.collect]] hooks on the local backend (issue 24):
the verifier of `environment_mode = "separate"` runs in a fresh sandbox that holds only the collected paths,
handed over by sandboxes (never by a host-side copy an agent's symlink could lead), after the collect hooks ran."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from hrbench.envs.local import LocalBackend
from hrbench.tasks.audit import audit_task
from hrbench.tasks.loader import load_task
from hrbench.tasks.model import TaskError, VerifierImage

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "harbor"


@pytest.fixture
def backend(tmp_path: Path) -> LocalBackend:
    return LocalBackend(tmp_path / "cache")


def _sealed(tmp_path: Path, old: str = "", new: str = "") -> Path:
    task = tmp_path / "sealed"
    shutil.copytree(FIXTURES / "sealed", task)
    toml = task / "task.toml"
    assert old in toml.read_text()
    toml.write_text(toml.read_text().replace(old, new, 1))
    return task


def _verify(backend: LocalBackend, task_dir: Path, agent: str | None = None):
    task = load_task(task_dir)
    env = backend.start(task, 0)
    try:
        if agent is None:
            env.run_solution(task.stages[0])
        else:
            env.exec(agent, 30)
        return env.verify(task.stages[0])
    finally:
        env.close()


def test_a_separate_verifier_sees_the_collected_files_and_nothing_else(backend: LocalBackend, tmp_path: Path):
    check = _verify(backend, _sealed(tmp_path))
    assert check.passed, check.output
    assert check.artifacts == ["/logs/artifacts", "/app/answer.txt"]
    # the same task verified in the agent's environment sees its scratch file: the fixture tells the two apart
    shared = _verify(backend, _sealed(tmp_path / "shared", 'environment_mode = "separate"', 'environment_mode = "shared"'))
    assert not shared.passed and "scratch.txt is visible" in shared.output


def test_collect_hooks_run_before_the_handover(backend: LocalBackend, tmp_path: Path):
    check = _verify(backend, _sealed(tmp_path, "[[verifier.collect]]", "[[verifier.no_collect]]"))
    assert not check.passed and "no collect snapshot" in check.output
    failing = _verify(backend, _sealed(tmp_path / "f", "wc -c <", "exit 3; wc -c <"))
    assert not failing.passed and "[[verifier.collect]] 'exit 3; wc -c" in failing.output and "exit 3" in failing.output


def test_the_reference_passes_the_audit_and_nothing_scores_zero(backend: LocalBackend, tmp_path: Path):
    (row,) = audit_task(load_task(_sealed(tmp_path)), backend)
    assert row.ok and row.reference_reward == 1.0, row.problem


def test_an_agents_symlink_is_handed_over_as_a_link_never_followed_by_the_host(backend: LocalBackend,
                                                                                tmp_path: Path):
    # a host file holding the right answer, outside every sandbox: a host-side copy following the agent's
    # link would hand it to the verifier, which would then pass
    bait = tmp_path / "bait.txt"
    bait.write_text("42\n")
    bait.chmod(0o644)
    agent = f"ln -s {bait} /app/answer.txt; mkdir -p /logs/artifacts; ln -s {bait} /logs/artifacts/answer-size.txt"
    check = _verify(backend, _sealed(tmp_path, "[[verifier.collect]]", "[[verifier.no_collect]]"), agent)
    assert not check.passed and "no answer" in check.output, check.output
    assert bait.read_text() == "42\n"


@pytest.mark.parametrize("edit, named", [
    (('environment_mode = "separate"', 'environment_mode = "shared"\n[verifier.environment]\ncpus = 2'),
     "environment_mode = 'shared' cannot have a [verifier.environment]"),
    (('environment_mode = "separate"', 'environment_mode = "elsewhere"'), "environment_mode"),
    (("command = ", 'service = "postgres"\ncommand = '), "compose services ([verifier] collect ('postgres'))"),
])
def test_what_harbor_refuses_is_refused_by_name(tmp_path: Path, edit: tuple[str, str], named: str):
    with pytest.raises(TaskError) as caught:
        load_task(_sealed(tmp_path, *edit))
    assert named in str(caught.value)


def test_a_verifier_environment_implies_separate_and_steps_fall_back_to_the_task(backend: LocalBackend,
                                                                               tmp_path: Path):
    implied = load_task(_sealed(tmp_path, 'environment_mode = "separate"', "[verifier.environment]\ncpus = 1"))
    assert implied.stages[0].separate_verifier and len(implied.stages[0].collect) == 1
    ledger = tmp_path / "ledger"
    shutil.copytree(FIXTURES / "ledger", ledger)
    toml = ledger / "task.toml"
    toml.write_text(toml.read_text().replace("[verifier]\n", '[verifier]\nenvironment_mode = "separate"\n', 1)
                    .replace("[steps.verifier]\n", '[steps.verifier]\nenvironment_mode = "shared"\n', 1))
    task = load_task(ledger)
    assert [s.separate_verifier for s in task.stages] == [False, True]
    # shared and separate steps mixed in one trial: `close` is verified on the handed-over ledger.txt alone, and
    # its oracle state (replayed through `open`'s shared verifier) still builds
    rows = audit_task(task, backend)
    assert [(r.stage, r.reference_reward, r.ok) for r in rows] == [("open", 1.0, True), ("close", 1.0, True)], rows
    status = {k.key: (k.status, k.docker) for k in task.support}
    assert status["verifier.environment_mode"] == status["steps[].verifier.environment_mode"] == ("honoured",
                                                                                                 "honoured")


def test_a_separate_verifiers_image_is_resolved_as_harbor_resolves_it(tmp_path: Path):
    ledger = tmp_path / "ledger"
    shutil.copytree(FIXTURES / "ledger", ledger)
    toml = ledger / "task.toml"
    toml.write_text(toml.read_text().replace("[verifier]\n", '[verifier]\nenvironment_mode = "separate"\n', 1))
    (ledger / "tests" / "Dockerfile").write_text("FROM acme/judge-base:1\nCOPY test.sh /tests/test.sh\n")
    task = load_task(ledger)
    # Harbor builds the verifier from the step's tests/ folder when the step has one (`open` has, without a
    # Dockerfile: its verifier runs on the task's own image), else from the task's tests/
    assert [s.verifier_image for s in task.stages] == [None,
                                                       VerifierImage(dockerfile=task.path / "tests" / "Dockerfile")]
    (ledger / "steps" / "open" / "tests" / "Dockerfile").write_text("FROM acme/judge-base:1\n")
    assert load_task(ledger).stages[0].verifier_image == VerifierImage(
        dockerfile=task.path / "steps" / "open" / "tests" / "Dockerfile")
    # a [verifier.environment] docker_image comes before any Dockerfile, and a step's table before the task's
    toml.write_text(toml.read_text()
                    .replace("[environment]\n", '[verifier.environment]\ndocker_image = "acme/judge:1"\n\n'
                                                '[environment]\n', 1)
                    .replace("[steps.healthcheck]\n", '[steps.verifier.environment]\ndocker_image = "acme/open:1"\n'
                                                      'cpus = 2\n\n[steps.healthcheck]\n', 1))
    task = load_task(ledger)
    assert [s.verifier_image for s in task.stages] == [VerifierImage(docker_image="acme/open:1"),
                                                       VerifierImage(docker_image="acme/judge:1")]
    # each key of a verifier environment has its own row, a step's listed under the task table's names
    status = {k.key: (k.status, k.docker) for k in task.support}
    assert status["verifier.environment.docker_image"] == ("ignored", "honoured")
    assert status["verifier.environment.cpus"] == ("ignored", "ignored")
    assert "steps[].verifier.environment" in status and "steps[].verifier.environment.cpus" not in status
    # a shared verifier has no image of its own, whatever tests/ holds
    toml.write_text(toml.read_text().replace('environment_mode = "separate"\n', "", 1)
                    .replace('[verifier.environment]\ndocker_image = "acme/judge:1"\n', "", 1))
    assert load_task(ledger).stages[1].verifier_image is None
    toml.write_text(toml.read_text().replace('docker_image = "acme/open:1"', "docker_image = 3", 1))
    with pytest.raises(TaskError, match="docker_image must be an image name"):
        load_task(ledger)
