"""Batching ability: how many steps of a reference solution an agent writes into one turn.

Depth counts rounds of interaction, so a simulated agent used to measure depth must declare how
far it merges commands (DESIGN §5: "batching ability, commands per turn"). The reference solution
tells it where the steps are and where merging is impossible:

    # hrbench:step                 a new step; a batch may run on into it
    # hrbench:step reads-output    a new step whose commands can only be written after reading
                                   the output of the previous ones (e.g. data decrypted with the
                                   previous answer), so it always opens a new turn

Lines before the first marker belong to the first step. An agent with ``steps_per_turn = b``
sends at most b consecutive steps per turn (``None``: as many as allowed), never running past a
``reads-output`` step. :class:`StepBatchingAgent` is that agent; it always succeeds, so under a
turn cap T it passes exactly when its plan needs at most T turns.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

from hrbench.agents.base import Action, Agent, Command, Observation, TrialContext

STEP_MARKER = "# hrbench:step"
READS_OUTPUT = "reads-output"


class SolutionStep(BaseModel):
    """One step of a reference solution and whether it must wait for earlier output."""

    model_config = ConfigDict(frozen=True)
    script: str
    reads_output: bool = False


def split_steps(script: str, where: str = "solve.sh") -> list[SolutionStep]:
    """The steps of `script` by its `# hrbench:step` markers (the whole script is one step without any)."""
    steps: list[SolutionStep] = []
    current: list[str] = []
    reads = False
    first = True
    for number, line in enumerate(script.splitlines(keepends=True), start=1):
        words = line.split()
        if words[:2] != STEP_MARKER.split():
            current.append(line)
            continue
        option = words[2:]
        if option not in ([], [READS_OUTPUT]):
            raise ValueError(f"{where}:{number}: unknown step option {' '.join(option)!r}; "
                             f"write '{STEP_MARKER}' or '{STEP_MARKER} {READS_OUTPUT}'")
        if not first:  # the first marker keeps the lines above it (the preamble) in its step
            steps.append(SolutionStep(script="".join(current), reads_output=reads))
            current = []
        first = False
        reads = option == [READS_OUTPUT]
    steps.append(SolutionStep(script="".join(current), reads_output=reads))
    return steps


def plan_turns(steps: list[SolutionStep], steps_per_turn: int | None) -> list[str]:
    """The script of each turn: greedy batches of at most `steps_per_turn` steps, split before reads-output."""
    if steps_per_turn is not None and steps_per_turn < 1:
        raise ValueError(f"steps_per_turn must be >= 1 or None (unlimited), got {steps_per_turn}")
    turns: list[list[SolutionStep]] = []
    for step in steps:
        full = bool(turns) and steps_per_turn is not None and len(turns[-1]) >= steps_per_turn
        if not turns or step.reads_output or full:
            turns.append([])
        turns[-1].append(step)
    return ["".join(s.script for s in batch) for batch in turns]


class BatchingParams(BaseModel):
    """The declared batching ability of a simulated agent."""

    model_config = ConfigDict(frozen=True)
    steps_per_turn: int | None = Field(None, ge=1, description="steps merged into one turn; None = unlimited")


class StepBatchingAgent(Agent):
    """Types the reference solution in turns of at most `steps_per_turn` steps, then finishes.

    A calibration agent for depth: it never fails a step, so the only thing a turn cap can take
    from it is turns, and D measures its batching against the task's dependence on output.
    """

    def __init__(self, params: BatchingParams | None = None):
        self.params = params or BatchingParams()
        self.name = f"batch-{self.params.steps_per_turn or 'all'}"

    def begin_trial(self, context: TrialContext) -> None:
        self._task = context.task

    def act(self, observation: Observation) -> Action:
        stage = self._task.stage(observation.stage)
        plan = plan_turns(split_steps(stage.solution_script(), str(stage.solution)), self.params.steps_per_turn)
        if observation.turn > len(plan):
            return Action(task_complete=True)
        return Action(analysis=f"turn {observation.turn} of {len(plan)}",
                      commands=[Command(keystrokes=plan[observation.turn - 1], duration=30.0)],
                      task_complete=observation.turn == len(plan))
