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
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from hrbench.config_files import describe_validation_error, read_yaml_mapping

from hrbench.agents.specs import AgentSpec, SimAgentSpec
from hrbench.exits import NO_RESULT_REASONS
from hrbench.stats.baselines import BaselineKind
from hrbench.stats.claims import ErrorRate
from hrbench.stats.data import ZeroRule
from hrbench.stats.residuals import QuadrantThresholds
from hrbench.structure.settings import DepthSettings

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


BudgetRule = Literal["equal_per_stage", "aggregate_matched"]


class CheckpointProtocol(Frozen):
    """How a stage is started in checkpoint trials (DESIGN §6)."""

    state: Literal["oracle_replay", "solution_conditioned"] = "oracle_replay"
    history: Literal["fresh", "matched", "compacted"] = "fresh"
    information: Literal["stage_given", "goal_only"] = "stage_given"
    budget: Budget = Budget()
    budget_rule: BudgetRule = Field(
        "equal_per_stage", description="equal_per_stage: every checkpoint trial gets `budget` as declared; "
        "aggregate_matched: the trial-wide caps are split over the task's stages (`stage_budget`)")

    @model_validator(mode="after")
    def _aggregate_has_something_to_split(self) -> "CheckpointProtocol":
        b = self.budget
        if self.budget_rule == "aggregate_matched" and (b.task_max_turns, b.task_timeout_sec, b.task_max_tokens) \
                == (None, None, None):
            raise ValueError("budget_rule 'aggregate_matched' splits the natural rollout's trial-wide caps over its "
                             "stages; declare checkpoint.budget.task_max_turns, task_timeout_sec or task_max_tokens "
                             "(without them the split is the per-stage budget, i.e. 'equal_per_stage')")
        return self

    def stage_budget(self, n_stages: int, indices: list[int]) -> Budget:
        """The budget of a checkpoint trial of these stages (one, or a merged segment) of an n-stage task.

        `aggregate_matched`: each trial-wide cap of the natural rollout (task_max_turns, task_timeout_sec,
        task_max_tokens) is split evenly over the k stages — turns and tokens in whole units, the
        remainder to the earliest stages — so the k stage budgets sum to exactly the natural rollout's;
        a merged segment gets the sum of its stages' shares; per-stage caps stay as declared (they bind
        the natural rollout's stages too). A share of 0 turns or tokens fails that stage unstarted, as
        a natural rollout whose trial-wide cap is spent does."""
        b = self.budget
        if self.budget_rule == "equal_per_stage":
            return b

        def share(total: int) -> int:
            return sum(total // n_stages + (1 if i < total % n_stages else 0) for i in indices)

        # model_copy, not validation: a share may be 0 (the Budget fields' ge=1 is for declared caps)
        return b.model_copy(update={
            "task_max_turns": None if b.task_max_turns is None else share(b.task_max_turns),
            "task_max_tokens": None if b.task_max_tokens is None else share(b.task_max_tokens),
            "task_timeout_sec": None if b.task_timeout_sec is None else b.task_timeout_sec * len(indices) / n_stages,
        })

    def protocol_hash(self) -> str:
        """Short hash keying checkpoint trials: conditions sharing it share trials."""
        fields = self.model_dump(mode="json")
        if fields["budget_rule"] == "equal_per_stage":  # the rule before there was a choice: the same keys as then
            del fields["budget_rule"]
        return sha256_json(fields)[:12]


class CheckpointVariant(Frozen):
    """A checkpoint protocol stated as changes to the declared one (fields left out stay as declared)."""

    state: Literal["oracle_replay", "solution_conditioned"] | None = None
    history: Literal["fresh", "matched", "compacted"] | None = None
    information: Literal["stage_given", "goal_only"] | None = None
    budget_rule: BudgetRule | None = None

    def apply(self, declared: CheckpointProtocol) -> CheckpointProtocol:
        changes = {k: v for k, v in self.model_dump().items() if v is not None}
        return CheckpointProtocol.model_validate({**declared.model_dump(), **changes}) if changes else declared


class Condition(Frozen):
    """An intervention as a declared pair: its natural-rollout policy and its matched checkpoint protocol."""

    name: str = Field(pattern=r"^[a-z0-9][a-z0-9_]*$", description="names the condition's assets and rows")
    history: HistoryPolicy = Field(description="natural rollouts: what the agent sees at a stage boundary")
    state: StatePolicy = Field(description="natural rollouts: what the workspace holds at a stage boundary")
    checkpoint: CheckpointVariant = Field(
        CheckpointVariant(), description="its checkpoint protocol, as changes to the study's `checkpoint`")


# DESIGN §6 table: each condition has its own P_expected(I) and P_observed(I). The one place the
# built-in conditions are declared; a study may declare its own variants beside them.
CONDITIONS: dict[str, Condition] = {
    "baseline": Condition(name="baseline", history=HistoryPolicy.full, state=StatePolicy.own),
    "context_reset": Condition(name="context_reset", history=HistoryPolicy.reset, state=StatePolicy.own,
                               checkpoint=CheckpointVariant(history="fresh")),
    "state_repair": Condition(name="state_repair", history=HistoryPolicy.full, state=StatePolicy.repair,
                              checkpoint=CheckpointVariant(state="oracle_replay")),
    "compaction": Condition(name="compaction", history=HistoryPolicy.compact, state=StatePolicy.own,
                            checkpoint=CheckpointVariant(history="compacted")),
}

Decomposition = Literal["stages", "pairs"]


class Sensitivity(Frozen):
    """The admissible set of the sensitivity sweep, beside the declared choices (which are always in it)."""

    protocols: list[CheckpointVariant] = Field(
        default_factory=list, description="other admissible checkpoint protocols (each runs its own trials)")
    baseline_models: list[BaselineKind] = Field(default_factory=list)
    zero_rules: list[ZeroRule] = Field(default_factory=list)
    decompositions: list[Decomposition] = Field(
        default_factory=list,
        description="'pairs': adjacent stages merged, each pair one checkpoint trial from the pair's start "
                    "(runs its own trials); 'stages' (every stage its own checkpoint) is the declared one")


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


class Retries(Frozen):
    """What happens to an attempt without a result (hrbench.exits: harness_error, verifier_error).

    A transient attempt is retried inside the same run with the same trial key (so a seeded or sim
    agent replays the same draws), after `backoff_sec * 2**(n-1)` seconds before retry n; every
    attempt is kept (attempts journal, trajectory), none enters an estimate. A trial still without a
    result after `max_attempts` is missing: left out of q̂ and P̂_obs and retried by the next run. Up
    to `max_missing_share` of a cell's trials (a checkpoint unit's m_i, a task's m_0) may be missing
    and the analysis proceeds with m_used; beyond it the trials' data-quality check stops the study.
    """

    max_attempts: int = Field(3, ge=1, le=20, description="attempts of one trial in one run (1: no in-run retry)")
    backoff_sec: float = Field(2.0, ge=0, le=600, description="wait before the first retry; doubles per retry")
    transient: list[str] = Field(default_factory=lambda: sorted(NO_RESULT_REASONS),
                                 description="no-result exit reasons retried inside the run")
    max_missing_share: float = Field(0.05, ge=0, le=1, description="missing trials tolerated per cell")

    @field_validator("transient")
    @classmethod
    def _no_result_only(cls, value: list[str]) -> list[str]:
        wrong = sorted(set(value) - NO_RESULT_REASONS)
        if wrong:
            raise ValueError(f"{wrong}: only exit reasons without a result can be retried "
                             f"({', '.join(sorted(NO_RESULT_REASONS))}); the others are the agent's outcome")
        return sorted(set(value))

    def backoff(self, retry: int) -> float:
        """Seconds to wait before retry number `retry` (1 = the second attempt)."""
        return self.backoff_sec * 2 ** (retry - 1)

    def tolerated(self, planned: int) -> int:
        """How many of a cell's `planned` trials may be missing."""
        return math.floor(self.max_missing_share * planned + 1e-9)


class BootstrapSettings(Frozen):
    n_boot: int = Field(2000, ge=100, le=MAX_BOOTSTRAP)
    seed: int = 0
    level: float = Field(0.95, gt=0.5, lt=1)


class HarborImport(Frozen):
    """Trials `harbor run` already recorded, taken in place of running them (`hrbench import harbor`).

    Sealed by the pre-registration (every file's hash), checked against the study's tasks (name and
    Harbor checksum) before anything runs, and read only where the study would run those trials:
    natural rollouts after `expected_success`, checkpoint trials in their own step."""

    kind: Literal["natural", "checkpoint"] = Field(
        "natural", description="natural: multi-step trials of the study's tasks (baseline rollouts); checkpoint: "
        "trials of the tasks `hrbench export checkpoint-tasks` wrote")
    harbor_jobs: list[str] = Field(min_length=1, description="Harbor job folders, relative to the study file")
    agents: dict[str, str] = Field(
        min_length=1, description="Harbor `agent@provider/model` (or `agent`) -> the study agent its trials are")


class Claims(Frozen):
    """The confirmatory claims and the error rate controlled across them (docs/statistics.md §13).

    Per agent: each named residual row under every condition, and the overall ΔΓ of each named
    contrast. Every other interval the study prints is exploratory.
    """

    rows: list[str] = Field(default_factory=lambda: ["all"],
                            description="residual rows claimed per agent and condition: 'all' or family names")
    contrasts: list[str] | None = Field(
        None, description="conditions whose overall ΔΓ(I) is claimed; null = every condition but baseline")
    error_rate: ErrorRate = Field("holm", description="holm: family-wise (Holm); maxt: family-wise by a max-|t| "
                                  "simultaneous band; by: false discovery rate (Benjamini–Yekutieli)")
    alpha: float | None = Field(None, gt=0, lt=0.5, description="family-wise or FDR level; null = 1 − bootstrap.level")
    equivalence_margin: float | None = Field(
        None, gt=0, description="|Γ| (nats) below which an effect counts as none (TOST); null = never 'equivalent'")


class Study(Frozen):
    """A pre-registered study: everything declared before any trial runs."""

    name: str = Field(pattern=r"^[a-z0-9][a-z0-9_-]*$")
    version: int = 1
    description: str = ""
    tasks: TaskSelection = TaskSelection()
    agents: list[AgentSpec] = Field(min_length=1)
    conditions: list[Condition] = Field(
        default_factory=lambda: [CONDITIONS["baseline"]],
        description="built-in condition names, or {name, history, state, checkpoint} mappings for variants")
    checkpoint: CheckpointProtocol = CheckpointProtocol()
    baseline_model: BaselineKind = "product"
    sensitivity: Sensitivity = Sensitivity()
    trials: Trials = Trials()
    zero_rule: ZeroRule = "jeffreys"
    bootstrap: BootstrapSettings = BootstrapSettings()
    retries: Retries = Retries()
    quadrant: QuadrantThresholds = QuadrantThresholds()
    claims: Claims = Claims()
    seed: int = Field(0, description="seeds every agent's randomness (with the trial key)")
    concurrency: int = Field(
        4, ge=1, le=64, description="trials run at once in one step, over all its partitions (they share this bound)"
    )
    depth: DepthSettings | None = Field(None, description="measure depth D by turn caps (task_depth asset)")
    imports: list[HarborImport] = Field(
        default_factory=list, description="Harbor job folders whose trials stand for the study's (docs/harbor.md)")
    backend: str = Field(
        "local", description="where trials run: `local` (bubblewrap), `docker` (a Docker-API engine), `auto` "
        "(docker for the tasks local cannot run, local for the rest), or another registered backend's name")

    @field_validator("backend")
    @classmethod
    def _known_backend(cls, value: str) -> str:
        from hrbench.envs.registry import backend_choices  # the registry imports the backends: only when validating

        if value not in backend_choices():
            raise ValueError(f"unknown backend {value!r}; choose from {backend_choices()}")
        return value

    @field_validator("conditions", mode="before")
    @classmethod
    def _named_conditions(cls, value: object) -> object:
        if not isinstance(value, list):
            return value
        unknown = [c for c in value if isinstance(c, str) and c not in CONDITIONS]
        if unknown:
            raise ValueError(f"unknown condition(s) {unknown}; choose from {sorted(CONDITIONS)} or declare a "
                             "variant as {name, history, state, checkpoint}")
        return [CONDITIONS[c] if isinstance(c, str) else c for c in value]

    @field_validator("conditions")
    @classmethod
    def _known_conditions(cls, value: list[Condition]) -> list[Condition]:
        names = [c.name for c in value]
        if "baseline" not in names:
            raise ValueError("conditions must include 'baseline'")
        if len(set(names)) != len(names):
            raise ValueError(f"condition names must be unique; repeated: {sorted({n for n in names if names.count(n) > 1})}")
        return value

    @property
    def needs_prefix_rollouts(self) -> bool:
        """`matched` checkpoints take their transcripts, and `solution_conditioned` ones their workspace
        states, from rollouts of the agent run before the checkpoints (never the compared natural rollouts)."""
        return any(p.history == "matched" or p.state == "solution_conditioned"
                   for p in self.checkpoint_protocols().values())

    @property
    def needs_agent_states(self) -> bool:
        """Some checkpoint protocol starts from the agent's own passing states (the prefix rollouts save them)."""
        return any(p.state == "solution_conditioned" for p in self.checkpoint_protocols().values())

    @model_validator(mode="after")
    def _runnable(self) -> "Study":
        looks = [a.id for a in self.agents if isinstance(a, SimAgentSpec) and a.sim.defect_penalty > 0]
        cap = self.checkpoint.budget.max_turns
        if looks and cap is not None and cap < 2:
            raise ValueError(f"sim agents {looks} look at their workspace before acting (2 turns per stage); "
                             "checkpoint.budget.max_turns must be at least 2 for their truth to hold")
        return self

    @model_validator(mode="after")
    def _protocols_apply(self) -> "Study":
        try:  # a condition's or the sweep's variant of the declared protocol must itself be a valid protocol
            self.checkpoint_protocols()
        except ValidationError as exc:
            raise ValueError(f"a checkpoint variant (conditions or sensitivity.protocols) gives an invalid protocol: "
                             f"{describe_validation_error(exc)}") from None
        return self

    @model_validator(mode="after")
    def _depth_agents(self) -> "Study":
        unknown = sorted(set(self.depth.agents) - {a.id for a in self.agents}) if self.depth else []
        if unknown:
            raise ValueError(f"depth.agents {unknown}: not among the study's agents {[a.id for a in self.agents]}")
        return self

    @model_validator(mode="after")
    def _imported_agents(self) -> "Study":
        ids = {a.id for a in self.agents}
        seen: set[tuple[str, str]] = set()
        for entry in self.imports:
            unknown = sorted(set(entry.agents.values()) - ids)
            if unknown:
                raise ValueError(f"imports: agents {unknown} are not among the study's agents {sorted(ids)}")
            for agent in entry.agents.values():
                if (agent, entry.kind) in seen:
                    raise ValueError(f"imports: agent {agent!r} has its {entry.kind} trials imported twice; list "
                                     "every job folder under one entry")
                seen.add((agent, entry.kind))
        return self

    def imported(self, agent: str, kind: str) -> HarborImport | None:
        """The import that holds this agent's trials of `kind`, if any."""
        return next((e for e in self.imports if e.kind == kind and agent in e.agents.values()), None)

    @model_validator(mode="after")
    def _claimed_contrasts(self) -> "Study":
        unknown = sorted(set(self.claims.contrasts or []) - (set(self.condition_names) - {"baseline"}))
        if unknown:
            raise ValueError(f"claims.contrasts {unknown}: not among the study's non-baseline conditions "
                             f"{[c for c in self.condition_names if c != 'baseline']}")
        return self

    @property
    def claimed_contrasts(self) -> list[str]:
        """Conditions whose overall ΔΓ(I) is a confirmatory claim."""
        declared = self.claims.contrasts
        return [c for c in self.condition_names if c != "baseline"] if declared is None else list(declared)

    @property
    def n_claims(self) -> int:
        """k: the confirmatory claims of the whole study (every agent), over which the error rate is controlled."""
        per_agent = len(self.condition_names) * len(self.claims.rows) + len(self.claimed_contrasts)
        return len(self.agents) * per_agent

    @property
    def claims_alpha(self) -> float:
        """α of the claims: the declared one, else the complement of the study's interval level."""
        return self.claims.alpha if self.claims.alpha is not None else 1 - self.bootstrap.level

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

    @property
    def condition_names(self) -> list[str]:
        return [c.name for c in self.conditions]

    def condition(self, name: str) -> Condition:
        for c in self.conditions:
            if c.name == name:
                return c
        raise KeyError(f"study {self.name!r} declares no condition {name!r}")

    def checkpoint_protocol(self, condition: str) -> CheckpointProtocol:
        """The matched checkpoint protocol of a condition (DESIGN §6 table)."""
        return self.condition(condition).checkpoint.apply(self.checkpoint)

    def admissible_protocols(self) -> list[CheckpointProtocol]:
        """The sweep's checkpoint protocols: the baseline's, then the admissible variants of it (distinct)."""
        found: dict[str, CheckpointProtocol] = {}
        base = self.checkpoint_protocol("baseline")
        for p in [base] + [v.apply(base) for v in self.sensitivity.protocols]:
            found.setdefault(p.protocol_hash(), p)
        return list(found.values())

    def checkpoint_protocols(self) -> dict[str, CheckpointProtocol]:
        """Every distinct checkpoint protocol whose trials the study runs, by hash (conditions, then sweep)."""
        found: dict[str, CheckpointProtocol] = {}
        for p in [self.checkpoint_protocol(c) for c in self.condition_names] + self.admissible_protocols():
            found.setdefault(p.protocol_hash(), p)
        return found

    def decompositions(self) -> list[Decomposition]:
        """The sweep's decompositions: every stage its own checkpoint (declared), then the admissible others."""
        return list(dict.fromkeys(["stages", *self.sensitivity.decompositions]))


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
# The four conditions and three sim agents (issue 9 acceptance); an example, not packaged.
INTERVENTIONS_STUDY = Path(__file__).resolve().parent.parent / "examples" / "studies" / "interventions.yaml"
