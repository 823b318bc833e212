"""Protects the depth measurement: Appendix B's run order on scripted pass/fail sequences, the
second-model rule, and D on the calibration tasks for agents of declared batching ability."""

from __future__ import annotations

from collections import defaultdict, deque
from pathlib import Path

import pytest

from hrbench.structure.batching import plan_turns, split_steps
from hrbench.structure.depth import (
    CAPS,
    RunResult,
    estimate_depth,
    measure_first_model,
    measure_later_model,
)
from hrbench.tasks.loader import load_task

REGISTRY = Path(__file__).resolve().parents[2] / "task_registry"


class Scripted:
    """run(cap) answering from per-cap queues of (passed, turns); records the order of calls."""

    def __init__(self, script: dict[int | None, list[tuple[bool, int]]]):
        self.queues = defaultdict(deque, {cap: deque(v) for cap, v in script.items()})
        self.calls: list[int | None] = []

    def __call__(self, cap: int | None) -> RunResult:
        self.calls.append(cap)
        if not self.queues[cap]:
            raise AssertionError(f"the protocol made a run at cap {cap} that the script did not expect")
        passed, turns = self.queues[cap].popleft()
        return RunResult(passed=passed, turns=turns)


F, P = (False, 1), (True, 1)


def test_caps_are_the_papers():
    assert CAPS == (1, 2, 3, 5, 10, 20, 40, 80)


def test_two_uncapped_runs_then_lower_caps_in_order_until_the_first_pass():
    run = Scripted({None: [(True, 7), (True, 4)], 1: [F, F], 2: [F, P]})
    m = measure_first_model("a", run)
    assert run.calls == [None, None, 1, 1, 2, 2]
    assert (m.status, m.estimate, m.fewest_passing_turns) == ("estimate", 2, 4)
    assert [r.cap for r in m.runs] == run.calls


def test_second_run_at_a_cap_is_skipped_once_the_first_passes():
    run = Scripted({None: [(True, 9), (False, 30)], 1: [F, F], 2: [F, F], 3: [P]})
    m = measure_first_model("a", run)
    assert run.calls == [None, None, 1, 1, 2, 2, 3]
    assert m.estimate == 3 and m.fewest_passing_turns == 9


def test_caps_at_or_above_the_fewest_passing_turns_count_as_passed_without_running():
    # N = 4: caps 1, 2, 3 are tried; none passes, so D is the smallest cap >= 4 (5), never run
    run = Scripted({None: [(True, 4), (True, 6)], 1: [F, F], 2: [F, F], 3: [F, F]})
    m = measure_first_model("a", run)
    assert run.calls == [None, None, 1, 1, 2, 2, 3, 3]
    assert m.estimate == 5


def test_fewest_turns_equal_to_a_cap_gives_that_cap():
    run = Scripted({None: [(True, 5), (True, 5)], 1: [F, F], 2: [F, F], 3: [F, F]})
    assert measure_first_model("a", run).estimate == 5 and 5 not in run.calls


def test_one_turn_pass_needs_no_capped_run():
    run = Scripted({None: [(True, 1), (True, 3)]})
    m = measure_first_model("a", run)
    assert run.calls == [None, None] and m.estimate == 1


def test_only_uncapped_pass_beyond_the_largest_cap_is_above_the_largest_cap():
    run = Scripted({None: [(False, 150), (True, 120)], **{c: [F, F] for c in CAPS}})
    m = measure_first_model("a", run)
    assert run.calls == [None, None] + [c for c in CAPS for _ in (0, 1)]
    assert (m.status, m.estimate, m.fewest_passing_turns) == ("above_largest_cap", None, 120)


def test_never_passing_without_a_cap_gives_no_estimate_and_no_capped_runs():
    run = Scripted({None: [(False, 150), (False, 12)]})
    m = measure_first_model("a", run)
    assert run.calls == [None, None] and (m.status, m.estimate) == ("no_estimate", None)


def test_second_model_runs_only_below_the_first_estimate_and_never_uncapped():
    first = Scripted({None: [(True, 12), (True, 14)], **{c: [F, F] for c in (1, 2, 3, 5, 10)}})
    second = Scripted({1: [F, F], 2: [F, F], 3: [F, P]})
    d = estimate_depth([("a", first), ("b", second)])
    assert d.models[0].estimate == 20
    assert second.calls == [1, 1, 2, 2, 3, 3]
    assert (d.status, d.depth, d.n_turns) == ("estimate", 3, 12)


def test_second_model_that_never_passes_below_leaves_the_first_estimate():
    first = Scripted({None: [(True, 4), (True, 4)], 1: [F, F], 2: [F, P]})
    second = Scripted({1: [F, F]})
    d = estimate_depth([("a", first), ("b", second)])
    assert second.calls == [1, 1] and d.depth == 2
    assert d.models[1].status == "no_estimate"


def test_second_model_is_not_run_when_d_is_one_or_the_first_model_never_passes():
    second = Scripted({})
    d = estimate_depth([("a", Scripted({None: [(True, 1), (True, 1)]})), ("b", second)])
    assert d.depth == 1 and second.calls == [] and d.models[1].status == "not_run"
    d = estimate_depth([("a", Scripted({None: [F, F]})), ("b", second)])
    assert d.status == "no_estimate" and d.depth is None and second.calls == []


def test_second_model_tries_every_cap_when_the_first_is_above_the_largest_cap():
    first = Scripted({None: [(True, 99), F], **{c: [F, F] for c in CAPS}})
    second = Scripted({1: [F, F], 2: [F, F], 3: [F, F], 5: [F, F], 10: [F, F], 20: [F, F], 40: [P]})
    d = estimate_depth([("a", first), ("b", second)])
    assert second.calls[-1] == 40 and None not in second.calls
    assert (d.status, d.depth) == ("estimate", 40)
    everyone_fails = Scripted({c: [F, F] for c in CAPS})
    d = estimate_depth([("a", Scripted({None: [(True, 99), F], **{c: [F, F] for c in CAPS}})),
                        ("b", everyone_fails)])
    assert d.status == "above_largest_cap" and d.depth is None


def test_later_model_is_not_run_without_a_cap_below_the_bound():
    assert measure_later_model("b", Scripted({}), below=1).status == "not_run"


@pytest.mark.parametrize("caps", [(), (2, 1), (1, 1, 2), (0, 1)])
def test_bad_cap_sets_are_refused(caps):
    with pytest.raises(ValueError, match="caps must be"):
        measure_first_model("a", Scripted({}), caps=caps)


def batching_runner(task_dir: str, steps_per_turn: int | None):
    """A scripted agent of declared batching ability on a real calibration solution: it passes under
    cap T exactly when its plan of turns (steps merged per turn, split before reads-output) fits in T."""
    stage = load_task(REGISTRY / task_dir).stages[0]
    needed = len(plan_turns(split_steps(stage.solution_script()), steps_per_turn))

    def run(cap: int | None) -> RunResult:
        return RunResult(passed=cap is None or needed <= cap, turns=needed if cap is None else min(needed, cap))
    return run


@pytest.mark.parametrize("task_dir, free, one_per_turn", [
    ("calib-parallel", 1, 10), ("calib-static-chain", 1, 10), ("calib-encrypted-chain", 10, 10)])
def test_calibration_depth_comes_out_as_constructed(task_dir, free, one_per_turn):
    d_free = estimate_depth([("free", batching_runner(task_dir, None))])
    d_one = estimate_depth([("one", batching_runner(task_dir, 1))])
    assert d_free.depth == free and d_free.depth <= (3 if free == 1 else 10)
    assert d_one.depth == one_per_turn
    # two steps per turn halves the chains that allow merging, never the encrypted one
    d_two = estimate_depth([("two", batching_runner(task_dir, 2))])
    assert d_two.depth == (5 if task_dir != "calib-encrypted-chain" else 10)


def test_a_batching_second_model_lowers_d_found_by_a_stepwise_first_model():
    d = estimate_depth([("one", batching_runner("calib-static-chain", 1)),
                        ("free", batching_runner("calib-static-chain", None))])
    assert d.models[0].estimate == 10 and d.depth == 1
    assert [r.cap for r in d.models[1].runs] == [1]


def test_steps_split_at_markers_with_the_preamble_in_the_first_step():
    from hrbench.structure.batching import SolutionStep
    script = "cd /app\n# hrbench:step\na\n# hrbench:step reads-output\nb\n# hrbench:step\nc\n"
    assert split_steps(script) == [SolutionStep(script="cd /app\na\n"), SolutionStep(script="b\n", reads_output=True),
                                   SolutionStep(script="c\n")]
    assert plan_turns(split_steps(script), None) == ["cd /app\na\n", "b\nc\n"]
    assert plan_turns(split_steps(script), 1) == ["cd /app\na\n", "b\n", "c\n"]
    assert plan_turns(split_steps("x\ny\n"), 1) == ["x\ny\n"]  # no markers: one step


def test_bad_step_markers_and_batch_sizes_are_refused():
    with pytest.raises(ValueError, match=r"solve.sh:2: unknown step option 'later'"):
        split_steps("a\n# hrbench:step later\nb\n")
    with pytest.raises(ValueError, match="steps_per_turn must be >= 1"):
        plan_turns(split_steps("a\n"), 0)
