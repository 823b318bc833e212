"""Protects the Harbor round trips (issue 24) with real sandboxes and verifiers: natural rollouts imported
from Harbor job folders give the rows and the residual a native run with the same outcomes gives, and
checkpoint tasks exported to Harbor, run by hrbench's own runner as `harbor run` would and imported
back, give the q̂ of their outcomes."""

from __future__ import annotations

import json
from datetime import timedelta
from pathlib import Path

import pandas as pd
import pytest

from hrbench.analysis import Estimand, residual_frame, stage_estimates, task_outcomes
from hrbench.agents.sim import SimAgent
from hrbench.agents.specs import SimParams
from hrbench.design import StudyDesign
from hrbench.envs.local import LocalBackend
from hrbench.harbor_io.export import checkpoint_task_name, export_checkpoint_tasks
from hrbench.harness.records import TrialSpec, records_table
from hrbench.harness.trials import run_natural_trial
from hrbench.protocol import CONDITIONS, CheckpointProtocol
from hrbench.runner import TrialRunner
from hrbench.stores import StudyStores
from hrbench.tasks.audit import audit_task
from hrbench.tasks.loader import load_task
from tests.conftest import TINY_TASK
from tests.harbor.harbor_jobs import T0, from_records, gated_chain, step, study_file, trial, write_job

pytestmark = pytest.mark.slow  # natural and checkpoint trials in bubblewrap sandboxes (~1 min alone)

AGENTS = [{"id": "steady", "kind": "sim", "sim": {"skill": 0.9}}, {"id": "shaky", "kind": "sim", "sim": {"skill": 0.6}}]
HARBOR = {"steady": ("terminus", "openai/gpt-5"), "shaky": ("claude-code", "anthropic/claude-sonnet")}
SAME = ["agent", "task", "trial_index", "condition", "kind", "passed", "stages_passed", "stopped_stage", "exit_reason",
        "rewards_json", "harbor_reward", "tokens_in", "tokens_out"]
STAGE_SAME = ["stage", "passed", "reward", "exit_reason", "rewards", "met_min_reward"]


def test_imported_natural_rollouts_give_the_rows_and_residual_of_a_native_run(tmp_path: Path):
    registry = tmp_path / "registry"
    task = gated_chain(registry, TINY_TASK)
    native = StudyDesign.from_file(study_file(tmp_path / "native.yaml", registry, AGENTS))
    runner = TrialRunner(native, StudyStores(tmp_path / "native-out"), progress=False)
    checkpoint, natural = [], {}
    for agent in ("steady", "shaky"):
        checkpoint += runner.run_checkpoint_trials(agent, "tiny-chain")
        natural[agent] = runner.run_natural_trials(agent, "tiny-chain")
    jobs = [write_job(tmp_path / "jobs" / f"job-{agent}", [(t["trial_name"], t) for t in
                      from_records(task, natural[agent], *HARBOR[agent], offset=10 * i)])
            for i, agent in enumerate(("steady", "shaky"))]
    imports = [{"kind": "natural", "harbor_jobs": [str(j) for j in jobs],
                "agents": {f"{a}@{m}": sid for sid, (a, m) in HARBOR.items()}}]
    design = StudyDesign.from_file(study_file(tmp_path / "imported.yaml", registry, AGENTS, imports))
    importer = TrialRunner(design, StudyStores(tmp_path / "imported-out"), progress=False)
    for agent in ("steady", "shaky"):
        mine = {r.trial_index: r for r in natural[agent]}
        theirs = {r.trial_index: r for r in importer.run_natural_trials(agent, "tiny-chain")}
        assert set(mine) == set(theirs)
        for i, r in mine.items():
            assert {c: getattr(r, c) for c in SAME} == {c: getattr(theirs[i], c) for c in SAME}
            stages = [[{c: o[c] for c in STAGE_SAME} for o in json.loads(x.stage_outcomes_json)] for x in (r, theirs[i])]
            assert stages[0] == stages[1]
        # the residual from the imported rows is the native one (the same checkpoint outcomes under each design)
        cp = records_table(checkpoint)
        gammas = []
        for d, rows in ((native, natural[agent]), (design, list(theirs.values()))):
            nat = records_table(rows).assign(prereg_sha256=d.prereg_sha256)
            est = Estimand.declared(d.study, "baseline")
            frame = residual_frame(d, agent, task_outcomes(d, cp.assign(prereg_sha256=d.prereg_sha256)
                                                             [cp["agent"] == agent], nat, est), est)
            gammas.append(frame[["scope", "name", "p_expected", "p_observed", "gamma"]].reset_index(drop=True))
        pd.testing.assert_frame_equal(gammas[0], gammas[1])
    assert natural["shaky"] and not all(r.passed for r in natural["shaky"])  # the outcomes were not all alike


def test_exported_checkpoint_tasks_pass_the_audit_and_come_back_as_checkpoint_trials(tmp_path: Path):
    registry = tmp_path / "registry"
    gated_chain(registry, TINY_TASK)
    study = study_file(tmp_path / "study.yaml", registry, AGENTS[1:], trials={"checkpoint": 3, "natural": 1})
    design = native = StudyDesign.from_file(study)
    exported = export_checkpoint_tasks(design.tasks, tmp_path / "exported")
    backend = LocalBackend(tmp_path / "cache")
    tasks = [load_task(p) for p in exported]
    assert [t.schema_version for t in tasks] == ["1.4"] * 3 and [t.n_stages for t in tasks] == [1, 1, 1]
    for t in tasks:  # reference 1, nothing 0, on the state the set-up replays
        rows = audit_task(t, backend)
        assert [(r.reference_reward, r.nothing_reward, r.ok) for r in rows] == [(1.0, 0.0, True)], rows
    # `harbor run` of each exported task, three trials, done by hrbench's own runner with a sim agent
    source = design.tasks[0]
    trials = []
    for t in tasks:
        for i in range(3):
            spec = TrialSpec(prereg_sha256="0" * 64, agent="shaky", condition="baseline", protocol="harbor-run",
                             task=t.name, kind="natural", stage=None, trial_index=i)
            record = run_natural_trial(spec, t, SimAgent(SimParams(skill=0.6)), backend, CONDITIONS["baseline"],
                                       CheckpointProtocol().budget, seed=7, trajectory_dir=tmp_path / "runs")
            start = T0 + timedelta(minutes=len(trials))
            o = json.loads(record.stage_outcomes_json)[0]
            trials.append((f"{t.slug}-{i}", trial(t.path, f"{t.slug}-{i}", "claude-code", "anthropic/claude-sonnet",
                                                   start, [step(o["stage"], o["reward"], start)])))
    for _, result in trials:
        result["task_name"] = result["task_name"].replace("__", "/")  # Harbor names the task as its task.toml does
        assert result["task_name"] in {checkpoint_task_name(source, s) for s in source.stages}
    job = write_job(tmp_path / "jobs" / "checkpoints", trials)
    with_import = study_file(tmp_path / "study.yaml", registry, AGENTS[1:], [
        {"kind": "checkpoint", "harbor_jobs": [str(job)], "agents": {"claude-code": "shaky"}}],
        trials={"checkpoint": 3, "natural": 1})
    design = StudyDesign.from_file(with_import)
    rows = TrialRunner(design, StudyStores(tmp_path / "out"), progress=False).run_checkpoint_trials("shaky",
                                                                                                   "tiny-chain")
    estimates = stage_estimates(design, "shaky", records_table(rows).assign(prereg_sha256=design.prereg_sha256))
    outcomes = {r["task_name"].split("--at-")[1]: [] for _, r in trials}
    for _, r in trials:
        outcomes[r["task_name"].split("--at-")[1]].append(r["step_results"][0]["verifier_result"]["rewards"]["reward"]
                                                          >= 1.0)
    assert {s: (k, m) for s, k, m in zip(estimates["stage"], estimates["k"], estimates["m"])} == \
        {s: (sum(v), len(v)) for s, v in outcomes.items()}
    # native checkpoint trials of the same study without the import, given the same outcomes trial by trial,
    # give the same q̂ and intervals
    own = records_table(TrialRunner(native, StudyStores(tmp_path / "native-out"), progress=False)
                        .run_checkpoint_trials("shaky", "tiny-chain"))
    same = [outcomes[stage][i] for stage, i in zip(own["stage"], own["trial_index"])]
    own = own.assign(passed=same, exit_reason=["passed" if p else "failed" for p in same],
                     prereg_sha256=native.prereg_sha256)
    columns = ["stage", "k", "m", "m_missing", "q_hat", "q_ci_low", "q_ci_high"]
    pd.testing.assert_frame_equal(stage_estimates(native, "shaky", own)[columns], estimates[columns])
