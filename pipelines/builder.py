"""Build the Dagster Definitions of one study (its task names shape the partitions)."""

from __future__ import annotations

from pathlib import Path

from dagster import Definitions, SensorEvaluationContext, SensorResult, sensor

from pipelines.defs.study.checks import build_study_checks
from pipelines.defs.study.assets import build_study_assets
from hrbench.protocol import load_study
from hrbench.tasks.loader import load_registry
from pipelines.defs.study.partitions import AGENTS, agent_task_partitions
from resources.study import StudyResource, TableIOManager


def build_definitions(study_path: str | Path, out_dir: str | Path, progress: bool = False) -> Definitions:
    """Definitions for one study: its task partitions, assets, checks, resources and the agent sensor."""
    loaded = load_study(study_path)
    task_names = [t.name for t in load_registry(loaded.registry, loaded.study.tasks.include)]
    agent_task = agent_task_partitions(task_names)
    declared_agents = [a.id for a in loaded.study.agents]

    @sensor(minimum_interval_seconds=30, description="Adds a partition for every agent the study declares.")
    def agent_partitions_sensor(context: SensorEvaluationContext) -> SensorResult:
        known = set(context.instance.get_dynamic_partitions(AGENTS.name))
        new = [a for a in declared_agents if a not in known]
        return SensorResult(dynamic_partitions_requests=[AGENTS.build_add_request(new)] if new else [])

    assets = build_study_assets(agent_task)
    return Definitions(
        assets=assets,
        asset_checks=build_study_checks(agent_task),
        sensors=[agent_partitions_sensor],
        resources={
            "study": StudyResource(study_path=str(Path(study_path).resolve()), out_dir=str(Path(out_dir).resolve()),
                                   progress=progress),
            "io_manager": TableIOManager(root=str(Path(out_dir).resolve())),
        },
    )

