"""The study file: a pre-registered protocol, validated before anything runs.

Every field here is documented in docs/study.md; the canonical JSON of a
validated `Study` (plus the content hash of every task) is what
`preregistration` freezes.
"""

from __future__ import annotations

import hashlib
import json
import math
from enum import Enum
from pathlib import Path
from typing import Annotated, Literal, Union

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from hrbench.config_files import describe_validation_error, read_yaml_mapping

from hrbench.agents.config import CommandAgentSpec, LLMAgentSpec

BUILTIN_REGISTRY = Path(__file__).resolve().parent.parent / "task_registry"


class StudyError(ValueError):
    """A study file that cannot be used, with the file and field that are wrong."""


class Frozen(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class HistoryPolicy(str, Enum):
    """What the agent sees at a stage boundary (applied by the harness, not the agent)."""

    full = "full"
    reset = "reset"
    compact = "compact"
    matched = "matched"


class StatePolicy(str, Enum):
    """What the environment holds at a stage boundary."""

    own = "own"
    repair = "repair"


class Budget(Frozen):
    """Per-stage limits, stated to the agent where they are turn caps."""

    max_turns: int | None = Field(20, ge=1, description="turn cap per stage; None = uncapped")
    timeout_sec: float = Field(120.0, gt=0, description="wall-time limit per stage")
    command_timeout_sec: float = Field(60.0, gt=0, le=60.0, description="wait per command")
    memory_mb: int = Field(1024, ge=64, description="address-space limit inside the sandbox")
    task_max_turns: int | None = Field(
        None, ge=1, description="turn cap for the whole rollout, all parts together (depth paper App. B); stated"
    )
    task_timeout_sec: float | None = Field(None, gt=0, description="wall-time limit per rollout (trial)")
    max_tokens: int | None = Field(None, ge=1, description="model tokens (in + out) per stage")
    task_max_tokens: int | None = Field(None, ge=1, description="model tokens (in + out) per rollout (trial)")


class CheckpointProtocol(Frozen):
    """How a stage is started in checkpoint trials (DESIGN §6)."""

    state: Literal["oracle_replay", "solution_conditioned"] = "oracle_replay"
    history: Literal["fresh", "matched", "compacted"] = "fresh"
    information: Literal["stage_given", "goal_only"] = "stage_given"
    budget: Budget = Budget()

    @model_validator(mode="after")
    def _supported(self) -> "CheckpointProtocol":
        # Declared in DESIGN §6 but not built yet: refuse rather than silently run something else.
        if self.state != "oracle_replay":
            raise ValueError("checkpoint.state 'solution_conditioned' is not supported yet; use 'oracle_replay'")
        if self.information != "stage_given":
            raise ValueError("checkpoint.information 'goal_only' is not supported yet; use 'stage_given'")
        return self

    def protocol_hash(self) -> str:
        """Short hash keying checkpoint trials: conditions sharing it share trials."""
        return sha256_json(self.model_dump(mode="json"))[:12]


class Condition(Frozen):
    """An intervention: its natural-rollout policies and its matched checkpoint protocol."""

    name: str
    history: HistoryPolicy
    state: StatePolicy
    checkpoint_history: Literal["fresh", "matched", "compacted"] | None = None  # None = as declared


# DESIGN §6 table: each condition has its own P_expected(I) and P_observed(I).
CONDITIONS: dict[str, Condition] = {
    "baseline": Condition(name="baseline", history=HistoryPolicy.full, state=StatePolicy.own),
    "context_reset": Condition(
        name="context_reset", history=HistoryPolicy.reset, state=StatePolicy.own, checkpoint_history="fresh"
    ),
    "state_repair": Condition(name="state_repair", history=HistoryPolicy.full, state=StatePolicy.repair),
    "compaction": Condition(
        name="compaction", history=HistoryPolicy.compact, state=StatePolicy.own, checkpoint_history="compacted"
    ),
}


AGENT_ID = Field(pattern=r"^[a-z0-9][a-z0-9_.-]*$", description="partition key of the agent: lower case, digits, . _ -")


class SimParams(Frozen):
    """Declared behaviour of a simulated agent (DESIGN §5); its truth is computable."""

    skill: float = Field(0.9, gt=0, le=1, description="base per-stage success probability")
    skill_spread: float = Field(
        0.0, ge=0, lt=1, description="per-task skill lowered by spread*u_task, u_task in [0,1) from the task name"
    )
    context_rot: float = Field(0.0, ge=0, description="lambda: success x exp(-lambda*h), h = visible stage boundaries")
    defect_rate: float = Field(0.0, ge=0, le=1, description="chance a passed stage leaves a latent defect")
    defect_penalty: float = Field(0.0, ge=0, description="kappa: success x exp(-kappa*defects present)")
    compaction_retention: float = Field(
        0.3, ge=0, le=1, description="share of earlier boundaries still felt after compaction"
    )


class OracleAgentSpec(Frozen):
    id: str = AGENT_ID
    kind: Literal["oracle"]


class NopAgentSpec(Frozen):
    id: str = AGENT_ID
    kind: Literal["nop"]


class SimAgentSpec(Frozen):
    id: str = AGENT_ID
    kind: Literal["sim"]
    sim: SimParams = SimParams()


AgentSpec = Annotated[
    Union[OracleAgentSpec, NopAgentSpec, SimAgentSpec, LLMAgentSpec, CommandAgentSpec], Field(discriminator="kind")
]


class TaskSelection(Frozen):
    """Which task packages the study uses."""

    registry: str = Field("builtin", description="'builtin' or a directory of task packages")
    include: list[str] | None = Field(None, description="task names; None = every task in the registry")
    weights: dict[str, float] = Field(default_factory=dict, description="task weights; default 1")

    @field_validator("weights")
    @classmethod
    def _positive_weights(cls, value: dict[str, float]) -> dict[str, float]:
        bad = {k: w for k, w in value.items() if not math.isfinite(w) or w <= 0}
        if bad:
            raise ValueError(f"task weights must be positive numbers; got {bad}")
        return value

    @model_validator(mode="after")
    def _weights_name_included_tasks(self) -> "TaskSelection":
        if self.include is not None:
            unknown = sorted(set(self.weights) - set(self.include))
            if unknown:
                raise ValueError(f"weights name task(s) {unknown} that tasks.include does not list; "
                                 f"included: {self.include}")
        return self

    def check_weights(self, task_names: list[str], where: Path) -> None:
        """Refuse weights naming a task the registry does not hold (they would be silently ignored)."""
        unknown = sorted(set(self.weights) - set(task_names))
        if unknown:
            raise StudyError(f"{where}: tasks.weights names task(s) {unknown} not in the registry; "
                             f"available: {sorted(task_names)}")

    def registry_path(self, base: Path) -> Path:
        if self.registry == "builtin":
            return BUILTIN_REGISTRY
        path = Path(self.registry)
        return path if path.is_absolute() else (base / path).resolve()


# Upper limits on declared counts: far above any useful study (a ±0.05 interval on a rate needs ~400
# trials), low enough that a typo (`1.0e11`) is refused instead of building specs until memory runs out.
MAX_TRIALS = 10_000
MAX_BOOTSTRAP = 100_000


class Trials(Frozen):
    checkpoint: int = Field(20, ge=1, le=MAX_TRIALS, description="m_i: checkpoint trials per stage")
    natural: int = Field(40, ge=1, le=MAX_TRIALS, description="m_0: natural end-to-end rollouts per task")


class BootstrapSettings(Frozen):
    n_boot: int = Field(2000, ge=100, le=MAX_BOOTSTRAP)
    seed: int = 0
    level: float = Field(0.95, gt=0.5, lt=1)


class QuadrantThresholds(Frozen):
    high: float = Field(0.5, gt=0, lt=1, description="a rate at or above this is 'high'")
    low: float = Field(0.2, gt=0, lt=1, description="a rate at or below this is 'low'")

    @model_validator(mode="after")
    def _ordered(self) -> "QuadrantThresholds":
        if self.low >= self.high:
            raise ValueError("quadrant.low must be below quadrant.high")
        return self


class Study(Frozen):
    """A pre-registered study: everything declared before any trial runs."""

    name: str = Field(pattern=r"^[a-z0-9][a-z0-9_-]*$")
    version: int = 1
    description: str = ""
    tasks: TaskSelection = TaskSelection()
    agents: list[AgentSpec] = Field(min_length=1)
    conditions: list[str] = Field(default_factory=lambda: ["baseline"])
    checkpoint: CheckpointProtocol = CheckpointProtocol()
    baseline_model: Literal["product"] = "product"
    trials: Trials = Trials()
    zero_rule: Literal["jeffreys", "haldane", "bound", "exclude"] = "jeffreys"
    bootstrap: BootstrapSettings = BootstrapSettings()
    quadrant: QuadrantThresholds = QuadrantThresholds()
    seed: int = Field(0, description="seeds every agent's randomness (with the trial key)")
    concurrency: int = Field(
        4, ge=1, le=64, description="trials run at once inside one partition (they mostly wait on sandboxes)"
    )

    @field_validator("conditions")
    @classmethod
    def _known_conditions(cls, value: list[str]) -> list[str]:
        unknown = [c for c in value if c not in CONDITIONS]
        if unknown:
            raise ValueError(f"unknown condition(s) {unknown}; choose from {sorted(CONDITIONS)}")
        if "baseline" not in value:
            raise ValueError("conditions must include 'baseline'")
        return value

    @model_validator(mode="after")
    def _runnable(self) -> "Study":
        if any(self.checkpoint_protocol(c).history == "matched" for c in self.conditions):
            # Matched prefixes come from recorded natural rollouts, but the asset graph fixes
            # P_expected before any natural rollout exists: the two orders cannot both hold.
            raise ValueError("checkpoint.history 'matched' is not supported in studies yet (it needs natural "
                             "rollouts before the checkpoint trials); use 'fresh' or 'compacted'")
        looks = [a.id for a in self.agents if isinstance(a, SimAgentSpec) and a.sim.defect_penalty > 0]
        cap = self.checkpoint.budget.max_turns
        if looks and cap is not None and cap < 2:
            raise ValueError(f"sim agents {looks} look at their workspace before acting (2 turns per stage); "
                             "checkpoint.budget.max_turns must be at least 2 for their truth to hold")
        return self

    @model_validator(mode="after")
    def _unique_agents(self) -> "Study":
        ids = [a.id for a in self.agents]
        dupes = sorted({i for i in ids if ids.count(i) > 1})
        if dupes:
            raise ValueError(f"agent ids must be unique; repeated: {dupes}")
        return self

    def agent(self, agent_id: str) -> AgentSpec:
        for spec in self.agents:
            if spec.id == agent_id:
                return spec
        raise KeyError(f"study {self.name!r} declares no agent {agent_id!r}")

    def condition(self, name: str) -> Condition:
        return CONDITIONS[name]

    def checkpoint_protocol(self, condition: str) -> CheckpointProtocol:
        """The matched checkpoint protocol of a condition (DESIGN §6 table)."""
        override = CONDITIONS[condition].checkpoint_history
        if override is None:
            return self.checkpoint
        return self.checkpoint.model_copy(update={"history": override})


class LoadedStudy(BaseModel):
    """A validated study and the directory its relative paths resolve against."""

    model_config = ConfigDict(arbitrary_types_allowed=True, frozen=True)
    study: Study
    source: Path

    @property
    def registry(self) -> Path:
        return self.study.tasks.registry_path(self.source.parent)


def sha256_json(value: object) -> str:
    """SHA-256 of canonical JSON (sorted keys, no whitespace)."""
    return hashlib.sha256(canonical_json(value).encode()).hexdigest()


def canonical_json(value: object) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def load_study(path: str | Path) -> LoadedStudy:
    """Read and validate a study YAML file; errors name the file and field."""
    path = Path(path).resolve()
    raw = read_yaml_mapping(path, StudyError, "study file")
    if isinstance(raw.get("agents"), list):
        raw["agents"] = [_expand_agent_config(entry, path) for entry in raw["agents"]]
    try:
        study = Study.model_validate(raw)
    except ValidationError as exc:
        raise StudyError(f"{path}: invalid study file\n{describe_validation_error(exc)}\nSee docs/study.md.") from exc
    loaded = LoadedStudy(study=study, source=path)
    if study.tasks.weights and study.tasks.include is None:  # with include, the model checked the names
        from hrbench.tasks.loader import load_registry  # only then is the registry read twice

        study.tasks.check_weights([t.name for t in load_registry(loaded.registry)], path)
    return loaded


def _expand_agent_config(entry: object, study_path: Path) -> object:
    """`{config: agents/x.yaml, ...overrides}` -> the file's mapping with the overrides applied.

    The file's content is inlined before freezing, so the pre-registration hash covers it.
    """
    if not isinstance(entry, dict) or "config" not in entry:
        return entry
    overrides = {k: v for k, v in entry.items() if k != "config"}
    config = Path(str(entry["config"]))
    config = config if config.is_absolute() else study_path.parent / config
    return {**read_yaml_mapping(config, StudyError, f"agent config file (from {study_path.name})"), **overrides}


DEMO_STUDY = Path(__file__).resolve().parent / "studies" / "demo.yaml"
