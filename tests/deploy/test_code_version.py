"""Protects "a number is tied to the code": commits, dirty trees, the check library and agent programs all count."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from hrbench.preregistration import freeze, register_agent
from hrbench.protocol import load_study
from tests.conftest import TINY_STUDY

REPO = Path(__file__).resolve().parents[2]
PROBE = """
import json, sys
from hrbench.preregistration import code_version, freeze
from hrbench.protocol import load_study
from hrbench.tasks.loader import load_registry
loaded = load_study(sys.argv[1])
prereg = freeze(loaded.study, load_registry(loaded.registry, loaded.study.tasks.include))
print(json.dumps({"label": code_version().label, "code": code_version().model_dump(), "prereg": prereg.prereg_sha256}))
"""


def _git(root: Path, *args: str) -> None:
    subprocess.run(["git", "-C", str(root), *args], check=True, capture_output=True,
                   env={"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t", "GIT_COMMITTER_NAME": "t",
                        "GIT_COMMITTER_EMAIL": "t@t", "PATH": "/usr/bin:/bin"})


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    """A copy of hrbench's code in a git repository of its own, one commit."""
    root = tmp_path / "hrbench-copy"
    for name in ("hrbench", "pipelines", "resources"):
        shutil.copytree(REPO / name, root / name, ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(REPO / ".gitignore", root / ".gitignore")  # bytecode the probes write is not a change
    _git(root, "init", "-q")
    _git(root, "add", "-A")
    _git(root, "commit", "-qm", "one")
    return root


def _probe(root: Path) -> dict:
    """Code version and pre-registration hash as the copy at `root` computes them (a fresh process)."""
    result = subprocess.run([sys.executable, "-c", PROBE, str(TINY_STUDY)], capture_output=True, text=True,
                            env={"PYTHONPATH": str(root), "PATH": "/usr/bin:/bin"}, cwd=root, timeout=120)
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


def test_two_commits_give_two_code_versions_and_two_study_versions(tree: Path):
    first = _probe(tree)
    assert first["code"]["git_commit"] and first["code"]["dirty"] is False and "dirty" not in first["label"]
    doc = tree / "hrbench" / "stats" / "intervals.py"
    doc.write_text(doc.read_text() + "\n# a comment is a change of code\n")
    dirty = _probe(tree)
    assert dirty["code"]["dirty"] is True and ".dirty." in dirty["label"] and dirty["prereg"] != first["prereg"]
    _git(tree, "commit", "-qam", "two")
    second = _probe(tree)
    assert second["code"]["git_commit"] != first["code"]["git_commit"] and second["code"]["dirty"] is False
    assert second["label"] != first["label"] and second["prereg"] not in (first["prereg"], dirty["prereg"])


def test_outside_git_the_source_hash_tells_versions_apart(tree: Path):
    shutil.rmtree(tree / ".git")
    first = _probe(tree)
    assert first["code"]["git_commit"] is None and first["label"].startswith(first["code"]["package"] + "+src.")
    source = tree / "hrbench" / "analysis.py"
    source.write_text(source.read_text() + "\n")
    second = _probe(tree)
    assert second["label"] != first["label"] and second["prereg"] != first["prereg"]


def test_editing_the_check_library_changes_the_preregistration(tree: Path):
    before = _probe(tree)
    checks = tree / "hrbench" / "tasks" / "checks.sh"
    checks.write_text(checks.read_text() + "\nfinish() { echo 1 > /logs/verifier/reward.txt; }\n")  # always pass
    after = _probe(tree)
    assert after["prereg"] != before["prereg"]


def test_a_command_agents_program_is_part_of_its_registration(tmp_path: Path):
    program = tmp_path / "agent.py"
    program.write_text("print('hello')\n")
    study_file = tmp_path / "study.yaml"
    study_file.write_text(_with_command_agent(program))
    loaded = load_study(study_file)
    from hrbench.tasks.loader import load_registry

    tasks = load_registry(loaded.registry, loaded.study.tasks.include)
    prereg = freeze(loaded.study, tasks)
    before = register_agent(prereg, loaded.study.agent("cmd"))
    assert [p.path for p in before.program] == ["python3", str(program)]
    program.write_text("print('hello, forged')\n")
    after = register_agent(prereg, loaded.study.agent("cmd"))
    assert after.agent_sha256 != before.agent_sha256
    assert freeze(loaded.study, tasks).prereg_sha256 == prereg.prereg_sha256  # the protocol is untouched


def _with_command_agent(program: Path) -> str:
    import yaml

    body = yaml.safe_load(TINY_STUDY.read_text())
    body["tasks"]["registry"] = str(TINY_STUDY.parent.parent / "registry")
    body["agents"].append({"id": "cmd", "kind": "command", "argv": ["python3", str(program)]})
    return yaml.safe_dump(body)
