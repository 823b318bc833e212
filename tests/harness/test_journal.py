"""Protects crash safety of the trial journal: torn lines, infrastructure failures, no duplicates."""

from __future__ import annotations

import json
from pathlib import Path

from hrbench.harness.records import TrialRecord, TrialSpec
from hrbench.harness.journal import TrialJournal, run_trials


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

    first = run_trials([_spec(i) for i in range(3)], flaky, journal, concurrency=1, progress=False)
    assert [r.exit_reason for r in first] == ["passed", "harness_error", "passed"]
    assert "disk hiccup" in first[1].error
    second = run_trials([_spec(i) for i in range(3)], flaky, journal, concurrency=1, progress=False)
    assert [r.exit_reason for r in second] == ["passed"] * 3
    assert sorted(calls) == [0, 1, 1, 2]  # only the failed trial ran again
    keys = [json.loads(line)["trial_key"] for line in journal.path.read_text().splitlines()]
    assert len(keys) == len(set(keys)) == 3
