"""Harbor job folders as trial rows: what `harbor run` left, read with Harbor's semantics.

A job folder holds `config.json` (the JobConfig), `result.json` (the JobResult) and one folder per
trial with its `result.json` (Harbor's TrialResult: `task_name`, `task_checksum`, `agent_info`,
`agent_result`, `verifier_result`, `exception_info`, timings, and for a multi-step task
`step_results`, one per step that ran) and its ATIF trajectories (`agent/trajectory.json`, or
`steps/<name>/agent/trajectory.json`). docs/harbor-import.md describes the mapping.

Reading is in two parts, so the seed's order holds: `trial_identities` reads only who ran what (task,
checksum, agent, model, time) and is used when the import is checked and sealed; `trial_record`
reads the outcomes, and the runner calls it only where a run would execute the trial (after
`expected_success` for natural rollouts).
"""

from __future__ import annotations

import hashlib
import json
import math
import shutil
from datetime import datetime
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict

from hrbench.protocol import StudyError
from hrbench.harness.records import ExitReason, StageOutcome, TrialRecord, TrialSpec
from hrbench.tasks.harbor import RewardError, continues_after, meets_min_reward, primary_reward, trial_reward
from hrbench.tasks.model import Task

# Harbor's task checksum: SHA-256 over sorted `relative_path NUL file_sha256 LF` records of these files and
# folders, the record format of Harbor's package publisher (as NVIDIA NeMo Gym's harbor digest documents it)
_CHECKSUM_FILES = ("task.toml", "instruction.md", "README.md", "trajectory.json")
_CHECKSUM_DIRS = ("environment", "tests", "solution", "steps")
_CHECKSUM_IGNORED = ("__pycache__", ".DS_Store")
_CHECKSUM_IGNORED_SUFFIXES = (".pyc", ".swp", ".swo", "~")


class HarborImportError(StudyError):
    """A job folder that cannot be imported into this study: says which file and what to do."""


def harbor_checksum(folder: Path) -> str:
    """The checksum Harbor records as a trial's `task_checksum` for the task package in `folder`."""
    root = Path(folder)
    files = [root / name for name in _CHECKSUM_FILES if (root / name).is_file()]
    for name in _CHECKSUM_DIRS:
        if (root / name).is_dir():
            files += [p for p in (root / name).rglob("*") if p.is_file()]
    records = []
    for path in files:
        rel = path.relative_to(root).as_posix()
        if any(part in _CHECKSUM_IGNORED for part in rel.split("/")) or rel.endswith(_CHECKSUM_IGNORED_SUFFIXES):
            continue
        records.append(f"{rel}\0{hashlib.sha256(path.read_bytes()).hexdigest()}\n")
    return hashlib.sha256("".join(sorted(records)).encode()).hexdigest()


class _Open(BaseModel):
    model_config = ConfigDict(extra="allow")


class Timing(_Open):
    started_at: datetime | None = None
    finished_at: datetime | None = None

    @property
    def seconds(self) -> float:
        if self.started_at is None or self.finished_at is None:
            return 0.0
        return max(0.0, (self.finished_at - self.started_at).total_seconds())


class ExceptionInfo(_Open):
    exception_type: str = "Exception"
    exception_message: str = ""
    occurred_at: datetime | None = None


class AgentResult(_Open):
    n_input_tokens: int | None = None
    n_cache_tokens: int | None = None
    n_output_tokens: int | None = None
    cost_usd: float | None = None


class VerifierResult(_Open):
    rewards: dict[str, Any] | None = None


class ModelInfo(_Open):
    name: str | None = None
    provider: str | None = None


class AgentInfo(_Open):
    name: str
    version: str | None = None
    model_info: ModelInfo | None = None


class StepResult(_Open):
    """One step of a multi-step trial (Harbor writes one per step that ran; none after an early stop)."""

    step_name: str | None = None
    name: str | None = None
    agent_result: AgentResult | None = None
    verifier_result: VerifierResult | None = None
    exception_info: ExceptionInfo | None = None
    started_at: datetime | None = None
    finished_at: datetime | None = None
    agent_execution: Timing | None = None
    verifier: Timing | None = None

    @property
    def step(self) -> str | None:
        return self.step_name or self.name


class _IdentityFields(BaseModel):
    """The identity of a trial's result.json; every outcome field is left unread (extra keys ignored)."""

    model_config = ConfigDict(extra="ignore")
    task_name: str
    trial_name: str
    task_checksum: str
    agent_info: AgentInfo
    started_at: datetime | None = None
    finished_at: datetime | None = None

    @property
    def agent_label(self) -> str:
        """`agent@model` (or `agent` without a model): what an import maps to a study agent."""
        model = self.agent_info.model_info.name if self.agent_info.model_info else None
        if model and self.agent_info.model_info and self.agent_info.model_info.provider \
                and "/" not in model:
            model = f"{self.agent_info.model_info.provider}/{model}"
        return f"{self.agent_info.name}@{model}" if model else self.agent_info.name


class HarborTrialResult(StepResult):
    """A trial's result.json (Harbor's TrialResult); the step fields hold a single-step trial's outcome."""

    task_name: str
    trial_name: str
    task_checksum: str
    agent_info: AgentInfo
    step_results: list[StepResult] | None = None


class TrialIdentity(BaseModel):
    """Who ran what, read without the outcome (the import is checked and sealed from these)."""

    job: str  # the job folder's name
    folder: Path  # the trial's folder
    trial_name: str
    task_name: str
    task_checksum: str
    agent: str  # agent@model
    started_at: str | None
    finished_at: str | None


def trial_folders(job_dir: Path) -> list[Path]:
    """The trial folders of one job (each with a result.json), refusing a folder that is not a job."""
    job = Path(job_dir)
    if not (job / "config.json").is_file() or not (job / "result.json").is_file():
        raise HarborImportError(f"{job}: not a Harbor job folder (a job has config.json and result.json at its top; "
                           "give the folder `harbor run` wrote under jobs/)")
    return sorted(p for p in job.iterdir() if p.is_dir() and (p / "result.json").is_file())


def read_result(folder: Path) -> HarborTrialResult:
    """A trial's whole result, outcomes included (only where a run would execute the trial)."""
    return _read(folder, HarborTrialResult)


def read_identity(folder: Path) -> _IdentityFields:
    """A trial's identity; its outcome is not read."""
    return _read(folder, _IdentityFields)


def _read(folder: Path, model: type[BaseModel]) -> Any:
    path = Path(folder) / "result.json"
    try:
        return model.model_validate_json(path.read_bytes())
    except ValueError as exc:
        raise HarborImportError(f"{path}: not a Harbor trial result ({str(exc).splitlines()[0]})") from exc


def trial_identities(job_dirs: list[Path]) -> list[TrialIdentity]:
    """Every trial of the jobs, identity only. A trial Harbor retried (the same trial name twice) is the
    attempt that finished last: Harbor's own job result counts that one."""
    latest: dict[tuple[str, str], TrialIdentity] = {}
    for job in job_dirs:
        for folder in trial_folders(job):
            result = read_identity(folder)
            ident = TrialIdentity(
                job=Path(job).name, folder=folder, trial_name=result.trial_name, task_name=result.task_name,
                task_checksum=result.task_checksum, agent=result.agent_label,
                started_at=_iso(result.started_at), finished_at=_iso(result.finished_at))
            key = (ident.job, ident.trial_name)
            if key not in latest or (ident.finished_at or "") > (latest[key].finished_at or ""):
                latest[key] = ident
    return sorted(latest.values(), key=lambda i: (i.started_at or "", i.job, i.trial_name))


def _iso(value: datetime | None) -> str | None:
    return value.isoformat() if value is not None else None


def sealed_files(job_dirs: list[Path]) -> dict[str, str]:
    """{job/relative path: sha256} of every file of the jobs: what the pre-registration seals."""
    out: dict[str, str] = {}
    for job in job_dirs:
        job = Path(job)
        for path in sorted(p for p in job.rglob("*") if p.is_file()):
            out[f"{job.name}/{path.relative_to(job).as_posix()}"] = hashlib.sha256(path.read_bytes()).hexdigest()
    return out


# -- outcomes ---------------------------------------------------------------------------------------

def _exit_of(error: ExceptionInfo | None) -> tuple[ExitReason, str] | None:
    """Harbor's exception_info as an exit reason: an agent timeout is the agent's failure; anything else
    (environment, setup, a crash) left no result: `harness_error`, a missing trial, never a failure."""
    if error is None:
        return None
    text = f"{error.exception_type}: {error.exception_message}".strip()
    if error.exception_type in ("AgentTimeoutError", "TimeoutError"):
        return "timeout", text
    if error.exception_type in ("VerifierTimeoutError", "RewardFileNotFoundError", "RewardFileEmptyError",
                                "VerifierOutputParseError"):
        return "verifier_error", text
    return "harness_error", text


def _stage_outcome(stage_name: str, step: StepResult, min_reward: Any) -> StageOutcome:
    rewards: dict[str, float] = {}
    error: str | None = None
    reason: ExitReason
    raw = step.verifier_result.rewards if step.verifier_result is not None else None
    failure = _exit_of(step.exception_info)
    try:
        if raw is None:
            raise RewardError("no verifier result")
        rewards = {str(k): float(v) for k, v in raw.items() if isinstance(v, (int, float)) and not isinstance(v, bool)}
        reward = min(1.0, max(0.0, primary_reward(rewards)))
        if not math.isfinite(reward):
            raise RewardError("reward is not a finite number")
    except RewardError as exc:
        reward, error = 0.0, str(exc)
    passed = error is None and failure is None and reward >= 1.0 - 1e-9
    if failure is not None and not passed:
        reason, error = failure[0], failure[1]
    elif error is not None:
        reason = "verifier_error"
    else:
        reason = "passed" if passed else "failed"
    agent = step.agent_result or AgentResult()
    return StageOutcome(
        stage=stage_name, passed=passed, reward=reward, turns=0,
        wall_s=Timing(started_at=step.started_at, finished_at=step.finished_at).seconds,
        agent_s=step.agent_execution.seconds if step.agent_execution else 0.0,
        verifier_s=step.verifier.seconds if step.verifier else 0.0,
        exit_reason=reason, error=error, tokens_in=agent.n_input_tokens or 0, tokens_out=agent.n_output_tokens or 0,
        rewards=rewards, met_min_reward=meets_min_reward(min_reward, rewards or None) if min_reward is not None
        else None,
    )


def trial_record(spec: TrialSpec, task: Task, folder: Path, trajectory_root: Path | None = None,
                 out_dir: Path | None = None) -> TrialRecord:
    """The trial row a run would write for this Harbor trial (natural: the whole task; checkpoint: the
    exported task of `spec.stage`). Steps after an early stop (`min_reward`) have no step result: they
    were not reached, and are neither failed nor dropped (the rollout stopped there, as hrbench's own
    rollouts stop). An errored trial is `harness_error`: missing, never a failure."""
    result = read_result(folder)
    stages = [task.stage(spec.stage)] if spec.kind == "checkpoint" and spec.stage else list(task.stages)
    steps = result.step_results if result.step_results is not None else [result]
    outcomes: list[StageOutcome] = []
    for stage, step in zip(stages, steps):
        if step.step is not None and spec.kind == "natural" and step.step != stage.name:
            raise HarborImportError(f"{folder / 'result.json'}: step {len(outcomes) + 1} is {step.step!r}, but the "
                                    f"study's task {task.name!r} has {stage.name!r} there")
        outcomes.append(_stage_outcome(stage.name, step, stage.min_reward))
        # Harbor runs every step unless min_reward gates; hrbench's rollout stops where continues_after says
        # (a later step cannot change P_obs): the row keeps the stages a native rollout would have run
        if spec.kind == "natural" and not continues_after(stage.min_reward, outcomes[-1].passed,
                                                          outcomes[-1].rewards or None):
            break
    trial_error = _exit_of(result.exception_info) if result.step_results is not None else None
    passed_prefix = 0
    for outcome in outcomes:
        if not outcome.passed:
            break
        passed_prefix += 1
    first_failed = next((o for o in outcomes if not o.passed), None)
    complete = passed_prefix == len(stages)
    if trial_error is not None and trial_error[0] == "harness_error" and not complete:
        reason, error = trial_error
    elif first_failed is not None:
        reason, error = first_failed.exit_reason, first_failed.error
    elif not complete:  # every step that ran passed, yet the trial stopped: Harbor left no result for the rest
        reason, error = "harness_error", trial_error[1] if trial_error else "Harbor recorded no result for " \
            f"step {stages[passed_prefix].name!r}"
    else:
        reason, error = "passed", None
    agent = result.agent_result or AgentResult()
    tokens_in = sum(o.tokens_in for o in outcomes) or (agent.n_input_tokens or 0)
    tokens_out = sum(o.tokens_out for o in outcomes) or (agent.n_output_tokens or 0)
    cost = sum((s.agent_result.cost_usd or 0.0) for s in steps if s.agent_result) if result.step_results \
        else (agent.cost_usd or 0.0)
    return TrialRecord(
        **spec.model_dump(), trial_key=spec.key, passed=reason == "passed", stages_passed=passed_prefix,
        stopped_stage=None if complete else stages[passed_prefix].name,
        turns=0, wall_s=Timing(started_at=result.started_at, finished_at=result.finished_at).seconds,
        agent_s=sum(o.agent_s for o in outcomes), verifier_s=sum(o.verifier_s for o in outcomes),
        exit_reason=reason, tokens_in=tokens_in, tokens_out=tokens_out, cost_usd=cost,
        stage_outcomes_json=json.dumps([o.model_dump() for o in outcomes]), error=error,
        exit_detail=f"imported from Harbor trial {result.trial_name}",
        trajectory_path=_copy_trajectories(folder, trajectory_root, out_dir, spec),
        rewards_json=json.dumps({o.stage: o.rewards for o in outcomes if o.rewards}),
        harbor_reward=trial_reward(task.reward_strategy, [o.reward if o.exit_reason != "verifier_error" else None
                                                          for o in outcomes]),
        recorded_at=_iso(result.finished_at),
    )


def _copy_trajectories(folder: Path, root: Path | None, out_dir: Path | None, spec: TrialSpec) -> str | None:
    """Copy the trial's ATIF trajectories beside the study's own; the row names the first (the others, one
    per step, lie beside it as <step>.trajectory.json)."""
    found = sorted(Path(folder).glob("steps/*/agent/trajectory.json"))
    single = Path(folder) / "agent" / "trajectory.json"
    if single.is_file():
        found = [single]
    if root is None or out_dir is None or not found:
        return None
    dest = Path(root) / "harbor" / spec.key.replace("/", "__")
    dest.mkdir(parents=True, exist_ok=True)
    paths = []
    for path in found:
        name = path.parent.parent.name if path != single else "trial"
        target = dest / f"{name}.trajectory.json"
        shutil.copyfile(path, target)
        paths.append(target)
    return str(paths[0].relative_to(out_dir))
