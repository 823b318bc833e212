"""Protects the checkpoint protocol variants, in real sandboxes with real sim agents and verifiers:
`information: goal_only` states the task's goal instead of the stage's instruction; `state:
solution_conditioned` starts stage i from a state the agent itself left after passing parts 1..i-1
in a prefix rollout, and the sim truth of its q_i holds; `budget_rule: aggregate_matched` splits the
natural rollout's trial-wide caps over the stages, and resource accounting sets the rules side by side."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import yaml
from dagster import DagsterInstance
from scipy.stats import beta

from hrbench.agents.sim import DEFECT_FILE, SimAgent, conditioned_defects, segment_truth, sim_truth
from hrbench import analysis
from hrbench.agents.specs import SimParams
from hrbench.catalogue import PREFIX_ROLLOUTS
from hrbench.design import StudyDesign
from hrbench.envs.base import SandboxError
from hrbench.envs.local import LocalBackend
from hrbench.harness.records import TrialSpec
from hrbench.harness.trajectory import read_trajectory
from hrbench.harness.trials import run_checkpoint_trial, run_natural_trial
from hrbench.protocol import CONDITIONS, Budget, CheckpointProtocol, StudyError, load_study
from hrbench.runner import TrialRunner
from hrbench.stores import StudyStores
from hrbench.tasks.loader import load_task
from pipelines.materialize import run_study
from tests.conftest import FIXTURES, TINY_STUDY, TINY_TASK, stored_table

ALWAYS = SimParams(skill=1.0)


def _spec(stage: str | None, index: int = 0) -> TrialSpec:
    return TrialSpec(prereg_sha256="0" * 64, agent="sim", condition="baseline", protocol="p", task="tiny-chain",
                     kind="checkpoint" if stage else "natural", stage=stage, trial_index=index)


def _prompts(out: Path, record) -> list[str]:
    steps = read_trajectory(out / record.trajectory_path)["steps"]
    return [s["message"] for s in steps if s.get("source") == "user"]


def test_goal_only_states_the_whole_task_and_the_parts_done_not_the_stage_instruction(tmp_path: Path):
    task = load_task(TINY_TASK)
    backend = LocalBackend(tmp_path / "cache")
    goal_only = CheckpointProtocol(information="goal_only")
    assert goal_only.protocol_hash() != CheckpointProtocol().protocol_hash()  # its own trial keys
    record = run_checkpoint_trial(_spec("report"), task, SimAgent(ALWAYS), backend, goal_only, 1,
                                  trajectory_dir=tmp_path / "trajectories")
    assert record.passed  # the real verifier of stage 3 judged the state the agent left
    (prompt,) = _prompts(tmp_path, record)
    assert prompt.startswith("Parts 1-2 of this task are marked complete.")
    assert "Here is part 3 of 3" not in prompt
    # without a task-level instruction.md the goal is every step's instruction, in order
    positions = [prompt.index(s.instruction.strip()) for s in task.stages]
    assert positions == sorted(positions) and task.goal in prompt
    given = run_checkpoint_trial(_spec("report", 1), task, SimAgent(ALWAYS), backend, CheckpointProtocol(), 1,
                                 trajectory_dir=tmp_path / "trajectories")
    (stated,) = _prompts(tmp_path, given)
    assert stated.startswith("Part 2 is marked complete. Here is part 3 of 3.")
    assert task.stages[0].instruction.strip() not in stated


def test_a_task_level_instruction_md_is_the_goal(tiny_task_copy: Path, tmp_path: Path):
    (tiny_task_copy / "instruction.md").write_text("Leave a report of the doubled seed plus one.\n")
    task = load_task(tiny_task_copy)
    assert task.goal == "Leave a report of the doubled seed plus one."
    record = run_checkpoint_trial(_spec("double"), task, SimAgent(ALWAYS), LocalBackend(tmp_path / "cache"),
                                  CheckpointProtocol(information="goal_only"), 1,
                                  trajectory_dir=tmp_path / "trajectories")
    (prompt,) = _prompts(tmp_path, record)
    assert record.passed and prompt.startswith("Part 1 of this task is marked complete.")
    assert prompt.endswith("Leave a report of the doubled seed plus one.")
    assert not any(s.instruction.strip() in prompt for s in task.stages)
    assert load_task(TINY_TASK).content_hash() != task.content_hash()  # a changed goal is a new task version


SOLUTION_CONDITIONED = CheckpointProtocol(state="solution_conditioned")


def test_solution_conditioned_starts_from_the_agents_own_passing_state_with_its_defects(tmp_path: Path):
    task = load_task(TINY_TASK)
    backend = LocalBackend(tmp_path / "cache")
    always_defect = SimParams(skill=1.0, defect_rate=1.0, defect_penalty=50.0)  # a defect fails every later stage
    prefix = run_natural_trial(_spec(None), task, SimAgent(always_defect), backend, CONDITIONS["baseline"],
                               SOLUTION_CONDITIONED.budget, 1, trajectory_dir=tmp_path / "t",
                               save_states=lambda done: f"p0/after-{done}")
    assert prefix.stages_passed == 1  # part 1 passed (leaving a defect), part 2 met it and failed
    saved = tmp_path / "cache" / "agent-states" / "p0"
    assert sorted(p.name for p in saved.iterdir() if p.is_dir()) == ["after-1"]  # only passed boundaries are saved
    assert (saved / "after-1" / "work" / DEFECT_FILE).read_text().split() == ["make"]
    assert (saved / "after-1" / "work" / "a.txt").is_file()  # the agent's own output of part 1
    own = run_checkpoint_trial(_spec("double"), task, SimAgent(always_defect), backend, SOLUTION_CONDITIONED, 1,
                               trajectory_dir=tmp_path / "t", solution_state=lambda stage: f"p0/after-{stage}")
    oracle = run_checkpoint_trial(_spec("double", 1), task, SimAgent(always_defect), backend, CheckpointProtocol(), 1,
                                  trajectory_dir=tmp_path / "t")
    assert oracle.passed and not own.passed and own.exit_reason == "failed"  # its own defect, found by looking
    steps = read_trajectory(tmp_path / own.trajectory_path)["steps"]
    assert any("solution-conditioned state: the agent's own state p0/after-1" in s["message"] for s in steps)
    with pytest.raises(RuntimeError, match="needs a prefix rollout of agent 'sim' on task 'tiny-chain' that passed "
                                           "parts 1-2; none is recorded"):
        run_checkpoint_trial(_spec("report"), task, SimAgent(always_defect), backend, SOLUTION_CONDITIONED, 1,
                             trajectory_dir=tmp_path / "t", solution_state=lambda stage: None)
    with pytest.raises(SandboxError, match="no saved agent state 'p9/after-1'"):
        backend.start(task, 1, "p9/after-1")


def _conditioned_q_by_simulation(params: SimParams, first: int, reps: int, seed: int) -> float:
    """The generative story coded on its own: prefix rollouts with defects, kept when parts 1..first pass,
    then one checkpoint stage from each kept state (without context rot: it does not change the selection)."""
    rng = np.random.default_rng(seed)
    passed = tried = 0
    for _ in range(reps):
        defects, ok = 0, True
        for _stage in range(first):
            if rng.random() >= params.skill * math.exp(-params.defect_penalty * defects):
                ok = False
                break
            defects += rng.random() < params.defect_rate
        if ok:
            tried += 1
            passed += rng.random() < params.skill * math.exp(-params.defect_penalty * defects)
    return passed / tried


@pytest.mark.parametrize("first", [1, 2, 3])
def test_solution_conditioned_truth_matches_the_generative_story(first: int):
    params = SimParams(skill=0.95, defect_rate=0.5, defect_penalty=1.5)
    closed = params.skill * conditioned_defects(params, first)
    assert _conditioned_q_by_simulation(params, first, 60_000, seed=first) == pytest.approx(closed, abs=0.01)
    # selection on passing matters: the unconditioned expectation (1 - delta + delta e^-kappa)^first is lower
    if first > 1:
        assert closed > params.skill * (1 - 0.5 + 0.5 * math.exp(-1.5)) ** first + 0.01


def test_a_merged_segment_from_the_agents_own_state_matches_the_generative_story():
    """Stages 2+3 merged, started from the agent's state after passing part 1: every stage of the segment
    meets the inherited defects, and a defect left inside the segment lowers its later stage."""
    params = SimParams(skill=0.95, defect_rate=0.5, defect_penalty=1.5)
    rng = np.random.default_rng(7)
    passed = tried = 0
    for _ in range(60_000):
        if rng.random() >= params.skill:  # the prefix rollout's part 1
            continue
        defects = int(rng.random() < params.defect_rate)
        tried += 1
        ok = True
        for _stage in range(2):
            if rng.random() >= params.skill * math.exp(-params.defect_penalty * defects):
                ok = False
                break
            defects += rng.random() < params.defect_rate
        passed += ok
    task = load_task(TINY_TASK)
    closed = segment_truth(params, task, [1, 2], SOLUTION_CONDITIONED)
    assert passed / tried == pytest.approx(closed, abs=0.01)
    assert closed < segment_truth(params, task, [1, 2], CheckpointProtocol()) - 0.1


DEFECTIVE = {"id": "defective", "kind": "sim", "sim": {"skill": 0.95, "defect_rate": 0.5, "defect_penalty": 1.5}}


def _run(tmp_path_factory, name: str, m: int, natural: int = 6) -> Path:
    study = yaml.safe_load(TINY_STUDY.read_text())
    study["tasks"]["registry"] = str(FIXTURES / "registry")
    study["agents"] = [DEFECTIVE]
    study["checkpoint"] = {"state": "solution_conditioned"}
    study["sensitivity"] = {"protocols": [{"state": "oracle_replay"}]}  # the oracle-state trials beside them
    study["trials"] = {"checkpoint": m, "natural": natural}
    root = tmp_path_factory.mktemp(name)
    path = root / "study.yaml"
    path.write_text(yaml.safe_dump(study))
    run_study(path, root / "out", instance=DagsterInstance.ephemeral(), progress=False)
    return root


@pytest.fixture(scope="module")
def conditioned_run(tmp_path_factory) -> Path:
    return _run(tmp_path_factory, "conditioned", 6, natural=2)


@pytest.fixture(scope="module")
def conditioned_many(tmp_path_factory) -> Path:
    return _run(tmp_path_factory, "conditioned-many", 40)


def test_a_solution_conditioned_study_runs_end_to_end_from_prefix_rollouts(conditioned_run: Path):
    out = conditioned_run / "out"
    study = load_study(conditioned_run / "study.yaml").study
    assert study.needs_prefix_rollouts and study.needs_agent_states
    summary = json.loads((out / "summary.json").read_text())
    assert {r["agent"] for r in summary["residuals"] if r["scope"] == "all"} == {"defective"}
    prefixes = stored_table(out, "tables/prefix_rollouts/defective/tiny-chain.parquet")
    checkpoints = stored_table(out, "tables/checkpoint_trials/defective/tiny-chain.parquet")
    natural = stored_table(out, "tables/baseline/natural_trials/defective/tiny-chain.parquet")
    assert len(prefixes) == 6 and (checkpoints["exit_reason"] != "harness_error").all()
    assert PREFIX_ROLLOUTS.table_schema.problems(prefixes) == []  # the prefix rollouts are trial rows too
    # The states come from the prefix rollouts, never from the natural rollouts a prediction is compared with.
    assert not set(prefixes["trial_key"]) & set(natural["trial_key"])
    conditioned = study.checkpoint_protocol("baseline").protocol_hash()
    later = checkpoints[(checkpoints["protocol"] == conditioned) & (checkpoints["stage"] == "report")].iloc[0]
    steps = read_trajectory(out / later["trajectory_path"])["steps"]
    assert any("solution-conditioned state: the agent's own state" in s["message"] for s in steps)
    rate = checkpoints[checkpoints["stage"] != "make"].groupby("protocol")["passed"].mean()
    assert rate[conditioned] < rate[CheckpointProtocol().protocol_hash()]  # its own defects came with its states


@pytest.mark.slow  # 40 prefix rollouts and 240 checkpoint trials (~1 min on 2 busy cores)
def test_solution_conditioned_q_is_lower_for_a_defect_leaving_agent_and_holds_its_truth(conditioned_many: Path):
    """Checkpoint trials sharing a prefix state are not independent draws of q_i, so a binomial interval
    is narrower than the truth's sampling spread: 40 prefixes keep that small."""
    study = load_study(conditioned_many / "study.yaml").study
    task = load_task(FIXTURES / "registry" / "tiny-chain")
    checkpoints = stored_table(conditioned_many / "out", "tables/checkpoint_trials/defective/tiny-chain.parquet")
    params = study.agent("defective").sim
    for protocol in study.checkpoint_protocols().values():
        truth = sim_truth(params, task, CONDITIONS["baseline"], protocol).q
        rows = checkpoints[checkpoints["protocol"] == protocol.protocol_hash()]
        for stage in task.stages:
            passed = rows[rows["stage"] == stage.name]["passed"]
            k, m = int(passed.sum()), len(passed)
            low, high = beta.ppf([0.025, 0.975], k + 0.5, m - k + 0.5)  # Jeffreys, as the study's zero rule
            assert low <= truth[stage.index] <= high, (protocol.state, stage.name, k, m, truth)
    rate = checkpoints[checkpoints["stage"] != "make"].groupby("protocol")["passed"].mean()
    oracle = CheckpointProtocol(state="oracle_replay").protocol_hash()
    conditioned = study.checkpoint_protocol("baseline").protocol_hash()
    assert rate[conditioned] < rate[oracle] - 0.2  # its own defects lower q_2, q_3 (truth 0.58, 0.50 vs 0.95)


def test_the_docker_backend_refuses_solution_conditioned_naming_local(tmp_path: Path):
    study = yaml.safe_load(TINY_STUDY.read_text())
    study["tasks"]["registry"] = str(FIXTURES / "registry")
    study["checkpoint"] = {"state": "solution_conditioned"}
    study["backend"] = "docker"
    path = tmp_path / "study.yaml"
    path.write_text(yaml.safe_dump(study))
    runner = TrialRunner(StudyDesign.from_file(path), StudyStores(tmp_path / "out"), progress=False)
    for run in (runner.run_prefix_rollouts, runner.run_checkpoint_trials):
        with pytest.raises(SandboxError, match="backend 'docker'.*run the study on the 'local' backend"):
            run("steady", "tiny-chain")
    assert not (tmp_path / "out" / "journal").exists()  # refused before any trial ran



def _aggregate(**caps) -> CheckpointProtocol:
    return CheckpointProtocol(budget=Budget(**caps), budget_rule="aggregate_matched")


@pytest.mark.parametrize("k, total", [(3, 10), (3, 3), (5, 7), (4, 1), (1, 9)])
def test_aggregate_matched_stage_budgets_sum_to_the_natural_rollouts(k: int, total: int):
    protocol = _aggregate(task_max_turns=total, task_max_tokens=100 * total + 1, task_timeout_sec=30.0)
    shares = [protocol.stage_budget(k, [i]) for i in range(k)]
    assert sum(b.task_max_turns for b in shares) == total
    assert sum(b.task_max_tokens for b in shares) == 100 * total + 1
    assert sum(b.task_timeout_sec for b in shares) == pytest.approx(30.0)
    assert max(b.task_max_turns for b in shares) - min(b.task_max_turns for b in shares) <= 1  # evenly
    assert all(b.max_turns == protocol.budget.max_turns for b in shares)  # per-stage caps as declared
    if k > 1:  # a merged segment gets the sum of its stages' shares
        assert protocol.stage_budget(k, [0, 1]).task_max_turns == shares[0].task_max_turns + shares[1].task_max_turns
    declared = CheckpointProtocol(budget=protocol.budget)
    assert declared.stage_budget(k, [0]) == declared.budget  # equal_per_stage: each trial the whole budget
    assert declared.protocol_hash() != protocol.protocol_hash()


def test_the_default_budget_rule_keeps_the_trial_keys_of_before():
    assert CheckpointProtocol().protocol_hash() == "00e6a7d679eb"  # main before budget_rule existed


def test_aggregate_matched_without_a_trial_wide_cap_is_refused_at_load(tmp_path: Path):
    for body in ("checkpoint: {budget_rule: aggregate_matched}\n",
                 "sensitivity: {protocols: [{budget_rule: aggregate_matched}]}\n"):
        path = tmp_path / "s.yaml"
        path.write_text("name: x\nagents: [{id: a, kind: sim}]\n" + body)
        with pytest.raises(StudyError, match="declare checkpoint.budget.task_max_turns"):
            load_study(path)


def test_an_aggregate_matched_share_binds_the_checkpoint_trial_in_the_sandbox(tmp_path: Path):
    task = load_task(TINY_TASK)
    backend = LocalBackend(tmp_path / "cache")
    looker = SimParams(skill=1.0, defect_penalty=0.1)  # looks at its workspace first: 2 turns a stage
    caps = dict(task_max_turns=3)  # the natural rollout's 3 turns: 1 per stage when split
    split = run_checkpoint_trial(_spec("double"), task, SimAgent(looker), backend, _aggregate(**caps), 1,
                                 trajectory_dir=tmp_path / "t")
    whole = run_checkpoint_trial(_spec("double", 1), task, SimAgent(looker), backend,
                                 CheckpointProtocol(budget=Budget(**caps)), 1, trajectory_dir=tmp_path / "t")
    assert whole.passed and whole.turns == 2
    assert not split.passed and split.exit_reason == "turn_cap" and split.turns == 1
    (prompt,) = _prompts(tmp_path, split)
    assert "You have at most 1 turns for this task" in prompt  # the share is what the agent is told


def test_resource_accounting_sets_the_budget_rules_side_by_side(tmp_path: Path):
    study = yaml.safe_load(TINY_STUDY.read_text())
    study["tasks"]["registry"] = str(FIXTURES / "registry")
    study["checkpoint"] = {"budget": {"task_max_turns": 3}}  # split: 1 turn a stage; the agent needs 2
    study["sensitivity"] = {"protocols": [{"budget_rule": "aggregate_matched"}]}
    study["trials"] = {"checkpoint": 2, "natural": 2}
    path = tmp_path / "study.yaml"
    path.write_text(yaml.safe_dump(study))
    design = StudyDesign.from_file(path)
    runner = TrialRunner(design, StudyStores(tmp_path / "out"), progress=False)
    checkpoint = pd.DataFrame([r.model_dump() for r in runner.run_checkpoint_trials("rotting", "tiny-chain")])
    natural = pd.DataFrame([r.model_dump() for r in runner.run_natural_trials("rotting", "tiny-chain")])
    table = analysis.resource_accounting(design, "rotting", checkpoint, natural)
    rows = {(r.condition, r.kind, r.budget_rule if isinstance(r.budget_rule, str) else None): r
            for r in table.itertuples()}
    assert set(rows) == {("baseline", "checkpoint", "equal_per_stage"), ("baseline", "natural", None),
                         ("sensitivity", "checkpoint", "aggregate_matched")}
    equal, split = rows[("baseline", "checkpoint", "equal_per_stage")], rows[("sensitivity", "checkpoint",
                                                                             "aggregate_matched")]
    assert equal.trials == split.trials == 3 * 2 and equal.missing_trials == split.missing_trials == 0
    assert (equal.turns, split.turns) == (3 * 2 * 2, 3 * 2 * 1)  # each stage's trials: 2 turns, or the 1-turn share
    assert rows[("baseline", "natural", None)].trials == 2
