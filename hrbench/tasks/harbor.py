"""Harbor's task.toml as pydantic models, what hrbench does with each key, and Harbor's reward rules.

The schema follows Harbor's `TaskConfig` (harbor.models.task.config; docs/tasks.md cites the
source read): schema 1.0 (`version = "1.0"`, no `[task]`) and 1.1+ (`schema_version`, `[task]` with an
`org/name`). Every key found in a task.toml is reported by `key_support`: honoured (and how),
ignored (and why), or unsupported (the task loads, the key has no effect, the listing says so).
"""

from __future__ import annotations

import fnmatch
import json
import math
import os
import re
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator


# The task.toml schema versions this release reads with Harbor's semantics (Harbor 1.0 to 1.4).
SCHEMA_VERSIONS = ("1.0", "1.1", "1.2", "1.3", "1.4")
NETWORK_MODES = ("no-network", "public", "allowlist")


class _Open(BaseModel):
    """Keys Harbor adds in later schema versions are kept (and reported), not refused."""

    model_config = ConfigDict(extra="allow")


class Healthcheck(_Open):
    """[environment.healthcheck] / [steps.healthcheck]: Docker HEALTHCHECK semantics (Harbor's defaults)."""

    model_config = ConfigDict(extra="allow", frozen=True)
    command: str
    interval_sec: float = Field(5.0, ge=0)
    timeout_sec: float = Field(30.0, gt=0)
    start_period_sec: float = Field(0.0, ge=0)
    start_interval_sec: float = Field(5.0, ge=0)
    retries: int = Field(3, ge=1)


class Author(_Open):
    name: str
    email: str | None = None


class PackageInfo(_Open):
    """[task] (schema 1.1+): `name` is `org/name`."""

    name: str
    description: str = ""
    authors: list[Author] = []
    keywords: list[str] = []
    version: str | None = None


NetworkMode = Literal["no-network", "public", "allowlist"]


class CollectHook(_Open):
    """[[verifier.collect]]: a command run in the trial's environment after the agent's turn, before the
    artifacts are collected (Harbor's VerifierCollectConfig; `service` other than "main" needs compose)."""

    model_config = ConfigDict(extra="allow", frozen=True)
    command: str
    service: str = "main"
    timeout_sec: float = Field(60.0, gt=0, allow_inf_nan=False)
    user: str | int | None = None


class VerifierSection(_Open):
    timeout_sec: float | None = Field(None, gt=0, allow_inf_nan=False)
    env: dict[str, str] = {}
    user: str | int | None = None
    network_mode: NetworkMode | None = None
    allowed_hosts: list[str] = []
    # Harbor's rule: unset means "separate" when [verifier.environment] is given, else "shared"
    environment_mode: Literal["shared", "separate"] | None = None
    environment: dict[str, Any] | None = None
    collect: list[CollectHook] = []

    @model_validator(mode="after")
    def _shared_has_no_environment(self) -> VerifierSection:
        if self.environment_mode == "shared" and self.environment is not None:
            raise ValueError("environment_mode = 'shared' cannot have a [verifier.environment] (Harbor refuses it); "
                             "omit the environment or set environment_mode = 'separate'")
        return self

    def separate(self, fallback: VerifierSection | None = None) -> bool:
        """Whether this verifier runs in its own environment; a step's unset mode and environment fall back
        to the task's [verifier] (`fallback`), as Harbor resolves a step's verifier."""
        if self.environment_mode is not None:
            return self.environment_mode == "separate"
        if self.environment is not None:
            return True
        return fallback.separate() if fallback is not None else False


class AgentSection(_Open):
    timeout_sec: float | None = Field(None, gt=0, allow_inf_nan=False)
    user: str | int | None = None
    network_mode: NetworkMode | None = None
    allowed_hosts: list[str] = []


class EnvironmentSection(_Open):
    build_timeout_sec: float = 600.0
    docker_image: str | None = None
    cpus: int | None = None
    memory_mb: int | None = None
    storage_mb: int | None = None
    gpus: int = 0
    allow_internet: bool = True
    network_mode: NetworkMode | None = None
    allowed_hosts: list[str] = []
    env: dict[str, str] = {}
    healthcheck: Healthcheck | None = None
    workdir: str | None = None
    mcp_servers: list[dict[str, Any]] = []
    skills_dir: str | None = None


class SolutionSection(_Open):
    env: dict[str, str] = {}


class Artifact(_Open):
    source: str
    destination: str | None = None
    exclude: list[str] = []


class StepSection(_Open):
    name: str
    agent: AgentSection = AgentSection()
    verifier: VerifierSection = VerifierSection()
    min_reward: float | dict[str, float] | None = None
    healthcheck: Healthcheck | None = None
    artifacts: list[str | Artifact] = []


class HarborTaskConfig(_Open):
    """A whole task.toml. `version` (schema 1.0) is Harbor's old name of `schema_version`."""

    schema_version: str = "1.0"
    task: PackageInfo | None = None
    metadata: dict[str, Any] = {}
    verifier: VerifierSection = VerifierSection()
    agent: AgentSection = AgentSection()
    environment: EnvironmentSection = EnvironmentSection()
    solution: SolutionSection = SolutionSection()
    source: str | None = None
    multi_step_reward_strategy: Literal["mean", "final"] | None = None
    steps: list[StepSection] | None = None
    artifacts: list[str | Artifact] = []

    @model_validator(mode="before")
    @classmethod
    def _version_rename(cls, data: Any) -> Any:
        if isinstance(data, dict) and "version" in data:
            data = dict(data)
            data.setdefault("schema_version", str(data.pop("version")))
        return data

    @field_validator("schema_version", mode="before")
    @classmethod
    def _as_text(cls, value: Any) -> Any:
        return str(value) if isinstance(value, (int, float)) else value

    def phases(self) -> list[tuple[str, AgentSection | VerifierSection]]:
        """Every phase table that may set a network, named as task.toml names it."""
        out: list[tuple[str, AgentSection | VerifierSection]] = [("[agent]", self.agent), ("[verifier]", self.verifier)]
        for i, step in enumerate(self.steps or []):
            out += [(f"[[steps]] {step.name!r} [agent]", step.agent), (f"[[steps]] {step.name!r} [verifier]",
                                                                         step.verifier)]
        return out

    def network_modes(self) -> dict[str, str]:
        """{where: mode} of every declared network_mode (and allowlist's allowed_hosts), Harbor's per-phase
        override over the [environment] baseline."""
        modes: dict[str, str] = {}
        if self.environment.network_mode is not None:
            modes["[environment]"] = self.environment.network_mode
        if self.environment.allowed_hosts:
            modes["[environment] allowed_hosts"] = "allowlist"
        for where, table in self.phases():
            if table.network_mode is not None:
                modes[where] = table.network_mode
            if table.allowed_hosts:
                modes[f"{where} allowed_hosts"] = "allowlist"
            if isinstance(table, VerifierSection) and table.environment is not None:
                own = table.environment
                if own.get("network_mode") in NETWORK_MODES:
                    modes[f"{where} environment"] = own["network_mode"]
                if own.get("allowed_hosts"):
                    modes[f"{where} environment allowed_hosts"] = "allowlist"
        return modes

    def compose_collect_hooks(self) -> list[str]:
        """Where a [[verifier.collect]] hook names a compose service other than main (none runs here)."""
        return [f"{where} collect ({hook.service!r})" for where, table in self.phases()
                if isinstance(table, VerifierSection) for hook in table.collect if hook.service != "main"]


def artifact_path(entry: str | Artifact) -> str:
    return entry if isinstance(entry, str) else entry.source


def artifact_excludes(config: HarborTaskConfig) -> tuple[tuple[str, tuple[str, ...]], ...]:
    """(source, exclude globs) of every artifact object declaring `exclude`, task-level and the steps'."""
    entries = [*config.artifacts, *(a for step in config.steps or [] for a in step.artifacts)]
    return tuple((a.source, tuple(a.exclude)) for a in entries if isinstance(a, Artifact) and a.exclude)


def excluded(sandbox_path: str, exclude: tuple[tuple[str, tuple[str, ...]], ...]) -> bool:
    """An artifact file left out by its artifact's `exclude`: a glob matching its path under the source, or
    any one component of that path (`*.pyc`, `node_modules`)."""
    for source, patterns in exclude:
        root = source.rstrip("/")
        if not sandbox_path.startswith(root + "/"):
            continue
        rel = sandbox_path[len(root) + 1:]
        if any(fnmatch.fnmatchcase(rel, p) or any(fnmatch.fnmatchcase(part, p) for part in rel.split("/"))
               for p in patterns):
            return True
    return False


class KeySupport(BaseModel):
    """One task.toml key and what hrbench does with it, on the local backend and on docker."""

    model_config = ConfigDict(frozen=True)
    key: str  # dotted, e.g. `steps[].verifier.env`
    status: Status  # on the local backend
    docker: Status  # on the docker backend
    how: str  # how it is honoured, or why it is not


Status = Literal["honoured", "ignored", "refused", "unsupported"]
_LOCAL_NO_NET = "no-network honoured (local sandboxes have none); public/allowlist refused on local: docker-only"
_DOCKER_NET = ("docker: public gives the trial's container a network (the whole trial: the engine cannot switch it per "
               "phase), allowlist is refused (no egress filter)")

# key -> (status on local, status on docker, how/why). Keys not listed are reported "unsupported" by name.
# Every key of Harbor's TaskConfig up to schema 1.4 is listed (docs/tasks.md's table is generated from it).
SUPPORT: dict[str, tuple[str, str, str]] = {
    "version": ("honoured", "honoured", "schema 1.0 name of schema_version"),
    "schema_version": ("honoured", "honoured", f"{', '.join(SCHEMA_VERSIONS)} load; any other version is refused "
                                               "(a newer Harbor's keys could change what a task means)"),
    "source": ("ignored", "ignored", "provenance only; shown nowhere else"),
    "task.name": ("honoured", "honoured", "the task's name (org/name kept; files use org__name)"),
    "task.description": ("honoured", "honoured", "shown by `tasks list`"),
    "task.version": ("honoured", "honoured", "the package's version: shown by `tasks list`, in the `task_catalog` "
                                             "table (`task_version`); the content hash still versions a study"),
    "task.authors": ("ignored", "ignored", "registry metadata; no effect on a run"),
    "task.keywords": ("ignored", "ignored", "registry metadata; no effect on a run"),
    "metadata": ("ignored", "ignored", "free-form; only [metadata.hrbench] is read"),
    "metadata.hrbench": ("honoured", "honoured", "family, structure, depends_on, weights, persist"),
    "verifier.timeout_sec": ("honoured", "honoured", "the verifier's wall-time limit (default 60 s)"),
    "verifier.env": ("honoured", "honoured", "set in the verifier's process (${VAR} / ${VAR:-default} from the "
                                             "host)"),
    "verifier.user": ("ignored", "ignored", "the verifier runs as the one unprivileged sandbox uid (docs/security.md)"),
    "verifier.network_mode": ("honoured", "honoured", f"the verification phase's network: {_LOCAL_NO_NET}; "
                                                      f"{_DOCKER_NET}"),
    "verifier.allowed_hosts": ("refused", "refused", "an allowlist needs an egress filter neither backend sets up"),
    "verifier.environment_mode": ("honoured", "honoured", "`separate`: the verifier runs in a fresh environment that "
                                                          "receives only the collected paths (/logs/artifacts, the "
                                                          "task's and the step's artifacts) at their own paths; local: "
                                                          "a new sandbox over an empty WORKDIR and empty persisted "
                                                          "paths; docker: a new container of the verifier's image "
                                                          "(below); unset: separate iff [verifier.environment] is given"),
    "verifier.environment": ("honoured", "honoured", "makes the verifier separate (environment_mode unset); docker: "
                                                     "the verifier's container is its docker_image, else the image "
                                                     "built from the step's tests/Dockerfile (else the task's "
                                                     "tests/Dockerfile), else the task's own image (e_0); local: "
                                                     "the host's /usr, no image is built; its keys below"),
    "verifier.environment.docker_image": ("ignored", "honoured", "docker: the verifier's image, over a "
                                                                 "tests/Dockerfile (Harbor's prebuilt image): used as "
                                                                 "the engine has it; no registry is reachable, so one "
                                                                 "it lacks is replaced by the base image, with a "
                                                                 "warning; local: the host's /usr"),
    "verifier.environment.build_timeout_sec": ("ignored", "ignored", "local builds no image; docker builds without a "
                                                                     "limit"),
    "verifier.environment.os": ("ignored", "ignored", "Linux only"),
    "verifier.environment.cpus": ("ignored", "ignored", "the verifier has the study's sandbox limits"),
    "verifier.environment.memory_mb": ("ignored", "ignored", "the verifier has the study's sandbox limits"),
    "verifier.environment.storage_mb": ("ignored", "ignored", "the verifier has the study's sandbox limits"),
    "verifier.environment.gpus": ("ignored", "ignored", "no GPU passthrough"),
    "verifier.environment.gpu_types": ("ignored", "ignored", "no GPU passthrough"),
    "verifier.environment.tpu": ("ignored", "ignored", "no TPU passthrough"),
    "verifier.environment.allow_internet": ("ignored", "ignored", "the verifier's network is the trial's: none on "
                                                                  "local; docker: the task's [environment] "
                                                                  "allow_internet or a phase's network_mode"),
    "verifier.environment.network_mode": ("honoured", "honoured", f"the verifier environment's network: "
                                                                  f"{_LOCAL_NO_NET}; {_DOCKER_NET}"),
    "verifier.environment.allowed_hosts": ("refused", "refused", "an allowlist needs an egress filter neither backend "
                                                                 "sets up"),
    "verifier.environment.env": ("ignored", "ignored", "the verifier's processes get [environment.env] and "
                                                       "[verifier.env], as in a shared verification"),
    "verifier.environment.healthcheck": ("ignored", "ignored", "not run in the verifier's environment"),
    "verifier.environment.workdir": ("ignored", "ignored", "the verifier runs in the task's WORKDIR, where the "
                                                           "collected paths are put"),
    "verifier.environment.mcp_servers": ("unsupported", "unsupported", "no MCP servers are started"),
    "verifier.environment.skills_dir": ("unsupported", "unsupported", "no agent skills directory is provisioned"),
    "verifier.collect": ("honoured", "honoured", "each hook's command runs in the trial's environment as the agent "
                                                 "user after the agent's turn, before collection and verification "
                                                 "(a step's own hooks, else the task's); a failing hook is reported "
                                                 "in the verifier output"),
    "verifier.collect[].command": ("honoured", "honoured", "the hook's shell command"),
    "verifier.collect[].service": ("honoured", "honoured", "`main` (the trial's environment); another service is "
                                                           "refused at load: it needs a compose environment"),
    "verifier.collect[].timeout_sec": ("honoured", "honoured", "the hook's wall-time limit (default 60)"),
    "verifier.collect[].user": ("ignored", "ignored", "hooks run as the one unprivileged sandbox uid"),
    "agent.timeout_sec": ("honoured", "honoured", "the reference solution's limit; agents use the study's budget"),
    "agent.user": ("ignored", "ignored", "the agent runs as the one unprivileged sandbox uid (docs/security.md)"),
    "agent.network_mode": ("honoured", "honoured", f"the agent phase's network: {_LOCAL_NO_NET}; {_DOCKER_NET}"),
    "agent.allowed_hosts": ("refused", "refused", "an allowlist needs an egress filter neither backend sets up"),
    "environment.build_timeout_sec": ("ignored", "ignored", "local builds no image; docker builds without a limit"),
    "environment.docker_image": ("ignored", "ignored", "local runs the host's /usr; docker builds environment/"
                                                       "Dockerfile (no registry is reachable to pull an image); a "
                                                       "task with an image and no Dockerfile is docker-only and runs "
                                                       "on the base image"),
    "environment.os": ("ignored", "ignored", "Linux only"),
    "environment.cpus": ("ignored", "ignored", "limits come from the study's sandbox limits"),
    "environment.memory_mb": ("ignored", "ignored", "limits come from the study's sandbox limits (`memory_mb`)"),
    "environment.storage_mb": ("ignored", "ignored", "limits come from the study's sandbox limits"),
    "environment.gpus": ("refused", "ignored", "no GPU passthrough: gpus > 0 is docker-only, and docker gives none"),
    "environment.gpu_types": ("ignored", "ignored", "no GPU passthrough"),
    "environment.tpu": ("ignored", "ignored", "no TPU passthrough"),
    "environment.allow_internet": ("ignored", "honoured", "pre-1.3 network switch: no network on local, whatever "
                                                          "the value (the audit says `network needed`); docker: true "
                                                          "gives the container a network"),
    "environment.network_mode": ("honoured", "honoured", f"every phase's network unless the phase sets its own: "
                                                         f"{_LOCAL_NO_NET}; {_DOCKER_NET}"),
    "environment.allowed_hosts": ("refused", "refused", "an allowlist needs an egress filter neither backend sets "
                                                        "up"),
    "environment.env": ("honoured", "honoured", "set in every sandboxed process of the task"),
    "environment.healthcheck": ("honoured", "honoured", "run when a trial's environment starts; failing = harness "
                                                        "error"),
    "environment.healthcheck.command": ("honoured", "honoured", "run in the environment, as the agent user"),
    "environment.healthcheck.interval_sec": ("honoured", "honoured", "wait between failed tries (default 5)"),
    "environment.healthcheck.timeout_sec": ("honoured", "honoured", "limit of one try (default 30)"),
    "environment.healthcheck.start_period_sec": ("honoured", "honoured", "failures in it do not count (default 0)"),
    "environment.healthcheck.start_interval_sec": ("honoured", "honoured", "wait between tries in the start period "
                                                                           "(default 5)"),
    "environment.healthcheck.retries": ("honoured", "honoured", "failures allowed after the start period (default 3)"),
    "environment.workdir": ("honoured", "honoured", "WORKDIR, over the Dockerfile's"),
    "environment.mcp_servers": ("unsupported", "unsupported", "no MCP servers are started"),
    "environment.skills_dir": ("unsupported", "unsupported", "no agent skills directory is provisioned"),
    "solution.env": ("honoured", "honoured", "set when the reference solution runs"),
    "multi_step_reward_strategy": ("honoured", "honoured", "the trial's Harbor reward (mean or final) is recorded "
                                                           "(`harbor_reward`)"),
    "artifacts": ("honoured", "honoured", "collected after each verification and saved beside the trajectory (paths "
                                          "outside WORKDIR persist)"),
    "artifacts[].source": ("honoured", "honoured", "the path collected"),
    "artifacts[].destination": ("ignored", "ignored", "saved under files/<source> beside the trajectory, always"),
    "artifacts[].exclude": ("honoured", "honoured", "glob patterns (fnmatch, on the path under source) left out "
                                                    "of the saved files"),
    "artifacts[].service": ("ignored", "ignored", "one service per trial: the task's own"),
    "steps": ("honoured", "honoured", "one stage per step, in order"),
    "steps[].name": ("honoured", "honoured", "the stage name; steps/<name>/ holds it"),
    "steps[].agent.timeout_sec": ("honoured", "honoured", "the step's reference-solution limit"),
    "steps[].agent.user": ("ignored", "ignored", "one unprivileged uid"),
    "steps[].agent.network_mode": ("honoured", "honoured", f"this step's agent phase: {_LOCAL_NO_NET}; {_DOCKER_NET}"),
    "steps[].agent.allowed_hosts": ("refused", "refused", "an allowlist needs an egress filter"),
    "steps[].verifier.timeout_sec": ("honoured", "honoured", "the step verifier's wall-time limit"),
    "steps[].verifier.env": ("honoured", "honoured", "set in the step verifier's process, over [verifier.env]"),
    "steps[].verifier.user": ("ignored", "ignored", "one unprivileged uid"),
    "steps[].verifier.network_mode": ("honoured", "honoured", f"this step's verification: {_LOCAL_NO_NET}; "
                                                              f"{_DOCKER_NET}"),
    "steps[].verifier.allowed_hosts": ("refused", "refused", "an allowlist needs an egress filter"),
    "steps[].verifier.environment_mode": ("honoured", "honoured", "as [verifier] environment_mode, for this "
                                                                  "step (unset: the task's)"),
    "steps[].verifier.environment": ("honoured", "honoured", "as [verifier.environment], for this step, over the "
                                                             "task's (its keys are listed as [verifier.environment]'s)"),
    "steps[].verifier.collect": ("honoured", "honoured", "this step's hooks, in place of [verifier]'s"),
    "steps[].min_reward": ("honoured", "honoured", ("Harbor's gate: a natural rollout continues past a failed stage "
                                                    "only when its rewards meet min_reward")),
    "steps[].healthcheck": ("honoured", "honoured", "run after the step's setup.sh, before the agent's turn (fields "
                                                    "as [environment.healthcheck])"),
    "steps[].artifacts": ("honoured", "honoured", "collected after this step's verification (objects as "
                                                  "[[artifacts]])"),
}


_LEAF_TABLES = {"verifier.env", "environment.env", "solution.env", "steps[].verifier.env", "steps[].healthcheck",
                "steps[].min_reward", "verifier.environment.env", "verifier.environment.healthcheck"}
# tables whose keys are reported under another table's names (a step's verifier environment: as the task's)
_TABLES_AS = {"verifier.environment": "verifier.environment.",
              "steps[].verifier.environment": "verifier.environment."}
_OBJECT_LISTS = {"artifacts": "artifacts[].", "steps[].artifacts": "artifacts[].",
                 "verifier.collect": "verifier.collect[].", "steps[].verifier.collect": "verifier.collect[]."}  # entries' keys, by dotted name


def key_support(raw: dict[str, Any]) -> tuple[KeySupport, ...]:
    """Every key present in a parsed task.toml, with its status (nested tables by dotted name)."""
    found: list[str] = []

    def walk(table: dict[str, Any], prefix: str) -> None:
        for key, value in table.items():
            name = f"{prefix}{key}"
            if name == "metadata":
                found.append(name)
                if isinstance(value, dict) and "hrbench" in value:
                    found.append("metadata.hrbench")
            elif name == "steps" and isinstance(value, list):
                found.append(name)
                for step in value:
                    if isinstance(step, dict):
                        walk(step, "steps[].")
            elif name in _OBJECT_LISTS and isinstance(value, list):
                found.append(name)
                for entry in value:
                    if isinstance(entry, dict):
                        walk(entry, _OBJECT_LISTS[name])
            elif name in _TABLES_AS and isinstance(value, dict):
                found.append(name)
                walk(value, _TABLES_AS[name])
            elif name == "environment.healthcheck" and isinstance(value, dict):
                found.append(name)
                walk(value, f"{name}.")
            elif isinstance(value, dict) and name not in _LEAF_TABLES:
                walk(value, f"{name}.")
            else:
                found.append(name)

    walk(raw, "")
    rows = []
    for name in dict.fromkeys(found):
        local, docker, how = SUPPORT.get(name, ("unsupported", "unsupported", "not a key hrbench knows; it has no "
                                                                             "effect"))
        rows.append(KeySupport(key=name, status=local, docker=docker, how=how))  # type: ignore[arg-type]
    return tuple(rows)


_TEMPLATE = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)(?::-([^}]*))?\}")


def resolve_env(pairs: tuple[tuple[str, str], ...], host: dict[str, str], where: str) -> dict[str, str]:
    """Harbor's env templates: `${VAR}` and `${VAR:-default}` from the harness's environment.

    Only the variables a task names are read; an unset one without a default is an error naming it."""
    out: dict[str, str] = {}
    for key, value in pairs:
        def sub(match: re.Match[str], key: str = key, value: str = value) -> str:
            name, default = match.group(1), match.group(2)
            if name in host:
                return host[name]
            if default is not None:
                return default
            raise KeyError(f"{where}: {key} = {value!r} needs the environment variable {name}, which is unset; "
                           f"export {name} before running, or give a default: ${{{name}:-value}}")
        out[key] = _TEMPLATE.sub(sub, value)
    return out


# -- rewards ----------------------------------------------------------------------------------------

class RewardError(ValueError):
    """The verifier left no usable reward: a verifier error (Harbor's RewardFileNotFoundError and kin)."""


def _number(key: str, value: Any, source: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise RewardError(f"{source}: {key} = {value!r} is not a number")
    number = float(value)
    if not math.isfinite(number):
        raise RewardError(f"{source}: {key} = {value!r} is not a finite number")
    return number


def parse_reward_text(text: str) -> dict[str, float]:
    """reward.txt: one number -> {"reward": x} (Harbor's parse)."""
    body = text.strip()
    if not body:
        raise RewardError("reward.txt is empty")
    try:
        value = float(body)
    except ValueError as exc:
        raise RewardError(f"reward.txt holds {body[:80]!r}, not a number") from exc
    return {"reward": _number("reward", value, "reward.txt")}


def parse_reward_json(data: Any) -> dict[str, float]:
    """reward.json: a table of numbers, kept verbatim (sub-rewards are not clamped or averaged)."""
    if not isinstance(data, dict) or not data:
        raise RewardError("reward.json must be a non-empty JSON object of numbers")
    return {str(k): _number(str(k), v, "reward.json") for k, v in data.items()}


def primary_reward(rewards: dict[str, float]) -> float:
    """The stage's reward: `reward` when present; else the only key (Harbor's metrics read a one-key
    dict); several keys and no `reward` is an error, as in Harbor."""
    if "reward" in rewards:
        return rewards["reward"]
    if len(rewards) == 1:
        return next(iter(rewards.values()))
    raise RewardError(f"reward.json has {len(rewards)} keys ({', '.join(sorted(rewards))}) and no `reward`; "
                      "Harbor needs `reward` (or exactly one key): add \"reward\": <overall score>")


def meets_min_reward(min_reward: float | tuple[tuple[str, float], ...] | None, rewards: dict[str, float] | None
                     ) -> bool:
    """Harbor's step gate: a float gates on `reward`; a table gates on each key; a missing key or a
    verifier error (no rewards) counts as -inf. No gate: met."""
    if min_reward is None:
        return True
    gates = {"reward": min_reward} if isinstance(min_reward, (int, float)) else dict(min_reward)
    values = rewards or {}
    return all(values.get(key, -math.inf) >= threshold for key, threshold in gates.items())


def continues_after(min_reward: float | tuple[tuple[str, float], ...] | None, passed: bool,
                    rewards: dict[str, float] | None) -> bool:
    """Whether a natural rollout goes on to the next stage (docs/tasks.md, "rewards and the estimand").

    A passed stage always continues. A failed one continues only when the step declares `min_reward`
    and its rewards meet it (the author declared partial credit enough to go on); without a gate the
    rollout stops at the first failure, hrbench's rule (P_obs counts full chains only)."""
    if passed:
        return True
    return min_reward is not None and meets_min_reward(min_reward, rewards)


def trial_reward(strategy: Literal["mean", "final"] | None, stage_rewards: list[float | None]) -> float | None:
    """Harbor's trial-level reward of a multi-step task: `mean` (default) over stages with a result,
    `final` the last stage's. None: no stage has a result."""
    if not stage_rewards:
        return None
    if strategy == "final":
        return stage_rewards[-1]
    values = [r for r in stage_rewards if r is not None]
    return sum(values) / len(values) if values else None


# -- artifacts --------------------------------------------------------------------------------------

ARTIFACTS_LIMIT_BYTES = 4 << 20  # per stage: what a verification's artifacts may add to the output dir
ARTIFACTS_MANIFEST = "manifest.json"  # beside `files/`, so no sandbox path can overwrite it


class SavedArtifact(BaseModel):
    """One file (or skipped entry) of a stage's artifacts, as `save_artifacts` left it."""

    path: str  # in the sandbox, e.g. /logs/artifacts/run.log
    saved: str | None  # relative to the stage's artifacts folder (files/<sandbox path>); None when not saved
    bytes: int = 0
    status: Literal["saved", "over_limit", "symlink", "not_a_file", "excluded"]


def save_artifacts(found: list[tuple[str, Path]], dest: Path, limit_bytes: int = ARTIFACTS_LIMIT_BYTES,
                   exclude: tuple[tuple[str, tuple[str, ...]], ...] = ()) -> list[SavedArtifact]:
    """Copy a stage's artifacts (sandbox path, host path) into `dest/files/<sandbox path>`, at most
    `limit_bytes` in all, and write `dest/manifest.json` listing every entry.

    Only regular files are copied, never through a symlink: a link is recorded, not followed (its
    target is the agent's choice and could name any host file), and fifos or devices are skipped (a
    copy would block or read a device). A file that would pass the limit is recorded as `over_limit`
    and the walk goes on, so small files after a large one are still kept. A path an artifact's
    `exclude` matches (`excluded`) is listed, never copied."""
    if not found:  # nothing to list: no folder (most stage-trials of a study have no artifacts)
        return []
    dest = Path(dest)
    entries: list[SavedArtifact] = []
    used = 0

    def visit(sandbox: str, host: Path, rel: str) -> None:
        nonlocal used
        if excluded(sandbox, exclude):
            entries.append(SavedArtifact(path=sandbox, saved=None, status="excluded"))
        elif host.is_symlink():
            entries.append(SavedArtifact(path=sandbox, saved=None, status="symlink"))
        elif host.is_dir():
            for child in sorted(os.listdir(host)):
                visit(f"{sandbox.rstrip('/')}/{child}", host / child, f"{rel}/{child}")
        elif not host.is_file():
            entries.append(SavedArtifact(path=sandbox, saved=None, status="not_a_file"))
        else:
            size = host.stat().st_size
            if used + size > limit_bytes:
                entries.append(SavedArtifact(path=sandbox, saved=None, bytes=size, status="over_limit"))
                return
            target = dest / rel
            target.parent.mkdir(parents=True, exist_ok=True)
            # no-follow even here, where no agent process is left to swap the file for a link
            with os.fdopen(os.open(host, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK), "rb") as src, \
                    open(target, "wb") as out:
                copied = _copy_at_most(src, out, limit_bytes - used)
            used += copied
            entries.append(SavedArtifact(path=sandbox, saved=rel, bytes=copied, status="saved"))

    for sandbox, host in found:
        visit(sandbox, Path(host), "files/" + sandbox.strip("/"))
    dest.mkdir(parents=True, exist_ok=True)
    (dest / ARTIFACTS_MANIFEST).write_text(json.dumps([e.model_dump() for e in entries], indent=1))
    return entries


def _copy_at_most(src: Any, out: Any, budget: int) -> int:
    """Copy at most `budget` bytes (a file the agent is still growing cannot pass the limit)."""
    copied = 0
    while copied < budget:
        chunk = src.read(min(1 << 16, budget - copied))
        if not chunk:
            break
        out.write(chunk)
        copied += len(chunk)
    return copied


def artifact_index(folder: Path, relative_to: Path) -> dict[str, list[dict[str, Any]]]:
    """{stage: manifest entries} of a trial's artifacts folder, each `saved` path made relative to
    `relative_to` (the study output dir), for the trial row and the trajectory."""
    folder, base = Path(folder), Path(relative_to)
    index: dict[str, list[dict[str, Any]]] = {}
    for manifest in sorted(folder.glob(f"*/{ARTIFACTS_MANIFEST}")):
        stage_dir = manifest.parent
        entries = json.loads(manifest.read_text())
        for entry in entries:
            if entry["saved"] is not None:
                entry["saved"] = _relative(stage_dir / entry["saved"], base)
        index[stage_dir.name] = entries
    return index


def _relative(path: Path, base: Path) -> str:
    try:
        return str(path.relative_to(base))
    except ValueError:
        return str(path)
