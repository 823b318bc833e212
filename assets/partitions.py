"""Partitions: agents are a dynamic dimension (backfill a new model); tasks come from the study.

The agents' dynamic partitions are stored in the instance under their name, so each study has its own
(`StudyNames.agents`): an agent of one study is not a partition of another in the same instance.
"""

from __future__ import annotations

from dagster import DynamicPartitionsDefinition, MultiPartitionsDefinition, StaticPartitionsDefinition

from hrbench.catalogue import StudyNames


def agent_task_partitions(names: StudyNames, task_names: list[str]) -> MultiPartitionsDefinition:
    """The study's agent x task partitions (the dimensions are `agent` and `task`)."""
    return MultiPartitionsDefinition({"agent": DynamicPartitionsDefinition(name=names.agents),
                                      "task": StaticPartitionsDefinition(task_names)})


def agents_of(agent_task: MultiPartitionsDefinition) -> DynamicPartitionsDefinition:
    """The study's dynamic partitions of agents: the agent dimension of its agent x task partitions."""
    (agents,) = [d.partitions_def for d in agent_task.partitions_defs if d.name == "agent"]
    assert isinstance(agents, DynamicPartitionsDefinition)
    return agents
