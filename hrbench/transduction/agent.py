"""A simulated transducer agent: writes each chunk of a transduction task with declared errors.

It reads the document its task was written from (``[metadata.hrbench.transduction]``), draws the
whole output once per trial from :func:`~hrbench.transduction.simulate.simulated_records` with the
trial's seed, and in each stage types the lines of that stage's chunk in one turn. The real
verifier judges them, so a stage of s records passes a checkpoint trial with probability
q = Π_{i in chunk} (1 − e(i)): with a flat rate e, e = 1 − q^{1/s} is recoverable from the stage
pass rates, and a position-dependent decay shows as later chunks passing less often.
"""

from __future__ import annotations

import random

from pydantic import BaseModel, ConfigDict, Field

from hrbench.agents.base import Action, Agent, Command, Observation, TrialContext
from hrbench.transduction.packages import chunk_bounds, document_for_task
from hrbench.transduction.simulate import simulated_records


class TransducerParams(BaseModel):
    model_config = ConfigDict(frozen=True)
    error_rate: float = Field(0.0, ge=0, le=1, description="per-record error probability at the first record")
    decay: float = Field(0.0, ge=0, le=1, description="added error probability at the last record (linear)")
    omit_rate: float = Field(0.0, ge=0, le=1, description="per-record probability that the line is left out")


class TransducerAgent(Agent):
    name = "transducer"

    def __init__(self, params: TransducerParams | None = None):
        self.params = params or TransducerParams()

    def begin_trial(self, context: TrialContext) -> None:
        self._doc, chunks = document_for_task(context.task.path)
        self._bounds = chunk_bounds(len(self._doc.expected), chunks)
        self._records = simulated_records(self._doc, random.Random(context.seed), self.params.error_rate,
                                          self.params.decay, self.params.omit_rate)

    def act(self, observation: Observation) -> Action:
        if observation.turn > 1:
            return Action(task_complete=True)
        first, last = self._bounds[observation.stage_index]
        body = "".join(line + "\n" for line in self._records[first - 1:last] if line is not None)
        redirect = ">" if first == 1 else ">>"
        script = f"cat {redirect} /app/output.txt <<'HRB_EOF'\n{body}HRB_EOF\n"
        return Action(commands=[Command(keystrokes=script)], task_complete=True)
