"""Protects crash safety, retries and resume of the trial journal: torn and unreadable lines, attempts
without a result retried in the same run (study `retries`) and kept aside, trials still missing
retried on the next run, no duplicates."""

from __future__ import annotations

import json
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from hrbench.exits import NO_RESULT_REASONS
from hrbench.harness.records import TrialRecord, TrialSpec
from hrbench.harness.journal import JournalError, JournalWarning, TrialJournal, run_trials
from hrbench.protocol import Retries

ONCE = Retries(max_attempts=1)  # no in-run retry: what the next run does


def _spec(i: int) -> TrialSpec:
    return TrialSpec(prereg_sha256="a" * 64, agent="x", condition="baseline", protocol="p", task="t",
                     kind="checkpoint", stage="s", trial_index=i)


def _record(spec: TrialSpec) -> TrialRecord:
    return TrialRecord(**spec.model_dump(), trial_key=spec.key, passed=True, stages_passed=1, stopped_stage="s",
                       turns=1, wall_s=0.0, agent_s=0.0, verifier_s=0.0, exit_reason="passed",
                       stage_outcomes_json="[]")


def test_torn_last_line_is_cut_so_the_next_record_is_kept(tmp_path: Path):
    journal = TrialJournal(tmp_path / "j.jsonl")
    journal.append(_record(_spec(0)))
    with open(journal.path, "a") as fh:
        fh.write(_record(_spec(1)).model_dump_json()[:40])  # a crash mid-write
    with pytest.warns(JournalWarning, match="cut a torn last line"):
        assert set(journal.load()) == {_spec(0).key}
    journal.append(_record(_spec(2)))
    assert set(journal.load()) == {_spec(0).key, _spec(2).key}
    assert all(json.loads(line) for line in journal.path.read_text().splitlines())


def test_infrastructure_failures_are_returned_but_retried_on_resume(tmp_path: Path):
    journal = TrialJournal(tmp_path / "j.jsonl")
    calls: list[int] = []

    def flaky(spec: TrialSpec) -> TrialRecord:
        calls.append(spec.trial_index)
        if spec.trial_index == 1 and calls.count(1) == 1:
            raise OSError("disk hiccup")
        return _record(spec)

    first = run_trials([_spec(i) for i in range(3)], flaky, journal, concurrency=1, progress=False,
                       retries=ONCE)
    assert [r.exit_reason for r in first] == ["passed", "harness_error", "passed"]
    assert "disk hiccup" in first[1].error
    second = run_trials([_spec(i) for i in range(3)], flaky, journal, concurrency=1, progress=False, retries=ONCE)
    assert [r.exit_reason for r in second] == ["passed"] * 3
    assert sorted(calls) == [0, 1, 1, 2]  # only the failed trial ran again
    keys = [json.loads(line)["trial_key"] for line in journal.path.read_text().splitlines()]
    assert len(keys) == len(set(keys)) == 3


def _failed(spec: TrialSpec, error: str = "agent program exited (code 1)") -> TrialRecord:
    return _record(spec).model_copy(update={"passed": False, "exit_reason": "harness_error", "error": error})


def test_returned_harness_errors_are_kept_as_attempts_and_retried_on_the_next_run(tmp_path: Path):
    journal = TrialJournal(tmp_path / "j.jsonl")
    calls: list[int] = []

    def crashes_first_time(spec: TrialSpec) -> TrialRecord:
        calls.append(spec.trial_index)
        return _failed(spec) if calls.count(spec.trial_index) == 1 and spec.trial_index != 0 else _record(spec)

    specs = [_spec(i) for i in range(3)]
    first = run_trials(specs, crashes_first_time, journal, concurrency=2, progress=False, retries=ONCE)
    assert [r.exit_reason for r in first] == ["passed", "harness_error", "harness_error"]
    assert set(journal.load()) == {_spec(0).key}  # a failed attempt is not a result
    second = run_trials(specs, crashes_first_time, TrialJournal(tmp_path / "j.jsonl"), concurrency=2,
                        progress=False, retries=ONCE)
    assert [r.exit_reason for r in second] == ["passed"] * 3
    assert sorted(calls) == [0, 1, 1, 2, 2]
    assert sorted(r.trial_index for r in journal.attempts()) == [1, 2]
    assert all(r.exit_reason == "harness_error" for r in journal.attempts())
    third = run_trials(specs, crashes_first_time, journal, concurrency=2, progress=False, retries=ONCE)
    assert [r.exit_reason for r in third] == ["passed"] * 3 and len(calls) == 5  # nothing left to run


def test_failed_attempts_keep_their_trajectory_under_a_name_of_their_own(tmp_path: Path):
    out = tmp_path / "out"
    journal = TrialJournal(out / "journal" / "j.jsonl", out)
    trajectory = out / "trajectories" / "t" / "0.json.gz"

    def writes_trajectory(spec: TrialSpec) -> TrialRecord:
        trajectory.parent.mkdir(parents=True, exist_ok=True)
        trajectory.write_bytes(b"attempt")
        return _failed(spec).model_copy(update={"trajectory_path": "trajectories/t/0.json.gz"})

    for _ in range(2):
        [row] = run_trials([_spec(0)], writes_trajectory, journal, concurrency=1, progress=False, retries=ONCE)
    assert row.trajectory_path == "trajectories/t/0.attempt-2.json.gz"
    assert [r.trajectory_path for r in journal.attempts()] == [
        "trajectories/t/0.attempt-1.json.gz", "trajectories/t/0.attempt-2.json.gz"]
    assert all((out / r.trajectory_path).read_bytes() == b"attempt" for r in journal.attempts())
    assert not trajectory.exists()  # the retry writes the trial's own name afresh


def _no_result(spec: TrialSpec, reason: str) -> TrialRecord:
    return _record(spec).model_copy(update={"passed": False, "exit_reason": reason, "error": f"{reason}: once"})


@pytest.mark.parametrize("reason", sorted(NO_RESULT_REASONS))
def test_a_transient_failure_is_retried_inside_the_same_run(tmp_path: Path, reason: str):
    journal = TrialJournal(tmp_path / "j.jsonl")
    calls: list[int] = []

    def fails_first_call(spec: TrialSpec) -> TrialRecord:
        calls.append(spec.trial_index)
        return _no_result(spec, reason) if calls.count(spec.trial_index) == 1 else _record(spec)

    specs = [_spec(i) for i in range(3)]
    rows = run_trials(specs, fails_first_call, journal, concurrency=2, progress=False,
                      retries=Retries(backoff_sec=0))
    assert [r.exit_reason for r in rows] == ["passed"] * 3  # one run, nothing missing
    assert sorted(calls) == [0, 0, 1, 1, 2, 2]
    assert all(r.attempts == 2 and [a["exit_reason"] for a in json.loads(r.earlier_attempts_json)] == [reason]
               for r in rows)
    assert sorted(r.trial_index for r in journal.attempts()) == [0, 1, 2]  # every attempt kept, apart
    assert set(journal.load()) == {s.key for s in specs}


@pytest.mark.parametrize("reason", sorted(NO_RESULT_REASONS))
def test_a_trial_still_failing_after_its_attempts_is_missing_and_the_next_run_retries_it(tmp_path: Path,
                                                                                           reason: str):
    journal = TrialJournal(tmp_path / "j.jsonl")
    broken = {"on": True}

    def flaky(spec: TrialSpec) -> TrialRecord:
        return _no_result(spec, reason) if broken["on"] and spec.trial_index == 1 else _record(spec)

    specs = [_spec(i) for i in range(2)]
    first = run_trials(specs, flaky, journal, concurrency=2, progress=False,
                       retries=Retries(max_attempts=3, backoff_sec=0))
    assert [r.exit_reason for r in first] == ["passed", reason]
    assert first[1].attempts == 3 and len(json.loads(first[1].earlier_attempts_json)) == 2
    assert len(journal.attempts()) == 3 and set(journal.load()) == {specs[0].key}
    broken["on"] = False  # the cause went away: the same command again
    second = run_trials(specs, flaky, TrialJournal(tmp_path / "j.jsonl"), concurrency=2, progress=False,
                        retries=Retries(backoff_sec=0))
    assert [r.exit_reason for r in second] == ["passed", "passed"]
    assert second[1].attempts == 4  # three kept from the first run, then this one


def test_a_no_result_reason_not_declared_transient_waits_for_the_next_run(tmp_path: Path):
    calls: list[int] = []

    def verifier_fails_once(spec: TrialSpec) -> TrialRecord:
        calls.append(spec.trial_index)
        return _no_result(spec, "verifier_error") if len(calls) == 1 else _record(spec)

    retries = Retries(transient=["harness_error"], backoff_sec=0)
    [row] = run_trials([_spec(0)], verifier_fails_once, TrialJournal(tmp_path / "j.jsonl"), progress=False,
                       retries=retries)
    assert row.exit_reason == "verifier_error" and calls == [0]
    [row] = run_trials([_spec(0)], verifier_fails_once, TrialJournal(tmp_path / "j.jsonl"), progress=False,
                       retries=retries)
    assert row.exit_reason == "passed" and calls == [0, 0]


def test_retries_declare_only_reasons_without_a_result():
    with pytest.raises(ValueError, match="only exit reasons without a result can be retried"):
        Retries(transient=["failed"])
    assert Retries(max_missing_share=0.05).tolerated(40) == 2 and Retries().tolerated(4) == 0
    assert [Retries(backoff_sec=1.5).backoff(n) for n in (1, 2, 3)] == [1.5, 3.0, 6.0]


def test_harness_error_rows_in_an_old_journal_are_not_results(tmp_path: Path):
    journal = TrialJournal(tmp_path / "j.jsonl")
    journal.append(_failed(_spec(0)))  # journaled by an hrbench that did not retry
    journal.append(_record(_spec(1)))
    assert set(journal.load()) == {_spec(1).key}
    rows = run_trials([_spec(0), _spec(1)], _record, journal, concurrency=1, progress=False)
    assert [r.exit_reason for r in rows] == ["passed", "passed"]


def test_unreadable_lines_are_reported_with_their_line_numbers(tmp_path: Path):
    journal = TrialJournal(tmp_path / "j.jsonl")
    good = [_record(_spec(i)).model_dump_json().encode() for i in range(3)]
    journal.path.write_bytes(b"\n".join([good[0], b"not json", b"\xff\xfe\x00binary", good[1],
                                         b'{"trial_key": "x"}', good[2]]) + b"\n")
    with pytest.warns(JournalWarning) as caught:
        records = journal.load()
    assert set(records) == {_spec(i).key for i in range(3)}
    assert journal.skipped_lines == [2, 3, 5]
    message = str(caught[0].message)
    assert message.startswith(f"{journal.path}: skipped unreadable line(s) 2-3, 5 (not trial records: ")
    assert journal.path.read_bytes().count(b"\n") == 6  # reported, not deleted


def test_a_whole_last_record_without_its_newline_is_kept(tmp_path: Path):
    journal = TrialJournal(tmp_path / "j.jsonl")
    journal.path.write_text(_record(_spec(0)).model_dump_json())
    assert set(journal.load()) == {_spec(0).key}
    journal.append(_record(_spec(1)))
    assert set(journal.load()) == {_spec(0).key, _spec(1).key}


def test_a_journal_path_that_is_a_directory_is_one_clear_error(tmp_path: Path):
    (tmp_path / "j.jsonl").mkdir()
    with pytest.raises(JournalError, match=r"j\.jsonl: the trial journal is a directory, not a file; move it away"):
        run_trials([_spec(0)], _record, TrialJournal(tmp_path / "j.jsonl"), progress=False)


def test_calls_side_by_side_share_one_bound_of_running_trials_through_slots(tmp_path: Path):
    # Two partitions run at once, each with a pool of 3; the study's bound is 3 trials in all.
    slots = threading.BoundedSemaphore(3)
    running, peak, lock = [0], [0], threading.Lock()

    def trial(spec: TrialSpec) -> TrialRecord:
        with lock:
            running[0] += 1
            peak[0] = max(peak[0], running[0])
        time.sleep(0.05)
        with lock:
            running[0] -= 1
        return _record(spec)

    def partition(name: str) -> list[TrialRecord]:
        return run_trials([_spec(i) for i in range(6)], trial, TrialJournal(tmp_path / f"{name}.jsonl"),
                          concurrency=3, progress=False, slots=slots)

    with ThreadPoolExecutor(max_workers=2) as pool:
        results = list(pool.map(partition, ["a", "b"]))
    assert [len(r) for r in results] == [6, 6] and all(r.exit_reason == "passed" for rs in results for r in rs)
    assert peak[0] == 3  # without the shared slots the two pools reach 6
