"""Protects several studies in one instance (issue 23): each study is its own code location, and every Dagster name
it defines (asset keys, checks, jobs, sensors, schedules, the agents' partitions) carries its namespace, so two
studies with the same agent and the same tasks materialize side by side in one instance without a collision."""

from __future__ import annotations

import json
from pathlib import Path

import dagster as dg
from dagster import AssetKey, AssetSelection, DagsterInstance, build_sensor_context, materialize

from hrbench.catalogue import StudyNames
from pipelines.builder import build_definitions
from pipelines.materialize import QUIET
from tests.conftest import stored_table
from tests.deploy.conftest import write_study

STUDIES = ("alpha", "beta")


def _two_studies(tmp_path: Path) -> dict[str, tuple[dg.Definitions, Path]]:
    """Two studies of the same agent (`steady`) over the same tasks, each with its own output directory."""
    return {name: (build_definitions(write_study(tmp_path / name, ["steady"], name=name), tmp_path / name / "out"),
                   tmp_path / name / "out") for name in STUDIES}


def _materialize(defs: dg.Definitions, instance: DagsterInstance, selection: AssetSelection,
                 partition: str | None = None) -> dg.ExecuteInProcessResult:
    return materialize([*defs.assets, *defs.asset_checks], selection=selection, partition_key=partition,
                       instance=instance, resources=defs.resources, run_config=QUIET)


def test_two_studies_materialize_side_by_side_in_one_instance(tmp_path: Path):
    studies = _two_studies(tmp_path)
    instance = DagsterInstance.ephemeral()
    for name, (defs, _) in studies.items():
        names = StudyNames.of(name)
        # the first study's agent is no partition of the second: each sensor adds `steady` to its own study
        tick = defs.get_sensor_def(names.name("agent_files_sensor"))(build_sensor_context(instance=instance))
        assert [r.job_name for r in tick.run_requests] == [names.name("study_setup_job")]
        for request in tick.dynamic_partitions_requests:
            instance.add_dynamic_partitions(request.partitions_def_name, list(request.partition_keys))
        assert instance.get_dynamic_partitions(names.agents) == ["steady"]
        key = lambda k: AssetKey(names.asset_key(k))  # noqa: E731
        assert _materialize(defs, instance, AssetSelection.groups("protocol")).success
        # (no trials here: the sandboxes would take this test out of the default suite; the deployment test runs
        # a whole study under its names)
        assert _materialize(defs, instance, AssetSelection.assets(key("agent_registration")), "steady").success

    prereg = {name: json.loads((out / "preregistration.json").read_text())["prereg_sha256"]
              for name, (_, out) in studies.items()}
    assert prereg["alpha"] != prereg["beta"]  # two protocols (the study's name is part of it)
    assert not instance.get_dynamic_partitions("agent")
    for name, (_, out) in studies.items():
        names = StudyNames.of(name)
        for table, partition in (("preregistration", None), ("agent_registration", "steady")):
            records = instance.fetch_materializations(AssetKey(names.asset_key(table)), limit=10).records
            # one materialization of each study's own partition, under its own protocol
            assert [r.asset_materialization.partition for r in records] == [partition], (name, table)
            assert records[0].asset_materialization.metadata["prereg_sha256"].value == prereg[name]
        # and each study's tables in its own output directory, under its protocol
        registration = stored_table(out, "tables/agent_registration/steady.parquet")
        assert list(registration["prereg_sha256"]) == [prereg[name]] and list(registration["agent"]) == ["steady"]
    assert {k.path[0] for k in instance.get_asset_keys()} == set(STUDIES)


def test_two_studies_definitions_merge_without_a_duplicate_name(tmp_path: Path):
    """What one instance holds of two code locations, in one repository: Dagster refuses any duplicate asset key,
    check, job, sensor or schedule name. The resources are per study (each location binds its own), so the second
    study's are left out: Definitions.merge refuses two resources under one key by design."""
    (alpha, _), (beta, _) = _two_studies(tmp_path).values()
    beta_names = dg.Definitions(assets=beta.assets, asset_checks=beta.asset_checks, jobs=beta.jobs,
                                sensors=beta.sensors, schedules=beta.schedules)
    merged = dg.Definitions.merge(alpha, beta_names)
    dg.Definitions.validate_loadable(merged)
    repository = merged.get_repository_def()
    assert len(repository.get_all_jobs()) == 2 * len([j for j in alpha.resolve_all_job_defs()
                                                      if not j.name.startswith("__")]) + 1  # + __ASSET_JOB
    assert len(repository.sensor_defs) == 2 * len(alpha.sensors)
    assert len(repository.schedule_defs) == 2 * len(alpha.schedules)
    graph = merged.resolve_asset_graph()
    assert len(graph.get_all_asset_keys()) == 2 * len(alpha.resolve_asset_graph().get_all_asset_keys())
