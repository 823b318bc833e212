"""Verifier audit (DESIGN §3): a task may enter a study only if its verifiers discriminate.

For every stage i, starting from the oracle checkpoint e_{i-1}:
  * the reference solution sigma_i scores 1;
  * doing nothing scores 0 (the paper's "checks of segment s run before its work");
  * sigma_i with its key step removed scores 0.
"""

from __future__ import annotations

from pydantic import BaseModel

from hrbench.envs.base import SandboxError
from hrbench.envs.local import LocalBackend
from hrbench.tasks.model import Task, TaskError


class StageAudit(BaseModel):
    task: str
    stage: str
    reference_reward: float | None
    nothing_reward: float | None
    key_removed_reward: float | None
    ok: bool
    problem: str | None = None


def audit_task(task: Task, backend: LocalBackend) -> list[StageAudit]:
    """Audit every stage of one task; problems are reported, never raised."""
    rows: list[StageAudit] = []
    for stage in task.stages:
        ref = nothing = removed = None
        problems: list[str] = []
        try:
            removed_script = stage.solution_without_key_step()
            env = backend.start(task, stage.index)
            try:
                nothing = env.verify(stage).reward
            finally:
                env.close()
            env = backend.start(task, stage.index)
            try:
                ref_run = env.exec(stage.solution_script(), task.agent_timeout_sec)
                ref = env.verify(stage).reward
            finally:
                env.close()
            env = backend.start(task, stage.index)
            try:
                env.exec(removed_script, task.agent_timeout_sec)
                removed = env.verify(stage).reward
            finally:
                env.close()
            if ref < 1.0:
                problems.append(f"reference solution scores {ref:g}, not 1 (solve.sh output: {ref_run.output[-300:]!r})")
            if nothing > 0.0:
                problems.append(f"doing nothing scores {nothing:g}, not 0: the verifier passes before the stage's work")
            if removed >= 1.0:
                problems.append("removing the key step still passes: the verifier does not test the key step")
        except (TaskError, SandboxError) as exc:
            problems.append(str(exc))
        rows.append(StageAudit(
            task=task.name, stage=stage.name, reference_reward=ref, nothing_reward=nothing,
            key_removed_reward=removed, ok=not problems, problem="; ".join(problems) or None,
        ))
    return rows
