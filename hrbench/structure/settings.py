"""The `depth:` section of a study file: which tasks the study measures D of, with which models.

Declared in the study (so in its pre-registration) but not part of any estimand: depth is a
property of the task, measured by turn-capped rollouts (Appendix B) beside the study's trials.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field


class DepthSettings(BaseModel):
    """Depth D by turn caps for the study's tasks (the `task_depth` asset)."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    agents: list[str] = Field(
        default_factory=list, min_length=0,
        description="the model set, by agent id of the study, the first measured in full and the rest only "
                    "below D (Appendix B); empty = every agent of the study, in its order")
    tasks: list[str] | None = Field(
        None, description="the tasks to measure, by name; null = every task of the study")
    timeout_sec: float = Field(600.0, gt=0, description="wall-time limit of one rollout (uncapped runs included)")
