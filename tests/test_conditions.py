"""Protects conditions as data and shared checkpoint trials: a protocol's trials run once, whatever
number of conditions (or sensitivity choices) use them."""

from __future__ import annotations

from pathlib import Path

import yaml

from hrbench.design import StudyDesign
from hrbench.protocol import CONDITIONS, CheckpointVariant, load_study
from hrbench.runner import TrialRunner
from hrbench.stores import StudyStores
from tests.conftest import FIXTURES, TINY_STUDY


def _study(tmp_path: Path, **changes) -> Path:
    study = yaml.safe_load(TINY_STUDY.read_text())
    study["tasks"]["registry"] = str(FIXTURES / "registry")
    study.update(changes)
    path = tmp_path / "study.yaml"
    path.write_text(yaml.safe_dump(study))
    return path


def test_each_builtin_condition_is_a_declared_pair_of_natural_policy_and_checkpoint_protocol(tmp_path: Path):
    study = load_study(_study(tmp_path, conditions=list(CONDITIONS))).study
    pairs = {c: (study.condition(c).history.value, study.condition(c).state.value,
                 study.checkpoint_protocol(c).history, study.checkpoint_protocol(c).state) for c in CONDITIONS}
    assert pairs == {
        "baseline": ("full", "own", "fresh", "oracle_replay"),
        "context_reset": ("reset", "own", "fresh", "oracle_replay"),
        "state_repair": ("full", "repair", "fresh", "oracle_replay"),
        "compaction": ("compact", "own", "compacted", "oracle_replay"),
    }


def test_a_study_declares_its_own_variant_beside_the_builtins(tmp_path: Path):
    variant = {"name": "reset_compacted", "history": "reset", "state": "own", "checkpoint": {"history": "compacted"}}
    study = load_study(_study(tmp_path, conditions=["baseline", variant])).study
    assert study.condition_names == ["baseline", "reset_compacted"]
    assert study.checkpoint_protocol("reset_compacted") == study.checkpoint.model_copy(update={"history": "compacted"})
    assert CheckpointVariant().apply(study.checkpoint) is study.checkpoint


def test_shared_checkpoint_trials_run_once_per_distinct_protocol(tmp_path: Path):
    # Four conditions, two distinct checkpoint protocols (fresh: baseline, context_reset, state_repair;
    # compacted: compaction) plus a sensitivity protocol that is one of them.
    path = _study(tmp_path, conditions=list(CONDITIONS), trials={"checkpoint": 2, "natural": 1},
                  sensitivity={"protocols": [{"history": "compacted"}]})
    design = StudyDesign.from_file(path)
    stores = StudyStores(tmp_path / "out")
    runner = TrialRunner(design, stores, progress=False)
    task = design.tasks[0]
    records = runner.run_checkpoint_trials("steady", task.name)
    distinct = {design.study.checkpoint_protocol(c).protocol_hash() for c in design.study.condition_names}
    assert len(distinct) == 2
    journal = stores.journal(design.prereg_sha256, "checkpoint", "steady", task.name)
    stored = journal.load()
    assert len(stored) == len(records) == len(distinct) * task.n_stages * design.study.trials.checkpoint
    assert {r.protocol for r in stored.values()} == distinct
    assert {r.condition for r in stored.values()} == {"baseline", "compaction"}  # labelled by the first user
    runner.run_checkpoint_trials("steady", task.name)  # again: nothing re-runs
    assert len(journal.path.read_text().splitlines()) == len(stored)


def test_a_merged_decomposition_adds_its_segments_once(tmp_path: Path):
    path = _study(tmp_path, trials={"checkpoint": 2, "natural": 1}, sensitivity={"decompositions": ["pairs"]})
    design = StudyDesign.from_file(path)
    runner = TrialRunner(design, StudyStores(tmp_path / "out"), progress=False)
    task = design.tasks[0]  # three stages: pairs are (1+2) and (3), the last reusing its own trials
    specs = runner.checkpoint_specs("rotting", task.name)
    units = sorted({s.stage for s in specs})
    assert units == sorted([s.name for s in task.stages] + [f"{task.stages[0].name}+{task.stages[1].name}"])
    records = runner.run_checkpoint_trials("rotting", task.name)
    merged = [r for r in records if "+" in r.stage]
    assert len(merged) == 2 and all(r.exit_reason != "harness_error" for r in merged)
    assert all(0 <= r.stages_passed <= 2 and r.passed == (r.stages_passed == 2) for r in merged)
