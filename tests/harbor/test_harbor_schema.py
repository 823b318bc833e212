"""Protects Harbor 1.3-1.4 semantics (issue 24): the schema versions read, network_mode per phase, the
allowlist refused by name, artifact objects' `exclude`, `[task] version`."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from hrbench.envs.registry import backend_for_task
from hrbench.tasks.harbor import SCHEMA_VERSIONS, save_artifacts
from hrbench.tasks.loader import load_task
from hrbench.tasks.model import TaskError

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "harbor"


def _ledger(tmp_path: Path, schema: str = "1.4") -> Path:
    task = tmp_path / "ledger"
    shutil.copytree(FIXTURES / "ledger", task)
    body = (task / "task.toml").read_text().replace('schema_version = "1.1"', f'schema_version = "{schema}"')
    (task / "task.toml").write_text(body)
    return task


def test_a_newer_schema_version_is_refused_with_one_line_naming_the_versions_read(tmp_path: Path):
    with pytest.raises(TaskError) as caught:
        load_task(_ledger(tmp_path, schema="9.9"))
    message = str(caught.value)
    assert "\n" not in message and "'9.9'" in message and ", ".join(SCHEMA_VERSIONS) in message
    proc = subprocess.run([sys.executable, "-m", "hrbench.cli", "tasks", "list", str(tmp_path / "ledger")],
                          capture_output=True, text=True, timeout=120)
    errors = [line for line in proc.stderr.splitlines() if line.strip()]
    assert proc.returncode == 1 and len(errors) == 1 and "9.9" in errors[0], proc.stderr
    assert load_task(_ledger(tmp_path / "ok", schema="1.4")).schema_version == "1.4"


def test_public_network_is_docker_only_and_auto_sends_it_to_docker(tmp_path: Path):
    task = load_task(_ledger(tmp_path))
    assert task.network == "no-network" and task.docker_only is None  # the fixture declares no network
    toml = tmp_path / "ledger" / "task.toml"
    toml.write_text(toml.read_text().replace("[agent]\n", '[agent]\nnetwork_mode = "public"\n', 1))
    public = load_task(tmp_path / "ledger")
    assert public.network == "public"
    assert "network_mode = 'public' ([agent]) needs a network" in public.docker_only
    assert backend_for_task("auto", public) == "docker" and backend_for_task("auto", task) == "local"
    status = {k.key: (k.status, k.docker) for k in public.support}
    assert status["agent.network_mode"] == ("honoured", "honoured")


def test_no_network_is_honoured_on_local(tmp_path: Path):
    toml = _ledger(tmp_path) / "task.toml"
    toml.write_text(toml.read_text().replace("[environment]\n", '[environment]\nnetwork_mode = "no-network"\n', 1))
    task = load_task(toml.parent)
    assert task.network == "no-network" and task.docker_only is None


@pytest.mark.parametrize("edit, named", [
    (("[agent]\n", '[agent]\nnetwork_mode = "allowlist"\nallowed_hosts = ["pypi.org"]\n'), "allowlist"),
    (("[verifier]\n", '[verifier]\n[verifier.environment]\nnetwork_mode = "allowlist"\n'), "allowlist"),
])
def test_what_neither_backend_can_mean_is_refused_by_name(tmp_path: Path, edit: tuple[str, str], named: str):
    toml = _ledger(tmp_path) / "task.toml"
    toml.write_text(toml.read_text().replace(edit[0], edit[1], 1))
    with pytest.raises(TaskError, match=named.replace("[", r"\[").replace("]", r"\]")):
        load_task(toml.parent)


def test_artifact_objects_exclude_their_globs(tmp_path: Path):
    toml = _ledger(tmp_path) / "task.toml"
    toml.write_text(toml.read_text().replace('artifacts = ["/app/ledger.txt"]',
                                             'artifacts = ["/app/ledger.txt", {source = "/output", exclude = '
                                             '["*.pyc", "cache"]}]'))
    task = load_task(toml.parent)
    assert task.artifact_exclude == (("/output", ("*.pyc", "cache")),)
    assert {k.key: k.status for k in task.support}["artifacts[].exclude"] == "honoured"
    out = tmp_path / "sandbox-output"
    (out / "cache").mkdir(parents=True)
    (out / "keep.txt").write_text("kept")
    (out / "mod.pyc").write_text("x")
    (out / "cache" / "blob").write_text("x")
    entries = save_artifacts([("/output", out)], tmp_path / "saved", exclude=task.artifact_exclude)
    status = {e.path: e.status for e in entries}
    assert status == {"/output/cache": "excluded", "/output/keep.txt": "saved", "/output/mod.pyc": "excluded"}
    assert not (tmp_path / "saved" / "files" / "output" / "mod.pyc").exists()
    assert json.loads((tmp_path / "saved" / "manifest.json").read_text())[0]["status"] == "excluded"


def test_task_version_is_read_and_listed(tmp_path: Path):
    toml = _ledger(tmp_path) / "task.toml"
    toml.write_text(toml.read_text().replace('[task]\n', '[task]\nversion = "2.3.1"\n', 1))
    assert load_task(toml.parent).version == "2.3.1"
    proc = subprocess.run([sys.executable, "-m", "hrbench.cli", "tasks", "list", str(toml.parent)],
                          capture_output=True, text=True, timeout=120)
    assert "2.3.1" in proc.stdout and "honoured    honoured    task.version" in proc.stdout, proc.stdout
