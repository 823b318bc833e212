"""Protects the task format contract: Harbor multi-step packages, hrbench extensions, clear errors."""

from __future__ import annotations

from pathlib import Path

import pytest

from hrbench.tasks.loader import load_registry, load_task
from hrbench.tasks.model import TaskError, strip_key_step
from tests.conftest import TINY_TASK


def test_multi_step_task_loads_stages_dependencies_work_and_depth():
    task = load_task(TINY_TASK)
    assert [s.name for s in task.stages] == ["make", "double", "report"]
    assert task.stage("report").depends_on == ("double",)
    assert task.structure == "deep" and task.family == "fixtures"
    assert task.work == 3  # one non-comment line per solve.sh
    assert task.dependency_depth == 3
    assert task.workdir == "/app" and task.docker_only is None


def test_single_step_harbor_task_loads_as_one_stage(tmp_path: Path):
    (tmp_path / "solution").mkdir()
    (tmp_path / "tests").mkdir()
    (tmp_path / "task.toml").write_text('version = "1.0"\n[task]\nname = "single"\n')
    (tmp_path / "instruction.md").write_text("do it")
    (tmp_path / "solution" / "solve.sh").write_text("# hrbench:key-begin\ntouch x\n# hrbench:key-end\n")
    (tmp_path / "tests" / "test.sh").write_text("echo 1 > /logs/verifier/reward.txt\n")
    task = load_task(tmp_path)
    assert task.n_stages == 1 and task.stages[0].name == "main" and task.structure == "shallow"


def test_malformed_toml_names_the_file(tiny_task_copy: Path):
    (tiny_task_copy / "task.toml").write_text("[task\nname = 'x'\n")
    with pytest.raises(TaskError, match=r"task\.toml: malformed TOML"):
        load_task(tiny_task_copy)


@pytest.mark.parametrize("missing, message", [
    ("steps/double/instruction.md", "missing instruction"),
    ("steps/double/solution/solve.sh", "missing reference solution"),
    ("steps/double/tests/test.sh", "missing verifier"),
])
def test_missing_stage_file_is_named(tiny_task_copy: Path, missing: str, message: str):
    (tiny_task_copy / missing).unlink()
    with pytest.raises(TaskError, match=message) as info:
        load_task(tiny_task_copy)
    assert missing.split("/")[-1] in str(info.value)


def test_dependency_cycle_is_reported_with_its_path(tiny_task_copy: Path):
    toml = tiny_task_copy / "task.toml"
    toml.write_text(toml.read_text().replace('double = ["make"]', 'double = ["make", "report"]'))
    with pytest.raises(TaskError, match=r"dependency cycle among stages: .*double.*report.*double"):
        load_task(tiny_task_copy)


def test_unknown_stage_in_depends_on_is_reported(tiny_task_copy: Path):
    toml = tiny_task_copy / "task.toml"
    toml.write_text(toml.read_text().replace('report = ["double"]', 'report = ["tripple"]'))
    with pytest.raises(TaskError, match=r"depends_on unknown stage 'tripple'"):
        load_task(tiny_task_copy)


def test_dockerfile_that_needs_a_container_marks_task_docker_only(tiny_task_copy: Path):
    dockerfile = tiny_task_copy / "environment" / "Dockerfile"
    dockerfile.write_text(dockerfile.read_text() + "RUN pip install numpy\n")
    task = load_task(tiny_task_copy)
    assert task.docker_only and "pip install numpy" in task.docker_only


def test_key_step_markers_are_stripped_and_missing_markers_are_an_error():
    script = "a\n# hrbench:key-begin\nb\nc\n# hrbench:key-end\nd\n"
    assert strip_key_step(script) == "a\nd\n"
    with pytest.raises(TaskError, match="no key step marked"):
        strip_key_step("a\nb\n")
    with pytest.raises(TaskError, match="never closed"):
        strip_key_step("# hrbench:key-begin\nb\n")


def test_registry_include_unknown_task_lists_available(tmp_path: Path):
    with pytest.raises(TaskError, match="no task package named"):
        load_registry(TINY_TASK.parent, include=["nope"])


@pytest.mark.parametrize("extra, message", [
    ('[metadata.hrbench.weights]\nmake = -1.0\n', r"\[metadata.hrbench.weights\] make must be a positive number, got -1.0"),
    ('[metadata.hrbench.weights]\nmake = "heavy"\n', r"\[metadata.hrbench.weights\] make must be a positive number"),
    ('[metadata.hrbench.weights]\nmkae = 2.0\n', r"\[metadata.hrbench.weights\] names unknown stage\(s\) \['mkae'\]"),
    ('[verifier]\ntimeout_sec = "soon"\n', r"\[verifier\] timeout_sec: .*got 'soon'"),
    ('[agent]\ntimeout_sec = inf\n', r"\[agent\] timeout_sec: .*got inf"),
    ('verifier = 3\n', r"'verifier' must be a table"),
])
def test_bad_task_toml_values_are_named_not_crashed_on(tiny_task_copy: Path, extra: str, message: str):
    toml = tiny_task_copy / "task.toml"
    text = toml.read_text()
    # tables go after the last [[steps]]; a bare key goes before the first table
    toml.write_text(extra + text if extra.startswith("verifier") else text + extra)
    with pytest.raises(TaskError, match=message):
        load_task(tiny_task_copy)


def test_dockerfile_copy_in_json_form_and_from_another_stage(tiny_task_copy: Path):
    dockerfile = tiny_task_copy / "environment" / "Dockerfile"
    dockerfile.write_text('FROM debian:bookworm-slim\nWORKDIR /app\nCOPY ["files/seed.txt", "/app/seed.txt"]\n')
    assert [rel for _, rel in load_task(tiny_task_copy).initial_files] == ["seed.txt"]
    dockerfile.write_text("FROM debian:bookworm-slim\nWORKDIR /app\nCOPY --from=builder /out/ /app/\n")
    assert "COPY --from needs a container build" in load_task(tiny_task_copy).docker_only
    dockerfile.write_text("FROM debian:bookworm-slim\nWORKDIR /app\n\\\nCOPY 'files/ /app/\n")
    with pytest.raises(TaskError, match=r"Dockerfile:3: cannot parse COPY arguments"):
        load_task(tiny_task_copy)
