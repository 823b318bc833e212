"""Reference agents: `oracle` runs the reference solution as Harbor's oracle does; `nop` does nothing."""

from __future__ import annotations

from hrbench.agents.base import Action, Agent, Command, Observation, TrialContext


class OracleAgent(Agent):
    """Runs each stage's reference solution sigma_i as its single command (solve.sh from /solution, with its
    helpers beside it), then finishes."""

    name = "oracle"

    def begin_trial(self, context: TrialContext) -> None:
        self._task = context.task

    def act(self, observation: Observation) -> Action:
        if observation.turn > 1:
            return Action(task_complete=True)
        script = self._task.stage(observation.stage).solution_script()
        return Action(commands=[Command(keystrokes=script, solution=True)], task_complete=True)


class NopAgent(Agent):
    """Declares every stage complete without doing anything (the audit's 'nothing scores 0')."""

    name = "nop"

    def begin_trial(self, context: TrialContext) -> None:
        pass

    def act(self, observation: Observation) -> Action:
        return Action(task_complete=True)
