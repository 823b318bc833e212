"""Checkpoint trials as Harbor tasks: stage i of a task, started from the oracle state e_{i-1}.

`export_checkpoint_tasks` writes, per stage i of each task, a Harbor 1.4 task with one step (stage i's
instruction, reference solution and verifier) whose step set-up (`steps/<stage>/workdir/setup.sh`,
which Harbor and hrbench run before the agent's turn) replays the reference solutions of stages
1..i-1 from the task's own environment: the oracle state e_{i-1}, as hrbench's `oracle_replay`
checkpoints start. `harbor run` can run them on any Harbor environment; `hrbench import harbor` with
`kind: checkpoint` brings the job back as checkpoint trials. docs/harbor.md has the layout.

Limitation: a reference solution that names its own folder by the absolute path /solution (instead of
$0 or BASH_SOURCE) cannot be replayed by the set-up, which runs it from a folder in WORKDIR.
"""

from __future__ import annotations

import hashlib
import json
import shutil
import tempfile
from pathlib import Path

from hrbench.harbor_io.jobs import harbor_checksum
from hrbench.tasks.harbor import SCHEMA_VERSIONS
from hrbench.tasks.model import Stage, Task

CHECK_LIBRARY = Path(__file__).resolve().parent.parent / "tasks" / "checks.sh"
ORACLE_DIR = ".hrbench-oracle"  # in WORKDIR while the set-up replays; removed before the agent's turn
# Bump when what the set-up replays changes: the recipe hash (in each task's metadata) changes with it.
RECIPE_VERSION = "1"


def checkpoint_task_name(task: Task, stage: Stage) -> str:
    """The exported task of `stage`: `<task>--at-<stage>` (an org/ prefix kept)."""
    return f"{task.name}--at-{stage.name}"


def state_recipe_sha256(task: Task, stage: Stage) -> str:
    """What e_{i-1} is made of: the task's content, the stages replayed before `stage`, the recipe version."""
    body = {"task_sha256": task.content_hash(), "replayed": [s.name for s in task.stages[:stage.index]],
            "recipe": RECIPE_VERSION}
    return hashlib.sha256(json.dumps(body, sort_keys=True).encode()).hexdigest()


def _toml_string(value: str) -> str:
    return json.dumps(value)  # a TOML basic string is a JSON string for the text we write


def _table(name: str, pairs: tuple[tuple[str, str], ...] | dict[str, str]) -> str:
    items = pairs.items() if isinstance(pairs, dict) else pairs
    body = "".join(f"{k} = {_toml_string(v)}\n" for k, v in items)
    return f"\n[{name}]\n{body}" if body else ""


def _task_toml(task: Task, stage: Stage) -> str:
    verifier_env = dict(task.verifier_env) | dict(stage.verifier_env)
    description = (f"Stage {stage.index + 1} of {task.n_stages} of {task.name} ({stage.name}), started from the "
                   "oracle state after the stages before it")
    lines = [
        f'schema_version = "{SCHEMA_VERSIONS[-1]}"',
        f"artifacts = {json.dumps(list(task.artifacts + stage.artifacts))}",
        "",
        "[task]",
        f"name = {_toml_string(checkpoint_task_name(task, stage))}",
        f"description = {_toml_string(description)}",
        "",
        "[metadata.hrbench]",
        f"family = {_toml_string(task.family)}",
        f'structure = "{task.structure}"',
        f"strict_integrity = {'true' if task.strict_integrity else 'false'}",
        f"persist = {json.dumps(list(task.persist))}",
        "",
        "[metadata.hrbench.checkpoint]",
        f"task = {_toml_string(task.name)}",
        f"stage = {_toml_string(stage.name)}",
        f"stage_index = {stage.index}",
        f"task_sha256 = {_toml_string(task.content_hash())}",
        f"state_recipe_sha256 = {_toml_string(state_recipe_sha256(task, stage))}",
        "",
        "[environment]",
        f"workdir = {_toml_string(task.workdir)}",
    ]
    text = "\n".join(lines) + "\n"
    text += _table("environment.env", task.env)
    text += f"\n[verifier]\ntimeout_sec = {stage.verifier_timeout_sec or task.verifier_timeout_sec}\n"
    text += _table("verifier.env", verifier_env)
    text += f"\n[agent]\ntimeout_sec = {stage.agent_timeout_sec or task.agent_timeout_sec}\n"
    text += _table("solution.env", task.solution_env)
    text += f"\n[[steps]]\nname = {_toml_string(stage.name)}\n"
    return text


def _setup_script(task: Task, stage: Stage) -> str:
    """Replays sigma_1..sigma_{i-1} (each after its own step's workdir files and setup.sh), then runs
    this stage's own setup.sh, then removes the replay folder: the agent starts from e_{i-1}."""
    lines = ["#!/bin/bash",
             f"# hrbench export: the oracle state before stage {stage.name!r} of {task.name!r} "
             f"(recipe {state_recipe_sha256(task, stage)[:12]})",
             "set -euo pipefail", f"oracle=$(pwd)/{ORACLE_DIR}"]
    lines += [f"export {k}={_toml_string(v)}" for k, v in task.solution_env]  # [solution.env], as replays see it
    for prior in task.stages[:stage.index]:
        here = f'"$oracle/{prior.index}"'
        if prior.workdir_files is not None:
            lines.append(f'if [ -d {here}/workdir ]; then cp -a {here}/workdir/. ./; rm -f ./setup.sh; fi')
        if prior.setup_script is not None:
            lines.append(f'bash {here}/workdir/setup.sh')
        lines.append(f'bash {here}/solution/solve.sh')
    lines.append(f'rm -rf "$oracle"')
    if stage.setup_script is not None:
        lines.append("bash ./.hrbench-stage-setup.sh; rm -f ./.hrbench-stage-setup.sh")
    return "\n".join(lines) + "\n"


def export_task(task: Task, stage: Stage, dest: Path) -> Path:
    """Write the checkpoint task of `stage` into `dest/<name>` and return its folder."""
    folder = Path(dest) / checkpoint_task_name(task, stage).replace("/", "__")
    if folder.exists():
        shutil.rmtree(folder)
    folder.mkdir(parents=True)
    (folder / "task.toml").write_text(_task_toml(task, stage))
    if (task.path / "environment").is_dir():
        shutil.copytree(task.path / "environment", folder / "environment", symlinks=True)
    step = folder / "steps" / stage.name
    shutil.copytree(stage.solution.parent, step / "solution", symlinks=True)
    shutil.copytree(stage.tests, step / "tests", symlinks=True)
    if task.shared_tests is not None and task.shared_tests != stage.tests:
        for path in task.shared_tests.iterdir():  # Harbor's fallback folder, merged under the step's own files
            target = step / "tests" / path.name
            if not target.exists():
                (shutil.copytree if path.is_dir() else shutil.copy)(path, target)
    if not (step / "tests" / "checks.sh").exists():
        shutil.copy(CHECK_LIBRARY, step / "tests" / "checks.sh")  # hrbench's verifiers source it; Harbor has none
    (step / "instruction.md").write_text(stage.instruction)
    workdir = step / "workdir"
    workdir.mkdir()
    if stage.workdir_files is not None:
        for path in stage.workdir_files.iterdir():
            if path.name == "setup.sh":
                shutil.copy(path, workdir / ".hrbench-stage-setup.sh")
            else:
                (shutil.copytree if path.is_dir() else shutil.copy)(path, workdir / path.name)
    for prior in task.stages[:stage.index]:
        base = workdir / ORACLE_DIR / str(prior.index)
        shutil.copytree(prior.solution.parent, base / "solution", symlinks=True)
        if prior.workdir_files is not None:
            shutil.copytree(prior.workdir_files, base / "workdir", symlinks=True)
    (workdir / "setup.sh").write_text(_setup_script(task, stage))
    return folder


def export_checkpoint_tasks(tasks: list[Task], dest: Path) -> list[Path]:
    """Every stage of every task as a Harbor task under `dest` (deterministic: the same tasks, the same bytes)."""
    return [export_task(t, s, dest) for t in tasks for s in t.stages]


def checkpoint_task_checksums(tasks: list[Task]) -> dict[str, tuple[Task, str, str]]:
    """{exported task name: (task, stage, Harbor checksum)}: what an imported checkpoint trial must match."""
    out: dict[str, tuple[Task, str, str]] = {}
    with tempfile.TemporaryDirectory(prefix="hrbench-export-") as tmp:
        for task in tasks:
            for stage in task.stages:
                out[checkpoint_task_name(task, stage)] = (task, stage.name, harbor_checksum(export_task(task, stage,
                                                                                                      Path(tmp))))
    return out
