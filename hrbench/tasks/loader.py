"""Load Harbor-format task packages (multi-step, or single-step as one stage)."""

from __future__ import annotations

import functools
import json
import math
import shlex
import subprocess
import tomllib
from pathlib import Path
from typing import Any

from hrbench.config_files import read_text_file
from hrbench.tasks.model import Stage, Task, TaskError

SINGLE_STAGE_NAME = "main"


def load_task(path: str | Path) -> Task:
    """Load one task package directory; raises TaskError naming file and field."""
    root = Path(path).resolve()
    toml_path = root / "task.toml"
    if not toml_path.is_file():
        raise TaskError(f"{root}: no task.toml; a task package needs task.toml at its top level")
    try:
        config = tomllib.loads(_text(toml_path, "task.toml"))
    except tomllib.TOMLDecodeError as exc:
        raise TaskError(f"{toml_path}: malformed TOML: {exc}") from exc

    task_table = _table(config, "task", toml_path)
    name = task_table.get("name", root.name)
    if not isinstance(name, str) or not name:
        raise TaskError(f"{toml_path}: [task] name must be a non-empty string")
    meta = _table(config.get("metadata", {}), "hrbench", toml_path, required=False)
    depends = _table(meta, "depends_on", toml_path, required=False)
    weights = _table(meta, "weights", toml_path, required=False)

    steps = config.get("steps")
    if steps is None:
        stages = [_single_stage(root)]
    else:
        if not isinstance(steps, list) or not steps:
            raise TaskError(f"{toml_path}: [[steps]] must be a non-empty array of tables")
        stages = [_stage(root, toml_path, i, step, depends, weights) for i, step in enumerate(steps)]
    _check_graph(stages, depends, toml_path)
    unknown = sorted(set(weights) - {s.name for s in stages})
    if unknown:
        raise TaskError(f"{toml_path}: [metadata.hrbench.weights] names unknown stage(s) {unknown}; "
                        f"stages are {[s.name for s in stages]}")

    structure = meta.get("structure", "deep" if any(s.depends_on for s in stages) else "shallow")
    if structure not in ("shallow", "deep"):
        raise TaskError(f"{toml_path}: [metadata.hrbench] structure must be 'shallow' or 'deep', got {structure!r}")

    env = _table(config, "environment", toml_path, required=False)
    if not isinstance(env.get("workdir", ""), str):
        raise TaskError(f"{toml_path}: [environment] workdir must be a string path")
    workdir, copies, docker_only = _read_dockerfile(root / "environment" / "Dockerfile", env.get("workdir"))
    setup = root / "environment" / "setup.sh"
    if setup.is_file():
        _text(setup, "setup script (environment/setup.sh)")
    shared = root / "tests"
    return Task(
        name=name,
        path=root,
        description=str(task_table.get("description", "")),
        family=str(meta.get("family", name)),
        structure=structure,
        stages=tuple(stages),
        workdir=workdir,
        initial_files=tuple(copies),
        setup_script=setup if setup.is_file() else None,
        shared_tests=shared if shared.is_dir() else None,
        docker_only=docker_only,
        verifier_timeout_sec=_positive(_table(config, "verifier", toml_path, required=False), "timeout_sec", 60.0,
                                       f"{toml_path}: [verifier] timeout_sec"),
        agent_timeout_sec=_positive(_table(config, "agent", toml_path, required=False), "timeout_sec", 120.0,
                                    f"{toml_path}: [agent] timeout_sec"),
    )


def load_registry(path: str | Path, include: list[str] | None = None) -> list[Task]:
    """Every task package directly under `path` (sorted by name), or just `include`."""
    root = Path(path).resolve()
    if not root.is_dir():
        raise TaskError(f"{root}: task registry directory not found")
    dirs = sorted(p for p in root.iterdir() if (p / "task.toml").is_file())
    tasks = [load_task(d) for d in dirs]
    if include is None:
        return tasks
    by_name = {t.name: t for t in tasks}
    missing = [n for n in include if n not in by_name]
    if missing:
        raise TaskError(f"{root}: no task package named {missing}; available: {sorted(by_name)}")
    return [by_name[n] for n in include]


def _table(parent: Any, key: str, where: Path, required: bool = True) -> dict[str, Any]:
    value = parent.get(key) if isinstance(parent, dict) else None
    if value is None:
        if required:
            raise TaskError(f"{where}: missing [{key}] table")
        return {}
    if not isinstance(value, dict):
        raise TaskError(f"{where}: '{key}' must be a table")
    return value


def _text(path: Path, what: str) -> str:
    return read_text_file(path, TaskError, what)


def _positive(table: dict, key: str, default: float, where: str) -> float:
    """A finite number > 0 from a TOML table (TOML has inf and nan)."""
    value = table.get(key, default)
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value <= 0:
        raise TaskError(f"{where} must be a positive number, got {value!r}")
    return float(value)


def _require(path: Path, what: str) -> Path:
    """A script the harness runs later: it must exist and be UTF-8 text now, not fail mid-study."""
    if not path.is_file():
        raise TaskError(f"{path}: missing {what}")
    _text(path, what)
    return path


def _instruction(path: Path) -> str:
    what = "instruction (instruction.md)"
    if not path.is_file():
        raise TaskError(f"{path}: missing {what}")
    return _text(path, what)


def _stage(
    root: Path, toml_path: Path, index: int, step: Any, depends: dict, weights: dict
) -> Stage:
    if not isinstance(step, dict) or not isinstance(step.get("name"), str):
        raise TaskError(f"{toml_path}: [[steps]] entry {index + 1} needs a string 'name'")
    name = step["name"]
    folder = root / "steps" / name
    if not folder.is_dir():
        raise TaskError(f"{folder}: missing stage directory for step {name!r} declared in task.toml")
    deps = depends.get(name, [])
    if not isinstance(deps, list) or not all(isinstance(d, str) for d in deps):
        raise TaskError(f"{toml_path}: depends_on.{name} must be a list of stage names")
    return Stage(
        name=name,
        index=index,
        instruction=_instruction(folder / "instruction.md"),
        solution=_require(folder / "solution" / "solve.sh", "reference solution (solution/solve.sh)"),
        tests=_require(folder / "tests" / "test.sh", "verifier (tests/test.sh)").parent,
        depends_on=tuple(deps),
        weight=_positive(weights, name, 1.0, f"{toml_path}: [metadata.hrbench.weights] {name}"),
    )


def _single_stage(root: Path) -> Stage:
    return Stage(
        name=SINGLE_STAGE_NAME,
        index=0,
        instruction=_instruction(root / "instruction.md"),
        solution=_require(root / "solution" / "solve.sh", "reference solution (solution/solve.sh)"),
        tests=_require(root / "tests" / "test.sh", "verifier (tests/test.sh)").parent,
    )


def _check_graph(stages: list[Stage], depends: dict, where: Path) -> None:
    names = [s.name for s in stages]
    dupes = sorted({n for n in names if names.count(n) > 1})
    if dupes:
        raise TaskError(f"{where}: stage names repeated in [[steps]]: {dupes}")
    for stage_name in depends:
        if stage_name not in names:
            raise TaskError(f"{where}: depends_on names unknown stage {stage_name!r}; stages are {names}")
    for s in stages:
        for d in s.depends_on:
            if d not in names:
                raise TaskError(f"{where}: stage {s.name!r} depends_on unknown stage {d!r}; stages are {names}")
    # Cycle detection by DFS; then require delivery order to respect the edges.
    graph = {s.name: list(s.depends_on) for s in stages}
    state: dict[str, int] = {}

    def visit(node: str, trail: list[str]) -> None:
        if state.get(node) == 1:
            cycle = trail[trail.index(node):] + [node]
            raise TaskError(f"{where}: dependency cycle among stages: {' -> '.join(cycle)}")
        if state.get(node) == 2:
            return
        state[node] = 1
        for dep in graph[node]:
            visit(dep, trail + [node])
        state[node] = 2

    for n in names:
        visit(n, [])
    position = {n: i for i, n in enumerate(names)}
    for s in stages:
        for d in s.depends_on:
            if position[d] > position[s.name]:
                raise TaskError(
                    f"{where}: stage {s.name!r} depends on {d!r}, which is delivered later; reorder [[steps]]"
                )


def _read_dockerfile(path: Path, workdir_override: str | None) -> tuple[str, list[tuple[Path, str]], str | None]:
    """WORKDIR, the COPYs into it, and why the task is docker-only (None if local can run it)."""
    workdir = workdir_override or "/app"
    copies: list[tuple[Path, str]] = []
    if not path.is_file():
        return workdir, copies, None
    reasons: list[str] = []
    for number, raw in _logical_lines(_text(path, "Dockerfile")):
        where = f"{path}:{number}"
        parts = raw.split(None, 1)
        if not parts:
            continue
        op, rest = parts[0].upper(), (parts[1] if len(parts) > 1 else "")
        if op == "WORKDIR":
            workdir = workdir_override or rest.strip()
        elif op in ("COPY", "ADD"):
            flags, args = _copy_args(rest, where, op)
            if len(args) < 2:
                raise TaskError(f"{where}: {op} needs a source and a destination: {raw!r}")
            if any(f.startswith("--from") for f in flags):
                reasons.append(f"{op} --from needs a container build")
                continue
            *sources, dest = args
            for src in sources:
                copies.extend(_copy_entry(path.parent, src, dest, workdir, reasons, where, op))
        elif op == "RUN":
            reason = _run_needs_container(rest)
            if reason:
                reasons.append(reason)
        elif op == "USER":
            reasons.append(f"USER {rest.strip()} needs a container user")
    return workdir, copies, ("; ".join(reasons) or None)


def _logical_lines(text: str) -> list[tuple[int, str]]:
    """(first physical line number, instruction) for each instruction, continuations joined."""
    lines: list[tuple[int, str]] = []
    buf, start = "", 0
    for number, line in enumerate(text.splitlines(), start=1):
        if line.strip().startswith("#"):
            continue
        if not buf:
            start = number
        if line.rstrip().endswith("\\"):
            buf += line.rstrip()[:-1] + " "
            continue
        lines.append((start, (buf + line).strip()))
        buf = ""
    if buf:
        lines.append((start, buf.strip()))
    return lines


def _copy_args(rest: str, where: str, op: str) -> tuple[list[str], list[str]]:
    """(--flags, paths) of a COPY/ADD in shell form or JSON (exec) form."""
    words = rest.split()
    flags = []
    while words and words[0].startswith("--"):
        flags.append(words.pop(0))
    body = " ".join(words)
    try:
        args = json.loads(body) if body.startswith("[") else shlex.split(body)
    except ValueError as exc:
        raise TaskError(f"{where}: cannot parse {op} arguments {body!r}: {exc}") from exc
    if not isinstance(args, list) or not all(isinstance(a, str) for a in args):
        raise TaskError(f"{where}: {op} in JSON form must be a list of strings: {body!r}")
    return flags, args


def _copy_entry(context: Path, src: str, dest: str, workdir: str, reasons: list[str], where: str,
                op: str) -> list[tuple[Path, str]]:
    """A COPY source inside the build context (environment/), with no symlink on the way or inside it:
    the local backend copies it onto the workspace, so anything else would pull host files in."""
    if src.startswith("/"):
        raise TaskError(f"{where}: {op} source {src!r} is an absolute path; sources must be relative to the "
                        f"build context {context}")
    if any(c in src for c in "*?["):
        raise TaskError(f"{where}: {op} source {src!r} uses a wildcard; name the files or directories")
    lexical = context.joinpath(*[p for p in src.split("/") if p not in ("", ".")])
    if ".." in Path(src).parts:
        raise TaskError(f"{where}: {op} source {src!r} leaves the build context {context}; "
                        "keep task files under environment/")
    if context.is_symlink():
        raise TaskError(f"{where}: the build context {context} is a symlink; make environment/ a real directory")
    node = context
    for part in lexical.relative_to(context).parts:
        node = node / part
        if node.is_symlink():
            raise TaskError(f"{where}: {op} source {src!r} goes through the symlink {node}; "
                            "copy the real file into environment/ instead")
    if not lexical.exists():
        raise TaskError(f"{where}: {op} source {src!r} does not exist")
    if lexical.is_dir():
        for inner in sorted(lexical.rglob("*")):
            if inner.is_symlink():
                raise TaskError(f"{where}: {op} source {src!r} contains the symlink {inner}; "
                                "replace it with the real file")
    source = lexical.resolve()
    if not source.is_relative_to(context.resolve()):
        raise TaskError(f"{where}: {op} source {src!r} leaves the build context {context}")
    target = dest if dest.startswith("/") else f"{workdir.rstrip('/')}/{dest}"
    if not (target == workdir or target.startswith(workdir.rstrip("/") + "/")):
        reasons.append(f"{op} to {target} lies outside WORKDIR {workdir}")
        return []
    rel = target[len(workdir):].strip("/")
    return [(source, rel)]


def _run_needs_container(command: str) -> str | None:
    """None when a RUN line only installs Debian packages this host already has."""
    missing: list[str] = []
    for part in command.replace("&&", ";").split(";"):
        words = part.split()
        if not words or words[:2] in (["apt-get", "update"], ["apt", "update"]) or words[:2] == ["rm", "-rf"]:
            continue
        if words[:2] in (["apt-get", "install"], ["apt", "install"]):
            missing += [w for w in words[2:] if not w.startswith("-") and not _host_has_package(w)]
            continue
        return f"RUN {part.strip()[:60]!r} needs a container build"
    if missing:
        return f"needs packages not on this host: {' '.join(missing)}"
    return None


@functools.cache
def _host_has_package(package: str) -> bool:
    result = subprocess.run(
        ["dpkg-query", "-W", "-f=${Status}", package], capture_output=True, text=True, check=False
    )
    return "install ok installed" in result.stdout
