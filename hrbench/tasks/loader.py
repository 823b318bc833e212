"""Load Harbor-format task packages (multi-step, or single-step as one stage)."""

from __future__ import annotations

import functools
import json
import math
import re
import shlex
import subprocess
import tomllib
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from hrbench.config_files import read_text_file
from hrbench.tasks.harbor import (
    SCHEMA_VERSIONS,
    HarborTaskConfig,
    StepSection,
    VerifierSection,
    artifact_excludes,
    artifact_path,
    key_support,
)
from hrbench.tasks.model import Stage, Task, TaskError, VerifierImage

SINGLE_STAGE_NAME = "main"


def load_task(path: str | Path) -> Task:
    """Load one task package directory (Harbor format, schema 1.0 or 1.1+); raises TaskError naming
    file and field."""
    root = Path(path).resolve()
    toml_path = root / "task.toml"
    if not toml_path.is_file():
        raise TaskError(f"{root}: no task.toml; a task package needs task.toml at its top level")
    try:
        raw = tomllib.loads(_text(toml_path, "task.toml"))
    except tomllib.TOMLDecodeError as exc:
        raise TaskError(f"{toml_path}: malformed TOML: {exc}") from exc
    for table in ("task", "metadata", "verifier", "agent", "environment", "solution"):
        if table in raw and not isinstance(raw[table], dict):
            raise TaskError(f"{toml_path}: '{table}' must be a table ([{table}])")
    if "steps" in raw and (not isinstance(raw["steps"], list) or not raw["steps"]):
        raise TaskError(f"{toml_path}: [[steps]] must be a non-empty array of tables")
    _check_schema_version(raw, toml_path)
    try:
        config = HarborTaskConfig.model_validate(raw)
    except ValidationError as exc:
        raise TaskError(f"{toml_path}: {_validation_text(exc)}") from exc
    _check_runnable_somewhere(config, toml_path)

    name = config.task.name if config.task is not None else root.name
    if not name or name.startswith("/") or ".." in name.split("/") or name.count("/") > 1:
        raise TaskError(f"{toml_path}: [task] name must be `name` or `org/name`, got {name!r}")
    meta = _table(config.metadata, "hrbench", toml_path, required=False)
    depends = _table(meta, "depends_on", toml_path, required=False)
    weights = _table(meta, "weights", toml_path, required=False)

    shared = root / "tests"
    shared_tests = shared if shared.is_dir() else None
    if config.steps is None:
        stages = [_single_stage(root, config.verifier)]
    else:
        stages = [_stage(root, toml_path, i, step, depends, weights, shared_tests, config.verifier)
                  for i, step in enumerate(config.steps)]
    _check_graph(stages, depends, toml_path)
    unknown = sorted(set(weights) - {s.name for s in stages})
    if unknown:
        raise TaskError(f"{toml_path}: [metadata.hrbench.weights] names unknown stage(s) {unknown}; "
                        f"stages are {[s.name for s in stages]}")

    structure = meta.get("structure", "deep" if any(s.depends_on for s in stages) else "shallow")
    if structure not in ("shallow", "deep"):
        raise TaskError(f"{toml_path}: [metadata.hrbench] structure must be 'shallow' or 'deep', got {structure!r}")

    env = config.environment
    workdir, copies, docker_only = _read_dockerfile(root / "environment" / "Dockerfile", env.workdir)
    reasons = [docker_only] if docker_only else []
    if env.docker_image and not (root / "environment" / "Dockerfile").is_file():
        reasons.append(f"the prebuilt image {env.docker_image!r} ([environment] docker_image) needs a container")
    if env.gpus > 0:
        reasons.append(f"[environment] gpus = {env.gpus} needs GPU passthrough")
    networked = {where: mode for where, mode in config.network_modes().items() if mode == "public"}
    if networked:
        reasons.append("network_mode = 'public' (" + ", ".join(networked) + ") needs a network, and local sandboxes "
                       "have none")
    setup = root / "environment" / "setup.sh"
    if setup.is_file():
        _text(setup, "setup script (environment/setup.sh)")
    persist = _persisted_paths(config, meta, workdir, toml_path)
    goal = root / "instruction.md"
    return Task(
        name=name,
        path=root,
        description=config.task.description if config.task is not None else "",
        goal_text=_instruction(goal) if config.steps is not None and goal.is_file() else None,
        family=str(meta.get("family", name)),
        structure=structure,
        stages=tuple(stages),
        workdir=workdir,
        initial_files=tuple(copies),
        setup_script=setup if setup.is_file() else None,
        shared_tests=shared_tests,
        docker_only="; ".join(reasons) or None,
        verifier_timeout_sec=config.verifier.timeout_sec or 60.0,
        agent_timeout_sec=config.agent.timeout_sec or 120.0,
        schema_version=config.schema_version,
        env=tuple(env.env.items()),
        verifier_env=tuple(config.verifier.env.items()),
        solution_env=tuple(config.solution.env.items()),
        healthcheck=env.healthcheck,
        reward_strategy=config.multi_step_reward_strategy,
        artifacts=tuple(artifact_path(a) for a in config.artifacts),
        artifact_exclude=artifact_excludes(config),
        network="public" if networked else "no-network",
        version=config.task.version if config.task is not None else None,
        persist=persist,
        support=key_support(raw),
        strict_integrity=bool(meta.get("strict_integrity", "hrbench" in config.metadata)),
    )


def _check_schema_version(raw: dict[str, Any], where: Path) -> None:
    """A schema this release has not read is refused: a newer Harbor's keys could change what the task means."""
    version = raw.get("schema_version", raw.get("version", "1.0"))
    if str(version) not in SCHEMA_VERSIONS:
        raise TaskError(f"{where}: schema_version {str(version)!r} is not one this hrbench reads "
                        f"({', '.join(SCHEMA_VERSIONS)}); upgrade hrbench, or declare a version it reads")


def _check_runnable_somewhere(config: HarborTaskConfig, where: Path) -> None:
    """Keys whose meaning neither backend can give are refused by name, not run with another meaning."""
    sidecars = config.compose_collect_hooks()
    if sidecars:
        raise TaskError(f"{where}: [[verifier.collect]] hooks in compose services ({', '.join(sidecars)}) need a "
                        "compose environment, which neither backend starts; run them in service 'main'")
    allowlists = [w for w, mode in config.network_modes().items() if mode == "allowlist"]
    if allowlists:
        raise TaskError(f"{where}: network_mode 'allowlist' / allowed_hosts ({', '.join(allowlists)}) needs an egress "
                        "filter, which neither backend sets up (local has no network, docker all or none); use "
                        "'no-network', or 'public' with backend: docker")


def _validation_text(exc: ValidationError) -> str:
    """pydantic's errors as `[steps.0.min_reward]: what` lines (the TOML location of each)."""
    parts = []
    for error in exc.errors():
        loc = [str(p) for p in error["loc"]]
        if loc[:1] == ["steps"] and len(loc) > 1:
            table, key = f"[[steps]] #{int(loc[1]) + 1}" + (f" [{'.'.join(loc[2:-1])}]" if len(loc) > 3 else ""), \
                loc[-1] if len(loc) > 2 else ""
        else:
            table, key = (f"[{'.'.join(loc[:-1])}]" if len(loc) > 1 else ""), loc[-1] if loc else ""
        parts.append(f"{table} {key}: {error['msg']}, got {error.get('input')!r}".strip())
    return "; ".join(parts)


# Paths outside WORKDIR that Harbor tasks commonly write and read back (Harbor's /logs/artifacts is
# collected after every verification); they persist across a stage's commands and into the verifier.
DEFAULT_PERSIST = ("/output", "/logs/artifacts")
_RESERVED = ("/usr", "/etc", "/proc", "/dev", "/tmp", "/tests", "/solution", "/logs/verifier", "/bin", "/lib",
             "/lib64", "/sbin")


def _persisted_paths(config: HarborTaskConfig, meta: dict, workdir: str, where: Path) -> tuple[str, ...]:
    declared = meta.get("persist", [])
    if not isinstance(declared, list) or not all(isinstance(p, str) for p in declared):
        raise TaskError(f"{where}: [metadata.hrbench] persist must be a list of absolute paths")
    candidates = list(DEFAULT_PERSIST) + declared
    for entry in [*config.artifacts, *(a for s in config.steps or [] for a in s.artifacts)]:
        candidates.append(artifact_path(entry))
    out: list[str] = []
    for path in candidates:
        clean = "/" + "/".join(p for p in path.split("/") if p not in ("", "."))
        if not path.startswith("/") or ".." in path.split("/"):
            raise TaskError(f"{where}: {path!r} (artifacts or [metadata.hrbench] persist) must be an absolute path "
                            "without '..'")
        if clean == workdir or clean.startswith(workdir.rstrip("/") + "/"):
            continue  # inside WORKDIR: persists already
        if clean == "/" or any(clean == r or clean.startswith(r + "/") for r in _RESERVED) or \
                (workdir + "/").startswith(clean + "/"):
            raise TaskError(f"{where}: {path!r} cannot persist outside WORKDIR {workdir} (it is, or holds, a "
                            "path the sandbox provides); collect a file inside WORKDIR or under /output instead")
        if clean not in out and not any(clean.startswith(o + "/") for o in out):
            out.append(clean)
    return tuple(out)


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


def load_paths(paths: list[Path]) -> tuple[list[Task], list[tuple[Path, str]]]:
    """Task dirs and registries alike: a dir with task.toml is one task, any other dir is a registry
    of task dirs. A task that does not load is returned as (dir, reason), the others still load."""
    tasks: list[Task] = []
    errors: list[tuple[Path, str]] = []
    for path in paths:
        root = Path(path).resolve()
        if not root.is_dir():
            errors.append((root, f"{root}: not a directory (give a task dir, with task.toml, or a registry of them)"))
            continue
        dirs = [root] if (root / "task.toml").is_file() else \
            sorted(p for p in root.iterdir() if (p / "task.toml").is_file())
        if not dirs:
            errors.append((root, f"{root}: neither a task (no task.toml) nor a registry (no subdirectory has one)"))
        for folder in dirs:
            try:
                tasks.append(load_task(folder))
            except TaskError as exc:
                errors.append((folder, str(exc)))
    return tasks, errors


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
    root: Path, toml_path: Path, index: int, step: StepSection, depends: dict, weights: dict,
    shared_tests: Path | None, task_verifier: VerifierSection,
) -> Stage:
    name = step.name
    if not name or "/" in name or name in (".", ".."):
        raise TaskError(f"{toml_path}: [[steps]] entry {index + 1} needs a plain 'name', got {name!r}")
    folder = root / "steps" / name
    if not folder.is_dir():
        raise TaskError(f"{folder}: missing stage directory for step {name!r} declared in task.toml")
    deps = depends.get(name, [])
    if not isinstance(deps, list) or not all(isinstance(d, str) for d in deps):
        raise TaskError(f"{toml_path}: depends_on.{name} must be a list of stage names")
    workdir = folder / "workdir"
    setup = workdir / "setup.sh"
    if setup.is_file():
        _text(setup, f"step setup script (steps/{name}/workdir/setup.sh)")
    min_reward = step.min_reward
    separate = step.verifier.separate(task_verifier)
    return Stage(
        name=name,
        index=index,
        instruction=_instruction(folder / "instruction.md"),
        solution=_require(folder / "solution" / "solve.sh", "reference solution (solution/solve.sh)"),
        tests=_tests(folder / "tests", shared_tests, f"step {name!r}"),
        depends_on=tuple(deps),
        weight=_positive(weights, name, 1.0, f"{toml_path}: [metadata.hrbench.weights] {name}"),
        workdir_files=workdir if workdir.is_dir() else None,
        setup_script=setup if setup.is_file() else None,
        agent_timeout_sec=step.agent.timeout_sec,
        verifier_timeout_sec=step.verifier.timeout_sec,
        verifier_env=tuple(step.verifier.env.items()),
        healthcheck=step.healthcheck,
        min_reward=tuple(min_reward.items()) if isinstance(min_reward, dict) else min_reward,
        artifacts=tuple(artifact_path(a) for a in step.artifacts),
        separate_verifier=separate,
        verifier_image=_verifier_image([step.verifier, task_verifier], [folder / "tests", root / "tests"],
                                       toml_path) if separate else None,
        # a step's own hooks, else the task's: a step's verifier falls back to [verifier] key by key
        collect=tuple(step.verifier.collect or task_verifier.collect),
    )


def _tests(folder: Path, shared: Path | None, what: str) -> Path:
    """The step's tests/ when it has a test.sh; else Harbor's fallback, the task-level tests/test.sh."""
    if (folder / "test.sh").is_file():
        return _require(folder / "test.sh", "verifier (tests/test.sh)").parent
    if shared is not None and (shared / "test.sh").is_file():
        return _require(shared / "test.sh", "verifier (tests/test.sh)").parent
    raise TaskError(f"{folder / 'test.sh'}: missing verifier (tests/test.sh) for {what}, and the task has no "
                    "tests/test.sh to fall back on")


def _single_stage(root: Path, verifier: VerifierSection) -> Stage:
    return Stage(
        name=SINGLE_STAGE_NAME,
        index=0,
        instruction=_instruction(root / "instruction.md"),
        solution=_require(root / "solution" / "solve.sh", "reference solution (solution/solve.sh)"),
        tests=_require(root / "tests" / "test.sh", "verifier (tests/test.sh)").parent,
        separate_verifier=verifier.separate(),
        verifier_image=_verifier_image([verifier], [root / "tests"], root / "task.toml")
        if verifier.separate() else None,
        collect=tuple(verifier.collect),
    )


def _verifier_image(tables: list[VerifierSection], contexts: list[Path], toml_path: Path) -> VerifierImage | None:
    """A separate verifier's image as Harbor resolves its environment: the first [verifier.environment] of
    `tables` (the step's, then the task's) names a `docker_image`, else the first folder of `contexts` that
    exists (the step's tests/, then the task's) has a Dockerfile. (Harbor's last fallback, a copy of
    [environment], is the task's own image here: its docker_image is the image hrbench builds as e_0.)"""
    table = next((t.environment for t in tables if t.environment is not None), None) or {}
    image = table.get("docker_image")
    if image is not None and (not isinstance(image, str) or not image.strip()):
        raise TaskError(f"{toml_path}: [verifier.environment] docker_image must be an image name, got {image!r}")
    if image is not None:
        return VerifierImage(docker_image=image)
    context = next((c for c in contexts if c.is_dir()), None)
    if context is None or not (context / "Dockerfile").is_file():
        return None
    return VerifierImage(dockerfile=context / "Dockerfile")


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
        if words[0] in ("pip", "pip3") and words[1:2] == ["install"] or words[:4] == ["python3", "-m", "pip", "install"]:
            names = words[2:] if words[0] != "python3" else words[4:]
            lacking = [w for w in names if not w.startswith("-") and not _host_has_distribution(w)]
            if lacking:
                return f"RUN {part.strip()[:60]!r} needs pip packages this host's python3 lacks: {' '.join(lacking)}"
            continue
        if words[:2] == ["mkdir", "-p"] or words[0] == "mkdir":
            continue  # directories: WORKDIR ones exist, others are refused by name when written
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


@functools.cache
def _host_has_distribution(requirement: str) -> bool:
    """A pip requirement (`pytest`, `pytest==8.1`) already installed for the host's /usr/bin/python3."""
    name = re.split(r"[<>=!~\[; ]", requirement, maxsplit=1)[0]
    result = subprocess.run(["/usr/bin/python3", "-I", "-c", ("import importlib.metadata as m, sys; "
                             "m.distribution(sys.argv[1])"), name], capture_output=True, check=False)
    return result.returncode == 0
