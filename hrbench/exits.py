"""Exit reasons: the one list of how a trial (or a stage of it) can end, and what each means for the estimate.

Every consumer (the harness, the journal, the analysis, the dense-reward taxonomy, the report, the
data-quality suites, lineage, the CLI) reads this module, so a reason added here is handled
everywhere or fails the exhaustive test (tests/test_exit_reasons.py), never a study step.

Three kinds:

* `passed`: the stage (or, for a natural rollout, every stage) passed.
* `agent_failure`: the agent's own failure; an outcome that enters the estimate as a failure.
* `no_result`: the harness could not produce a result (not the agent's failure). Such an attempt
  is retried (in the same run, up to the study's `retries.max_attempts`; then on the next run);
  a trial whose last attempt had no result is *missing*: left out of q̂ and P̂_obs (the
  estimators use m_used, not m_planned) and counted per cell.
"""

from __future__ import annotations

from enum import Enum
from typing import Literal, get_args


class ExitKind(str, Enum):
    passed = "passed"
    agent_failure = "agent_failure"
    no_result = "no_result"


ExitReason = Literal["passed", "failed", "timeout", "turn_cap", "early_exit", "limit_exceeded", "harness_error",
                     "verifier_error"]

# reason -> (kind, what it means); the sentence is what docs and tables show.
EXIT_REASONS: dict[str, tuple[ExitKind, str]] = {
    "passed": (ExitKind.passed, "the verifier passed the state the agent left"),
    "failed": (ExitKind.agent_failure, "the agent acted and the verifier failed the state it left"),
    "timeout": (ExitKind.agent_failure, "a wall-time or token budget ran out"),
    "turn_cap": (ExitKind.agent_failure, "a turn cap was reached"),
    "early_exit": (ExitKind.agent_failure, "the agent declared the part complete without running a command"),
    "limit_exceeded": (ExitKind.agent_failure,
                       "the agent went past a fixed bound of the harness (a reply too large, a full workspace)"),
    "harness_error": (ExitKind.no_result,
                      "the harness failed (sandbox start or teardown, endpoint, agent program crash): no result"),
    "verifier_error": (ExitKind.no_result, "the verifier left no usable reward (killed, timed out): no result"),
}
if set(EXIT_REASONS) != set(get_args(ExitReason)):  # one list: the Literal and the table must agree
    raise AssertionError(f"exit reasons disagree: {sorted(set(EXIT_REASONS) ^ set(get_args(ExitReason)))}")

ALL_EXIT_REASONS: tuple[str, ...] = tuple(EXIT_REASONS)
NO_RESULT_REASONS: frozenset[str] = frozenset(r for r, (k, _) in EXIT_REASONS.items() if k is ExitKind.no_result)
AGENT_FAILURE_REASONS: frozenset[str] = frozenset(
    r for r, (k, _) in EXIT_REASONS.items() if k is ExitKind.agent_failure)


def exit_kind(reason: str) -> ExitKind:
    """The kind of an exit reason; ValueError naming the known ones for anything else."""
    try:
        return EXIT_REASONS[reason][0]
    except KeyError:
        raise ValueError(f"unknown exit reason {reason!r}; expected one of {', '.join(ALL_EXIT_REASONS)}") from None


def is_missing(reason: str) -> bool:
    """True when a trial that ended so has no result (left out of every estimate, retried on the next run)."""
    return exit_kind(reason) is ExitKind.no_result
