"""Simulated agents with known truth (DESIGN §5).

A sim agent acts in the real sandbox: to succeed at a stage it runs the reference
solution (as Harbor's oracle does: solve.sh from /solution, helpers beside it), to fail
it runs the solution with the key step removed, so the real verifier judges it.
Whether it succeeds is drawn from its declared model:

    p = skill_t * exp(-context_rot * h) * exp(-defect_penalty * D)

h = stage boundaries in the history the harness shows it (compacted boundaries
count `compaction_retention` each); D = latent defects present in the workspace,
which the agent finds by looking (its first turn). A passed stage leaves a defect
with probability `defect_rate`; state repair removes them with everything else.
Because every ingredient is declared, `sim_truth` gives q_i, r_i, P_expected,
P_observed and Gamma_H in closed form for any protocol.

With a declared batching ability (`steps_per_turn`) the chosen script is typed in the turns of
`structure.batching.plan_turns` (at most that many marked steps per turn, a new turn at every
`reads-output` step), so depth by turn caps sees it; success is still drawn once per stage, so
the truth is unchanged. Without markers, or with `steps_per_turn` unset, it is one turn.
"""

from __future__ import annotations

import functools
import hashlib
import math

import numpy as np
from pydantic import BaseModel

from hrbench.agents.base import Action, Agent, Command, Observation, TrialContext
from hrbench.harness.history import canonical_policy, summary_covers
from hrbench.agents.specs import SimParams
from hrbench.protocol import CheckpointProtocol, Condition, StatePolicy
from hrbench.structure.batching import plan_turns, split_steps
from hrbench.tasks.model import Task

DEFECT_FILE = ".hrbench-sim-defects"
_PROBE = f"cat {DEFECT_FILE} 2>/dev/null | wc -l"
_BATCH_WAIT_S = 30.0  # a batch of steps may run longer than one command: let a shell terminal wait for it


def task_skill(params: SimParams, task_name: str) -> float:
    """skill_t = skill - spread * u_t, with u_t in [0, 1) fixed by the task name."""
    u = int(hashlib.sha256(task_name.encode()).hexdigest()[:8], 16) / 16**8
    return params.skill - params.skill_spread * u


class SimAgent(Agent):
    name = "sim"

    def __init__(self, params: SimParams):
        self.params = params

    def begin_trial(self, context: TrialContext) -> None:
        self._task = context.task
        self._rng = np.random.default_rng(context.seed)
        self._skill = task_skill(self.params, context.task.name)

    def act(self, observation: Observation) -> Action:
        # An agent whose success does not depend on state has no reason to look at it first.
        looks = self.params.defect_penalty > 0
        if looks and observation.turn == 1:
            return Action(analysis="look for leftovers of earlier work", commands=[Command(keystrokes=_PROBE)])
        decide = 2 if looks else 1  # the turn at which success is drawn and the first batch is sent
        if observation.turn > decide:
            return self._next_batch(observation.turn - decide)
        defects = _last_int(observation.messages[-1].content) if looks else 0
        h = observation.visible_boundaries + self.params.compaction_retention * _compacted_boundaries(observation)
        p = self._skill * math.exp(-self.params.context_rot * h - self.params.defect_penalty * defects)
        # Both draws happen every stage so the random stream does not depend on outcomes.
        succeed = self._rng.random() < p
        leave_defect = self._rng.random() < self.params.defect_rate
        stage = self._task.stage(observation.stage)
        script = stage.solution_script() if succeed else stage.solution_without_key_step()
        if succeed and leave_defect:
            script += f"\necho {stage.name} >> {DEFECT_FILE}\n"
        spt = self.params.steps_per_turn
        self._plan = [script] if spt is None else plan_turns(split_steps(script, str(stage.solution)), spt)
        return Action(
            analysis=f"p={p:.4f} h={h:g} defects={defects}" + ("" if spt is None else f" turns={len(self._plan)}"),
            commands=[Command(keystrokes=self._plan[0], solution=True,
                              **({} if spt is None else {"duration": _BATCH_WAIT_S}))],
            task_complete=len(self._plan) == 1,
        )

    def _next_batch(self, index: int) -> Action:
        """Batch `index` of the stage's plan (the plan was fixed when success was drawn)."""
        if index >= len(self._plan):
            return Action(task_complete=True)
        return Action(analysis=f"batch {index + 1} of {len(self._plan)}",
                      commands=[Command(keystrokes=self._plan[index], duration=_BATCH_WAIT_S, solution=True)],
                      task_complete=index == len(self._plan) - 1)


def _last_int(text: str) -> int:
    for token in reversed(text.split()):
        if token.isdigit():
            return int(token)
    return 0


def _compacted_boundaries(observation: Observation) -> int:
    return sum(summary_covers(m) for m in observation.messages)


class SimTruth(BaseModel):
    """Closed-form truth of one sim agent on one task under one condition."""

    task: str
    condition: str
    q: list[float]
    r: list[float]
    p_expected: float
    p_observed: float
    gamma: float


def _history_weight(policy: str, retention: float) -> float:
    """How much each earlier boundary counts in visible history h."""
    return {"full": 1.0, "matched": 1.0, "reset": 0.0, "compact": retention}[canonical_policy(policy)]


def conditioned_defects(params: SimParams, first: int, length: int = 1) -> float:
    """E[exp(-kappa * length * D)] over the defects D the agent's own state after passing parts 1..first holds.

    A solution-conditioned checkpoint starts from the state a prefix rollout (full history, own
    state) left after passing stages 0..first-1. Stage j leaves a defect B_j ~ Bernoulli(delta) when
    it passes, and that defect multiplies each of the first-1-j later prefix stages by e^{-kappa}:
    given that all of them passed, the B_j are independent with
    P(B_j = 1 | passed) = delta e^{-kappa(first-1-j)} / (1 - delta + delta e^{-kappa(first-1-j)})
    (selection on passing: the passing prefixes hold fewer defects than unconditioned ones). Every
    one of a segment's `length` stages meets all D of them, hence kappa * length.
    """
    delta, kappa = params.defect_rate, params.defect_penalty
    factor = 1.0
    for j in range(first):
        weight = delta * math.exp(-kappa * (first - 1 - j))
        present = weight / (1 - delta + weight)
        factor *= 1 - present + present * math.exp(-kappa * length)
    return factor


def sim_truth(params: SimParams, task: Task, condition: Condition, checkpoint: CheckpointProtocol) -> SimTruth:
    """q_i from the checkpoint protocol; r_i from the natural rollout.

    Oracle state holds no defects; a solution-conditioned state holds the agent's own
    (`conditioned_defects`), so q_i = min(1, skill e^{-lambda w i}) E[e^{-kappa D_i} | parts 1..i passed].

    P(stages 1..i pass) = prod_k p_k e^{-lambda h_k} * prod_{j<i} (1 - delta + delta e^{-kappa (i-j)})
    under own state, because a defect left at stage j lowers each of the i-j later stages.
    """
    q, r, p_exp, p_obs = _truth_at_skill(params, task_skill(params, task.name), task.n_stages, condition, checkpoint)
    return SimTruth(task=task.name, condition=condition.name, q=q, r=r, p_expected=p_exp, p_observed=p_obs,
                    gamma=math.log(p_exp / p_obs))


def _truth_at_skill(params: SimParams, skill: float, n: int, condition: Condition,
                    checkpoint: CheckpointProtocol) -> tuple[list[float], list[float], float, float]:
    """(q, r, P_expected, P_observed) of an n-stage task at this skill (sim_truth's formula)."""
    lam, delta, kappa = params.context_rot, params.defect_rate, params.defect_penalty
    w_ck = _history_weight(checkpoint.history, params.compaction_retention)
    q = [min(1.0, skill * math.exp(-lam * w_ck * i)) for i in range(n)]
    if checkpoint.state == "solution_conditioned":
        q = [qi * conditioned_defects(params, i) for i, qi in enumerate(q)]
    w_nat = _history_weight(condition.history.value, params.compaction_retention)
    p_nat = [min(1.0, skill * math.exp(-lam * w_nat * k)) for k in range(n)]
    own = condition.state is StatePolicy.own

    def survive(i: int) -> float:  # P(first i stages pass) in the natural rollout
        prob = math.prod(p_nat[:i])
        if own:
            for j in range(1, i):
                prob *= 1 - delta + delta * math.exp(-kappa * (i - j))
        return prob

    cumulative = [survive(i) for i in range(n + 1)]
    r = [cumulative[i + 1] / cumulative[i] for i in range(n)]
    return q, r, math.prod(q), cumulative[n]


def segment_truth(params: SimParams, task: Task, indices: list[int], checkpoint: CheckpointProtocol) -> float:
    """P(a merged checkpoint segment passes): its stages in order from the protocol's state before the first
    (oracle, or the agent's own passing one), starting with the protocol's history, history kept and own
    state inside the segment."""
    skill = task_skill(params, task.name)
    lam, delta, kappa = params.context_rot, params.defect_rate, params.defect_penalty
    w_ck = _history_weight(checkpoint.history, params.compaction_retention)
    first, length = indices[0], len(indices)
    prob = math.prod(min(1.0, skill * math.exp(-lam * (w_ck * first + n))) for n in range(length))
    for j in range(1, length):  # a defect left inside the segment lowers its later stages
        prob *= 1 - delta + delta * math.exp(-kappa * (length - j))
    if checkpoint.state == "solution_conditioned":
        prob *= conditioned_defects(params, first, length)
    return prob


def population_truth(
    params: SimParams, task: Task, condition: Condition, checkpoint: CheckpointProtocol, nodes: int = 200
) -> tuple[float, float]:
    """(E_u P_expected, E_u P_observed) over the task distribution the agent declares.

    A sim agent's tasks differ only through skill_t = skill − spread·u_t (u_t is a hash of the
    task name, uniform on [0, 1)); a *population* of tasks of this one's structure has
    u ~ U[0, 1). The tasks-sampled estimand of a family averages these over its tasks'
    structures. Midpoint rule over u (the min(1, ·) in q_i only has a kink, so 200 nodes give
    ~1e-5 relative accuracy). Without spread it is the fixed-task truth exactly.
    """
    if params.skill_spread == 0:
        t = sim_truth(params, task, condition, checkpoint)
        return t.p_expected, t.p_observed
    return _population_truth(params, task.n_stages, condition, checkpoint, nodes)


@functools.lru_cache(maxsize=4096)  # every residual row of every table asks again; all arguments are frozen
def _population_truth(params: SimParams, n: int, condition: Condition, checkpoint: CheckpointProtocol,
                      nodes: int) -> tuple[float, float]:
    truths = [_truth_at_skill(params, params.skill - params.skill_spread * (i + 0.5) / nodes, n, condition,
                              checkpoint) for i in range(nodes)]
    return float(np.mean([t[2] for t in truths])), float(np.mean([t[3] for t in truths]))
