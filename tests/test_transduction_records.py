"""Protects per-record transduction scores from real trials: checks.sh's `subreward` writes Harbor
sub-rewards into reward.json (and refuses bad ones), a transduction stage's verifier scores each line of
its chunk, the harness keeps those scores in the trial row, and the position table pools them."""

from __future__ import annotations

import json
import subprocess
import textwrap
from pathlib import Path

import pandas as pd
import pytest

from hrbench.agents.base import Action, Agent, Command, Observation, TrialContext
from hrbench.envs.base import CHECK_LIBRARY
from hrbench.envs.local import LocalBackend
from hrbench.harness.records import TrialSpec, records_table
from hrbench.harness.trials import run_checkpoint_trial, run_natural_trial
from hrbench.protocol import CONDITIONS, Budget, CheckpointProtocol
from hrbench.tasks.harbor import parse_reward_json, primary_reward
from hrbench.tasks.loader import load_task
from hrbench.transduction.packages import document_for_task
from hrbench.transduction.positions import position_table, record_scores

TASK = Path(__file__).resolve().parent.parent / "task_registry" / "lt-arith-orderedids-d1-n12-s0-k2"


def _verify(tmp_path: Path, body: str) -> tuple[str, dict[str, str]]:
    logs = tmp_path / "logs"
    script = tmp_path / "test.sh"
    script.write_text(f"source {CHECK_LIBRARY}\n" + textwrap.dedent(body) + "finish\n")
    done = subprocess.run(["bash", str(script)], check=False, cwd=tmp_path, capture_output=True, text=True, timeout=60,
                          env={"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), "TMPDIR": str(tmp_path),
                               "HRBENCH_LOGS": str(logs)})
    folder = logs / "verifier"
    return done.stdout, {p.name: p.read_text() for p in folder.iterdir()} if folder.is_dir() else {}


# -- checks.sh: subreward ----------------------------------------------------------------------------


def test_subrewards_go_to_reward_json_beside_the_reward(tmp_path: Path):
    _, files = _verify(tmp_path, """
        pass a
        subreward line_0001 1
        ( subreward line_0002 0 )
        subreward line_0001 0.5
    """)
    assert set(files) == {"reward.json"}  # reward.json only: a reward.txt would take precedence
    rewards = parse_reward_json(json.loads(files["reward.json"]))
    assert rewards == {"reward": 1.0, "line_0001": 0.5, "line_0002": 0.0}  # the later value wins, subshells count
    assert primary_reward(rewards) == 1.0


def test_without_subrewards_finish_still_writes_reward_txt(tmp_path: Path):
    _, files = _verify(tmp_path, "pass a\n")
    assert files == {"reward.txt": "1\n"}


@pytest.mark.parametrize("call", ["subreward reward 1", "subreward 'bad name' 1", 'subreward "x\\"y" 1',
                                  "subreward x .5", "subreward x 2", "subreward x -0", "subreward x 1e0",
                                  "subreward x ''", "subreward x 0.5,"])
def test_a_bad_subreward_is_a_failed_check_and_is_not_written(tmp_path: Path, call: str):
    out, files = _verify(tmp_path, f"pass a\nsubreward ok 1\n{call}\n")
    data = json.loads(files["reward.json"])
    assert data == {"reward": 0, "ok": 1}, (out, data)
    assert "FAIL subreward_" in out


def test_a_reward_json_planted_during_the_checks_does_not_survive(tmp_path: Path):
    _, files = _verify(tmp_path, """
        pass a
        printf '{"reward": 1, "line_0001": 1, "forged": 1}' > "$HRBENCH_LOGS/verifier/reward.json"
        subreward line_0001 0
        fail b "really failed"
    """)
    assert json.loads(files["reward.json"]) == {"reward": 0, "line_0001": 0}


# -- a transduction verifier in the real harness ------------------------------------------------------


class _Writer(Agent):
    """Writes the expected lines of the stage's chunk, with some lines replaced or dropped."""

    name = "writer"

    def __init__(self, wrong: set[int] = frozenset(), dropped: set[int] = frozenset()):
        self.wrong, self.dropped = wrong, dropped

    def begin_trial(self, context: TrialContext) -> None:
        self.doc, _ = document_for_task(context.task.path)

    def act(self, observation: Observation) -> Action:
        if observation.turn > 1:
            return Action(task_complete=True)
        first, last = (1, 6) if observation.stage_index == 0 else (7, 12)
        lines = [(f"[{i}]999999" if i in self.wrong else self.doc.expected[i - 1])
                 for i in range(first, last + 1) if i not in self.dropped]
        body = "".join(f"  {line}  \n\n" for line in lines)  # blanks around and between lines are ignored
        redirect = ">" if first == 1 else ">>"
        return Action(commands=[Command(keystrokes=f"cat {redirect} /app/output.txt <<'EOF'\n{body}EOF\n")],
                      task_complete=True)


def _spec(kind: str, stage: str | None, index: int = 0) -> TrialSpec:
    return TrialSpec(prereg_sha256="3" * 64, agent="writer", condition="baseline", protocol="p", task=TASK.name,
                     kind=kind, stage=stage, trial_index=index)


def test_the_verifier_scores_every_line_of_its_chunk_and_the_row_keeps_them(tmp_path: Path):
    task, backend = load_task(TASK), LocalBackend(tmp_path / "cache")
    record = run_checkpoint_trial(_spec("checkpoint", "part2"), task, _Writer(wrong={8}), backend,
                                  CheckpointProtocol(budget=Budget(max_turns=2, timeout_sec=30)), seed=1,
                                  trajectory_dir=tmp_path / "traj")
    assert not record.passed
    kept = json.loads(record.rewards_json)["part2"]
    assert kept == {"reward": 0.0, **{f"line_{i:04d}": float(i != 8) for i in range(7, 13)}}
    row = records_table([record]).iloc[0]
    assert row["reward.part2.line_0008"] == 0.0 and row["reward.part2.line_0009"] == 1.0


def test_a_dropped_line_shifts_every_later_position(tmp_path: Path):
    task, backend = load_task(TASK), LocalBackend(tmp_path / "cache")
    record = run_natural_trial(_spec("natural", None), task, _Writer(dropped={3}), backend, CONDITIONS["baseline"],
                               Budget(max_turns=2, timeout_sec=30), seed=1, trajectory_dir=tmp_path / "traj")
    kept = json.loads(record.rewards_json)
    assert record.stopped_stage == "part1" and set(kept) == {"part1"}  # part2 never ran: no scores for it
    assert kept["part1"] == {"reward": 0.0, "line_0001": 1.0, "line_0002": 1.0, "line_0003": 0.0,
                             "line_0004": 0.0, "line_0005": 0.0, "line_0006": 0.0}
    scores = record_scores(records_table([record]), [task])
    assert list(scores["line"]) == [1, 2, 3, 4, 5, 6] and list(scores["correct"]) == [True, True] + [False] * 4
    table = position_table(scores, bins=4)  # lines 1-3 | 4-6 | 7-9 | 10-12 of n = 12
    assert list(table["k"]) == [2, 0, 0, 0] and list(table["n"]) == [3, 3, 0, 0]
    assert table["accuracy"].iloc[0] == pytest.approx(2 / 3) and pd.isna(table["accuracy"].iloc[2])


def test_position_table_pools_records_by_relative_position():
    tasks = [load_task(TASK)]
    rewards = {"part1": {"reward": 1.0, **{f"line_{i:04d}": 1.0 for i in range(1, 7)}},
               "part2": {"reward": 0.0, **{f"line_{i:04d}": float(i < 10) for i in range(7, 13)}}}
    rows = pd.DataFrame([{"agent": a, "condition": "baseline", "kind": "natural", "task": TASK.name, "trial_index": 0,
                          "rewards_json": json.dumps(rewards)} for a in ("a", "b")]
                        + [{"agent": "a", "condition": "baseline", "kind": "natural", "task": "other-task",
                            "trial_index": 0, "rewards_json": json.dumps(rewards)}])
    scores = record_scores(rows, tasks)
    assert len(scores) == 24 and set(scores["task"]) == {TASK.name}  # the task not given is not scored
    table = position_table(scores, bins=2)
    a = table[table["agent"] == "a"]
    assert list(a["k"]) == [6, 3] and list(a["n"]) == [6, 6]
    assert list(a["bin_low"]) == [0.0, 0.5] and a["ci_high"].iloc[1] < 1.0


def _checkpoint_scores(tmp_path: Path, params, trials: int) -> pd.DataFrame:
    from hrbench.transduction.agent import TransducerAgent

    task, backend = load_task(TASK), LocalBackend(tmp_path / "cache")
    protocol = CheckpointProtocol(budget=Budget(max_turns=2, timeout_sec=30))
    records = [run_checkpoint_trial(_spec("checkpoint", stage, i), task, TransducerAgent(params), backend, protocol,
                                    seed=17, trajectory_dir=tmp_path / "traj")
               for stage in ("part1", "part2") for i in range(trials)]
    return record_scores(records_table(records), [task])


@pytest.mark.slow
def test_real_trial_scores_recover_a_flat_error_rate_and_show_a_decay(tmp_path: Path):
    from hrbench.stats.intervals import wilson_interval
    from hrbench.transduction.agent import TransducerParams

    flat = _checkpoint_scores(tmp_path / "flat", TransducerParams(error_rate=0.15), 25)
    assert len(flat) == 25 * 12
    wrong = int((~flat["correct"]).sum())
    low, high = wilson_interval(wrong, len(flat))
    assert low <= 0.15 <= high
    table = position_table(flat, bins=2)  # flat: both halves' intervals hold the declared accuracy
    assert all(lo <= 0.85 <= hi for lo, hi in zip(table["ci_low"], table["ci_high"]))

    decay = position_table(_checkpoint_scores(tmp_path / "decay", TransducerParams(decay=0.8), 25), bins=2)
    first, last = decay.iloc[0], decay.iloc[1]  # e(i) = 0.8 i / 11: mean accuracy 0.84 then 0.38
    assert last["ci_high"] < first["ci_low"]
