"""Protects the study file contract: validation errors name the field; agent config files inline."""

from __future__ import annotations

from pathlib import Path

import pytest

from hrbench.protocol import DEMO_STUDY, StudyError, load_study
from hrbench.preregistration import freeze, register_agent
from hrbench.tasks.loader import load_registry


def _write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def test_demo_study_is_valid_and_declares_two_sim_agents():
    study = load_study(DEMO_STUDY).study
    assert [a.kind for a in study.agents] == ["sim", "sim"]
    assert study.zero_rule == "jeffreys" and study.conditions == ["baseline"]


@pytest.mark.parametrize("body, message", [
    ("name: x\nagents: []\n", "agents: List should have at least 1 item"),
    ("name: x\nagents: [{id: a, kind: sim}]\nconditions: [baseline, nap]\n", "unknown condition"),
    ("name: x\nagents: [{id: a, kind: sim}, {id: a, kind: nop}]\n", "agent ids must be unique"),
    ("name: x\nagents: [{id: A!, kind: sim}]\n", "agents.0.sim.id"),
    ("name: x\nagents: [{id: a, kind: sim}]\ncheckpoint: {state: solution_conditioned}\n", "not supported yet"),
    ("name: x\nagents: [{id: a, kind: sim}]\nquadrant: {high: 0.2, low: 0.5}\n", "quadrant.low must be below"),
    ("name: x\nagents: [{id: a, kind: sim}]\ntrials: {checkpoint: 0}\n", "trials.checkpoint"),
    ("name: x\nagents: [{id: a, kind: sim}]\ncheckpoint: {history: matched}\n", "'matched' is not supported"),
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
