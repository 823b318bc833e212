"""Protects what a user sees on bad input: one clear line naming the file (and line) and what is wrong,
exit 1, no traceback, nothing written: binary and non-UTF-8 study, agent and task files, repeated
YAML keys, bad task weights, absurd trial counts, Dockerfile COPY sources that reach outside the task,
and error texts shown verbatim (rich markup must not eat `[task]` or `[[steps]]`)."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest
from typer.testing import CliRunner

from pipelines.cli import app
from tests.conftest import FIXTURES, TINY_TASK

runner = CliRunner()
REGISTRY = FIXTURES / "registry"
AGENT = "agents: [{id: a, kind: sim}]\n"


def _run(*args: str) -> tuple[int, str]:
    result = runner.invoke(app, list(args))
    assert result.exception is None or isinstance(result.exception, SystemExit), repr(result.exception)
    assert "Traceback" not in result.output
    return result.exit_code, result.stderr


def _study(tmp_path: Path, body: str | bytes) -> Path:
    path = tmp_path / "study.yaml"
    path.write_bytes(body if isinstance(body, bytes) else body.encode())
    return path


def _fails_before_any_trial(tmp_path: Path, study: Path, expected: str) -> None:
    out = tmp_path / "out"
    code, stderr = _run("run", str(study), "--out", str(out))
    assert code == 1
    assert stderr == f"error: {expected}\n"
    assert not out.exists()  # refused before the output directory (or any trial) existed


# -- study and agent files -----------------------------------------------------------------------------


@pytest.mark.parametrize("body, expected", [
    (b"\x89PNG\r\n\x1a\n\x00\x00", ":1: study file is not UTF-8 text (byte 0x89 at offset 0); save it as UTF-8"),
    (b"name: x\ndescription: caf\xe9\n" + AGENT.encode(),
     ":2: study file is not UTF-8 text (byte 0xe9 at offset 24); save it as UTF-8"),
    (b"name: x\n" + AGENT.encode() + b"seed: 1\x00\n",
     ":3: study file contains a NUL byte (a binary file?); it must be plain text"),
    (f"name: x\ntasks: {{registry: {REGISTRY}}}\n{AGENT}tasks: {{include: [tiny-chain]}}\n".encode(),
     ":4: key 'tasks' is repeated (first at line 2); each key may appear once in a mapping: merge the two entries"),
    (b"name: x\nagents: [{id: a, kind: sim, id: b}]\n",
     ":2: key 'id' is repeated (first at line 2); each key may appear once in a mapping: merge the two entries"),
    (b"name: x\nagents: [{id: a, kind: sim}\n", ":3:1: not valid YAML: while parsing a flow sequence expected ',' "
     "or ']', but got '<stream end>'"),
])
def test_unreadable_study_files_are_one_line_naming_file_and_line(tmp_path: Path, body: bytes, expected: str):
    study = _study(tmp_path, body)
    _fails_before_any_trial(tmp_path, study, f"{study}{expected}")


def test_binary_agent_config_file_is_named(tmp_path: Path):
    (tmp_path / "agents").mkdir()
    (tmp_path / "agents" / "a.yaml").write_bytes(b"id: a\nkind: \xff\xfe\n")
    study = _study(tmp_path, "name: x\nagents:\n  - config: agents/a.yaml\n")
    _fails_before_any_trial(tmp_path, study, f"{tmp_path / 'agents' / 'a.yaml'}:2: agent config file (from "
                                             "study.yaml) is not UTF-8 text (byte 0xff at offset 12); save it as UTF-8")


def test_a_study_path_that_is_a_directory_is_named(tmp_path: Path):
    (tmp_path / "study.yaml").mkdir()
    _fails_before_any_trial(tmp_path, tmp_path / "study.yaml",
                            f"{tmp_path / 'study.yaml'}: study file is a directory, not a file")


@pytest.mark.parametrize("tasks, expected", [
    (f"{{registry: {REGISTRY}, weights: {{tiny-chain: -1}}}}",
     "  tasks.weights: Value error, task weights must be positive numbers; got {'tiny-chain': -1.0}"),
    (f"{{registry: {REGISTRY}, weights: {{tiny-chain: .nan}}}}",
     "  tasks.weights: Value error, task weights must be positive numbers; got {'tiny-chain': nan}"),
    (f"{{registry: {REGISTRY}, include: [tiny-chain], weights: {{tiny-chian: 2}}}}",
     "  tasks: Value error, weights name task(s) ['tiny-chian'] that tasks.include does not list; "
     "included: ['tiny-chain']"),
])
def test_bad_task_weights_are_refused_before_any_trial(tmp_path: Path, tasks: str, expected: str):
    study = _study(tmp_path, f"name: x\ntasks: {tasks}\n{AGENT}")
    _fails_before_any_trial(tmp_path, study, f"{study}: invalid study file\n{expected}\nSee docs/study.md.")


def test_a_weight_for_a_task_not_in_the_registry_is_refused(tmp_path: Path):
    study = _study(tmp_path, f"name: x\ntasks: {{registry: {REGISTRY}, weights: {{tiny-chian: 2}}}}\n{AGENT}")
    _fails_before_any_trial(tmp_path, study, f"{study}: tasks.weights names task(s) ['tiny-chian'] not in the "
                                             "registry; available: ['tiny-chain']")


@pytest.mark.parametrize("trials, expected", [
    ("{checkpoint: 100000000000}", "  trials.checkpoint: Input should be less than or equal to 10000"),
    ("{checkpoint: 1.0e+11}", "  trials.checkpoint: Input should be less than or equal to 10000"),
    ("{natural: 10001}", "  trials.natural: Input should be less than or equal to 10000"),
])
def test_absurd_trial_counts_are_refused_above_the_stated_limit(tmp_path: Path, trials: str, expected: str):
    study = _study(tmp_path, f"name: x\n{AGENT}trials: {trials}\n")
    _fails_before_any_trial(tmp_path, study, f"{study}: invalid study file\n{expected}\nSee docs/study.md.")


def test_absurd_bootstrap_count_is_refused(tmp_path: Path):
    study = _study(tmp_path, f"name: x\n{AGENT}bootstrap: {{n_boot: 1000000000}}\n")
    _fails_before_any_trial(tmp_path, study, f"{study}: invalid study file\n  bootstrap.n_boot: Input should be "
                                             "less than or equal to 100000\nSee docs/study.md.")


# -- task files ------------------------------------------------------------------------------------------


@pytest.fixture
def registry(tmp_path: Path) -> Path:
    root = tmp_path / "registry"
    shutil.copytree(TINY_TASK, root / "tiny-chain")
    return root


def _list_fails(registry: Path, expected: str) -> None:
    code, stderr = _run("tasks", "list", "--registry", str(registry))
    assert code == 1
    assert stderr == f"error: {expected}\n"


@pytest.mark.parametrize("file, body, expected", [
    ("task.toml", b'version = "1.0"\n[task]\nname = "caf\xe9"\n',
     ":3: task.toml is not UTF-8 text (byte 0xe9 at offset 34); save it as UTF-8"),
    ("steps/make/instruction.md", b"\x7fELF\x02\x01\x01\x00",
     ":1: instruction (instruction.md) contains a NUL byte (a binary file?); it must be plain text"),
    ("steps/double/solution/solve.sh", b"echo \xc3\x28\n",
     ":1: reference solution (solution/solve.sh) is not UTF-8 text (byte 0xc3 at offset 5); save it as UTF-8"),
    ("steps/report/tests/test.sh", b"#!/bin/bash\n\xff\n",
     ":2: verifier (tests/test.sh) is not UTF-8 text (byte 0xff at offset 12); save it as UTF-8"),
])
def test_binary_or_non_utf8_task_files_are_named_with_their_line(registry: Path, file: str, body: bytes,
                                                                  expected: str):
    (registry / "tiny-chain" / file).write_bytes(body)
    _list_fails(registry, f"{registry / 'tiny-chain' / file}{expected}")


def _dockerfile(registry: Path, copy_line: str) -> Path:
    path = registry / "tiny-chain" / "environment" / "Dockerfile"
    path.write_text(f"FROM debian:bookworm-slim\nWORKDIR /app\n# the task's files\n{copy_line}\n")
    return path


@pytest.mark.parametrize("copy_line, expected", [
    ("COPY /etc/hostname /app/", "COPY source '/etc/hostname' is an absolute path; sources must be relative to "
                                 "the build context {context}"),
    ("COPY ../task.toml /app/", "COPY source '../task.toml' leaves the build context {context}; keep task files "
                                "under environment/"),
    ("ADD files/../../steps /app/", "ADD source 'files/../../steps' leaves the build context {context}; keep task "
                                    "files under environment/"),
])
def test_dockerfile_copy_from_outside_the_task_is_refused_with_file_and_line(registry: Path, copy_line: str,
                                                                             expected: str):
    path = _dockerfile(registry, copy_line)
    _list_fails(registry, f"{path}:4: {expected.format(context=path.parent)}")


def test_dockerfile_copy_of_a_symlink_is_refused(registry: Path):
    path = _dockerfile(registry, "COPY hostname /app/")
    os.symlink("/etc/hostname", path.parent / "hostname")
    _list_fails(registry, f"{path}:4: COPY source 'hostname' goes through the symlink {path.parent / 'hostname'}; "
                          "copy the real file into environment/ instead")


def test_dockerfile_copy_of_a_directory_holding_a_symlink_is_refused(registry: Path):
    path = _dockerfile(registry, "COPY files/ /app/")
    os.symlink("/etc/shadow", path.parent / "files" / "shadow")
    _list_fails(registry, f"{path}:4: COPY source 'files/' contains the symlink {path.parent / 'files' / 'shadow'}; "
                          "replace it with the real file")


# -- error texts verbatim ----------------------------------------------------------------------------------


@pytest.mark.parametrize("toml, expected", [
    ('version = "1.0"\n[task]\nname = "a/b/c"\n', "task.toml: [task] name must be `name` or `org/name`, got 'a/b/c'"),
    ('[task]\nname = "t"\n[[steps]]\nname = "make"\n[[steps]]\nname = "make"\n',
     "task.toml: stage names repeated in [[steps]]: ['make']"),
    ('[task]\nname = "t"\n[metadata.hrbench]\nstructure = "wide"\n[[steps]]\nname = "make"\n',
     "task.toml: [metadata.hrbench] structure must be 'shallow' or 'deep', got 'wide'"),
    ('steps = []\n[task]\nname = "t"\n', "task.toml: [[steps]] must be a non-empty array of tables"),
])
def test_error_texts_with_brackets_are_printed_verbatim(registry: Path, toml: str, expected: str):
    (registry / "tiny-chain" / "task.toml").write_text(toml)
    _list_fails(registry, f"{registry / 'tiny-chain'}/{expected}")


def test_a_journal_path_that_is_a_directory_is_one_clear_error(tmp_path: Path):
    study = _study(tmp_path, f"name: x\ntasks: {{registry: {REGISTRY}}}\n{AGENT}")
    journal = tmp_path / "out" / "journal" / "abc" / "checkpoint" / "a" / "tiny-chain.jsonl"
    journal.mkdir(parents=True)
    code, stderr = _run("run", str(study), "--out", str(tmp_path / "out"))
    assert code == 1
    assert stderr == (f"error: {journal}: the trial journal is a directory, not a file; move it away (or use a "
                      "new --out directory) and run again\n")


def test_agents_check_on_a_binary_config_is_one_line(tmp_path: Path):
    config = tmp_path / "a.yaml"
    config.write_bytes(b"\x00\x01\x02")
    code, stderr = _run("agents", "check", str(config))
    assert code == 1
    assert stderr == f"invalid: {config}:1: agent config file contains a NUL byte (a binary file?); it must be plain text\n"
