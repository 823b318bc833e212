"""Protects the study file contract: validation errors name the field; agent config files inline."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest

from hrbench.protocol import DEMO_STUDY, INTERVENTIONS_STUDY, StudyError, load_study
from hrbench.preregistration import freeze, register_agent
from hrbench.tasks.loader import load_registry


def _write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def test_demo_study_is_valid_and_declares_three_sim_agents_under_four_conditions_on_the_builtin_tasks():
    loaded = load_study(DEMO_STUDY)
    assert [a.id for a in loaded.study.agents] == ["sim-steady", "sim-rotting", "sim-fragile"]
    assert all(a.kind == "sim" for a in loaded.study.agents)
    assert loaded.study.zero_rule == "jeffreys"
    assert loaded.study.condition_names == ["baseline", "context_reset", "state_repair", "compaction"]
    include = loaded.study.tasks.include
    # one workflow family and four transduction families, five four-stage tasks each (family-level
    # intervals need >= 5 tasks; an equal stage count gives every task of an agent the same true Γ)
    tasks = load_registry(loaded.registry, include)
    families = Counter(t.family for t in tasks)
    assert len(tasks) == 25 and len(families) == 5 and set(families.values()) == {5}
    assert {t.n_stages for t in tasks} == {4}
    assert set(loaded.study.depth.tasks) <= set(include) and loaded.study.depth.agents == ["sim-steady"]


def test_interventions_study_declares_three_sim_agents_and_four_conditions():
    study = load_study(INTERVENTIONS_STUDY).study
    assert [a.kind for a in study.agents] == ["sim", "sim", "sim"]
    assert study.condition_names == ["baseline", "context_reset", "state_repair", "compaction"]


@pytest.mark.parametrize("body, message", [
    ("name: x\nagents: []\n", "agents: List should have at least 1 item"),
    ("name: x\nagents: [{id: a, kind: sim}]\nconditions: [baseline, nap]\n", "unknown condition"),
    ("name: x\nagents: [{id: a, kind: sim}]\nconditions: [context_reset]\n", "must include 'baseline'"),
    ("name: x\nagents: [{id: a, kind: sim}]\nconditions: [baseline, baseline]\n", "condition names must be unique"),
    ("name: x\nagents: [{id: a, kind: sim}]\nconditions: [baseline, {name: r2, history: reset}]\n", "conditions.1.state"),
    ("name: x\nagents: [{id: a, kind: sim}]\nsensitivity: {zero_rules: [laplace]}\n", "sensitivity.zero_rules"),
    ("name: x\nagents: [{id: a, kind: sim}, {id: a, kind: nop}]\n", "agent ids must be unique"),
    ("name: x\nagents: [{id: A!, kind: sim}]\n", "agents.0.sim.id"),
    ("name: x\nagents: [{id: a, kind: sim}]\ncheckpoint: {state: agent_built}\n", "checkpoint.state"),
    ("name: x\nagents: [{id: a, kind: sim}]\nquadrant: {high: 0.2, low: 0.5}\n", "quadrant.low must be below"),
    ("name: x\nagents: [{id: a, kind: sim}]\ntrials: {checkpoint: 0}\n", "trials.checkpoint"),
    ("name: x\nagents: [{id: a, kind: sim, sim: {defect_penalty: 1}}]\ncheckpoint: {budget: {max_turns: 1}}\n",
     "max_turns must be at least 2"),
])
def test_invalid_study_names_file_and_field(tmp_path: Path, body: str, message: str):
    path = _write(tmp_path / "s.yaml", body)
    with pytest.raises(StudyError) as info:
        load_study(path)
    assert str(path) in str(info.value) and message in str(info.value)


def test_agent_config_files_are_inlined_with_overrides_and_frozen(tmp_path: Path):
    _write(tmp_path / "agents" / "steady.yaml", "id: steady\nkind: sim\nsim: {skill: 0.8}\n")
    study_path = _write(tmp_path / "study.yaml", "name: cfg\nagents:\n  - config: agents/steady.yaml\n"
                        "  - {config: agents/steady.yaml, id: steady-2}\n")
    study = load_study(study_path).study
    assert [(a.id, a.sim.skill) for a in study.agents] == [("steady", 0.8), ("steady-2", 0.8)]
    tasks = load_registry(Path(__file__).parent / "fixtures" / "registry")
    prereg = freeze(study, tasks)
    before = register_agent(prereg, study.agent("steady")).agent_sha256
    _write(tmp_path / "agents" / "steady.yaml", "id: steady\nkind: sim\nsim: {skill: 0.7}\n")
    changed = load_study(study_path).study
    # the file is part of the agent's registration, not of the protocol (a new model joins the same study version)
    assert freeze(changed, tasks).prereg_sha256 == prereg.prereg_sha256
    assert register_agent(prereg, changed.agent("steady")).agent_sha256 != before


def test_missing_agent_config_file_is_named(tmp_path: Path):
    path = _write(tmp_path / "study.yaml", "name: cfg\nagents:\n  - config: agents/nope.yaml\n")
    with pytest.raises(StudyError, match=r"agents/nope\.yaml: agent config file \(from study\.yaml\) not found"):
        load_study(path)


def test_yaml_merge_keys_may_override_without_counting_as_repeats(tmp_path: Path):
    path = _write(tmp_path / "s.yaml",
                  "name: x\nagents:\n  - &a {id: a, kind: sim, sim: {skill: 0.5}}\n  - <<: *a\n    id: b\n")
    assert [a.id for a in load_study(path).study.agents] == ["a", "b"]


def test_repeated_key_in_an_agent_config_file_is_refused(tmp_path: Path):
    _write(tmp_path / "agents" / "a.yaml", "id: a\nkind: sim\nsim: {skill: 0.8}\nsim: {skill: 0.2}\n")
    path = _write(tmp_path / "study.yaml", "name: cfg\nagents:\n  - config: agents/a.yaml\n")
    with pytest.raises(StudyError, match=r"a\.yaml:4: key 'sim' is repeated \(first at line 3\)"):
        load_study(path)


def test_weights_are_checked_against_the_registry_only_when_include_is_omitted(tmp_path: Path):
    registry = Path(__file__).parent / "fixtures" / "registry"
    ok = _write(tmp_path / "ok.yaml", f"name: x\ntasks: {{registry: {registry}, weights: {{tiny-chain: 2}}}}\n"
                "agents: [{id: a, kind: sim}]\n")
    assert load_study(ok).study.tasks.weights == {"tiny-chain": 2.0}
    bad = _write(tmp_path / "bad.yaml", f"name: x\ntasks: {{registry: {registry}, weights: {{other: 2}}}}\n"
                 "agents: [{id: a, kind: sim}]\n")
    with pytest.raises(StudyError, match=r"tasks\.weights names task\(s\) \['other'\] not in the registry"):
        load_study(bad)
