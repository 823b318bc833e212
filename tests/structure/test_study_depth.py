"""Protects the task_depth table: a study's `depth:` section is validated, its tasks are measured in
Appendix B's order through the real harness with the named agents, and each row carries D, N, W and
the runs made."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from hrbench.catalogue import TASK_DEPTH
from hrbench.design import StudyDesign
from hrbench.envs.local import LocalBackend
from hrbench.protocol import StudyError, load_study
from hrbench.stores import StudyStores
from hrbench.structure.study_depth import DEPTH_COLUMNS, measure_study_depth
from hrbench.steps import steps_for

REGISTRY = Path(__file__).resolve().parents[2] / "task_registry"
TASKS = ["lt-arith-orderedids-d1-n12-s0-k2", "calib-parallel"]


def _study(tmp_path: Path, depth: dict | None, **extra) -> Path:
    body = {"name": "depth-test", "tasks": {"registry": str(REGISTRY), "include": TASKS},
            "agents": [{"id": "steady", "kind": "sim", "sim": {"skill": 1.0}},
                       {"id": "batcher", "kind": "sim", "sim": {"skill": 1.0, "steps_per_turn": 10}}],
            "trials": {"checkpoint": 1, "natural": 1}, "seed": 5, **extra}
    if depth is not None:
        body["depth"] = depth
    path = tmp_path / "study.yaml"
    path.write_text(yaml.safe_dump(body))
    return path


def test_depth_agents_must_be_agents_of_the_study(tmp_path: Path):
    with pytest.raises(StudyError, match=r"depth.agents \['nobody'\]"):
        load_study(_study(tmp_path, {"agents": ["nobody"]}))


def test_depth_tasks_must_be_tasks_of_the_study(tmp_path: Path):
    design = StudyDesign.from_file(_study(tmp_path, {"tasks": ["no-such-task"]}))
    with pytest.raises(StudyError, match=r"depth.tasks \['no-such-task'\]: not among the study's tasks"):
        measure_study_depth(design, LocalBackend(tmp_path / "cache"), StudyStores(tmp_path / "out"))


def test_a_study_without_depth_has_no_depth_step(tmp_path: Path):
    design = StudyDesign.from_file(_study(tmp_path, None))
    assert "task_depth" not in steps_for(design.study)[0].assets
    with pytest.raises(StudyError, match="no `depth:` section"):
        measure_study_depth(design, LocalBackend(tmp_path / "cache"), StudyStores(tmp_path / "out"))
    declared = StudyDesign.from_file(_study(tmp_path, {}))
    assert steps_for(declared.study)[0].assets[-1] == "task_depth"


def test_each_task_is_measured_in_appendix_b_order_with_the_named_models(tmp_path: Path):
    # steady types a stage's script in one turn, batcher ten steps per turn: on calib-parallel (one stage of
    # ten marked steps) both need one turn; on the two-part transduction task two, one per part.
    design = StudyDesign.from_file(_study(tmp_path, {"agents": ["steady", "batcher"]}))
    frame = measure_study_depth(design, LocalBackend(tmp_path / "cache"), StudyStores(tmp_path / "out"))
    assert list(frame.columns) == ["prereg_sha256", *DEPTH_COLUMNS] and TASK_DEPTH.table_schema.problems(frame) == []
    assert set(frame["prereg_sha256"]) == {design.prereg_sha256}
    rows = frame.set_index("task")
    lt, calib = rows.loc[TASKS[0]], rows.loc[TASKS[1]]
    assert (lt["depth"], lt["depth_status"], lt["n_turns"], lt["n_stages"]) == (2, "estimate", 2, 2)
    assert (calib["depth"], calib["n_turns"]) == (1, 1)
    assert lt["work_lines"] == next(t for t in design.tasks if t.name == TASKS[0]).work and lt["models"] == "steady,batcher"
    runs = json.loads(lt["runs_json"])
    # two uncapped runs pass in 2 turns; cap 1 < N fails twice; the second model runs below D = 2 only
    assert [(r["model"], r["cap"], r["passed"]) for r in runs] == [
        ("steady", None, True), ("steady", None, True), ("steady", 1, False), ("steady", 1, False),
        ("batcher", 1, False), ("batcher", 1, False)]
    assert lt["n_runs"] == 6
    # D = 1 on calib-parallel: the second model is not run at all
    assert [r["model"] for r in json.loads(calib["runs_json"])] == ["steady", "steady"]


def test_a_depth_study_has_a_task_depth_asset_the_report_depends_on(tmp_path: Path):
    from dagster import AssetKey

    from hrbench.catalogue import StudyNames
    from pipelines.builder import build_definitions

    names = StudyNames.of("depth-test")  # its keys are `depth_test/...`
    task_depth, preregistration, report = (AssetKey(names.asset_key(k))
                                           for k in ("task_depth", "preregistration", "study_report"))
    graph = build_definitions(_study(tmp_path, {}), tmp_path / "out").resolve_asset_graph()
    node = graph.get(task_depth)
    assert node.group_name == "protocol" and preregistration in node.parent_keys
    assert task_depth in graph.get(report).parent_keys
    without = build_definitions(_study(tmp_path, None), tmp_path / "out2").resolve_asset_graph()
    assert task_depth not in without.get_all_asset_keys() and report in without.get_all_asset_keys()


def test_depth_metadata_has_the_table_and_the_plane():
    import pandas as pd

    from hrbench.report.context import depth_metadata

    frame = pd.DataFrame([{"task": f"t{i}", "family": "f", "depth": d, "depth_status": s, "n_turns": n,
                           "work_lines": 10 * (i + 1), "work_chars": 100, "n_runs": 4, "dependency_depth": 1}
                          for i, (d, s, n) in enumerate([(2, "estimate", 2), (None, "no_estimate", None),
                                                         (None, "above_largest_cap", 90)])])
    meta = depth_metadata(frame)
    rows = meta["depth_table"].splitlines()[2:]
    assert rows == ["| t0 | f | 2 | 2 | 10 | 100 | 4 |", "| t1 | f | none | — | 20 | 100 | 4 |",
                    "| t2 | f | > largest cap | 90 | 30 | 100 | 4 |"]
    assert "](data:image/png;base64," in meta["figure_depth_work"]
