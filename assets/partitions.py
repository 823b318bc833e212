"""Partitions: agents are a dynamic dimension (backfill a new model); tasks come from the study."""

from __future__ import annotations

from dagster import DynamicPartitionsDefinition, MultiPartitionsDefinition, StaticPartitionsDefinition

AGENTS = DynamicPartitionsDefinition(name="agent")


def agent_task_partitions(task_names: list[str]) -> MultiPartitionsDefinition:
    return MultiPartitionsDefinition({"agent": AGENTS, "task": StaticPartitionsDefinition(task_names)})
