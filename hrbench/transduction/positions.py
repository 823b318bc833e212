"""Per-record scores of transduction trials, read from what their verifiers kept (reward.json).

A transduction stage's verifier writes one Harbor sub-reward per output line of its chunk,
``line_0007 = 1`` when output line 7 equals expected line 7 (``packages._TEST_SH``); the harness
keeps every sub-reward in the trial row (``rewards_json``). This module turns those rows back into
per-record flags and pools them by relative output position, so the report's accuracy-by-position
curve comes from the trials themselves.

A record is scored by the verifier of the stage whose chunk holds it. A natural rollout stops at
its first failed stage, so the records of stages it never reached have no score: they are left
out of the counts (n), not counted wrong. Intervals are Wilson intervals over the pooled records
of a bin, as in :func:`hrbench.transduction.scoring.accuracy_by_position`.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Sequence

import pandas as pd

from hrbench.stats.intervals import wilson_interval
from hrbench.tasks.model import Task
from hrbench.transduction.packages import document_for_task

LINE_KEY = re.compile(r"^line_(\d{4,})$")  # the sub-reward name of one output line's score
RECORD_COLUMNS = ["agent", "condition", "kind", "task", "trial_index", "stage", "line", "n_lines", "correct"]


def is_transduction_task(task: Task) -> bool:
    """A task package written by :mod:`hrbench.transduction.packages` (it carries its document's parameters)."""
    try:
        document_for_task(task.path)
    except (ValueError, OSError):
        return False
    return True


def record_scores(trials: pd.DataFrame, tasks: Sequence[Task]) -> pd.DataFrame:
    """One row per scored output line of every transduction trial among `trials` (trial-table rows).

    Columns: agent, condition, kind, task, trial_index, stage, line (1-based), n_lines (the
    document's output lines), correct (bool). Trials of other tasks, and rows without sub-rewards,
    give no row.
    """
    lengths = {t.name: len(document_for_task(t.path)[0].expected) for t in tasks if is_transduction_task(t)}
    rows = []
    if not len(trials) or "rewards_json" not in trials:
        return pd.DataFrame(columns=RECORD_COLUMNS)
    for trial in trials[trials["task"].isin(lengths)].itertuples(index=False):
        for stage, rewards in json.loads(trial.rewards_json or "{}").items():
            for key, value in rewards.items():
                match = LINE_KEY.match(key)
                if match:
                    rows.append({"agent": trial.agent, "condition": trial.condition, "kind": trial.kind,
                                 "task": trial.task, "trial_index": trial.trial_index, "stage": stage,
                                 "line": int(match.group(1)), "n_lines": lengths[trial.task],
                                 "correct": value >= 1.0})
    return pd.DataFrame(rows, columns=RECORD_COLUMNS)


def position_table(records: pd.DataFrame, bins: int = 4, level: float = 0.95) -> pd.DataFrame:
    """Accuracy by relative output position per agent: line i of n goes to bin floor(bins·(i−1)/n).

    Columns as the report's position figure reads them: agent, bin_low, bin_high, k, n, accuracy,
    ci_low, ci_high, unit ("record"); a bin without a scored record has n = 0 and no accuracy.
    """
    if bins < 1:
        raise ValueError(f"bins must be >= 1, got {bins}")
    if not len(records):
        return pd.DataFrame()
    binned = records.assign(_bin=((records["line"] - 1) * bins // records["n_lines"]).clip(0, bins - 1))
    rows = []
    for agent, group in binned.groupby("agent", sort=False):
        for b in range(bins):
            flags = group.loc[group["_bin"] == b, "correct"]
            k, n = int(flags.sum()), len(flags)
            low, high = wilson_interval(k, n, level)
            rows.append({"agent": agent, "bin_low": b / bins, "bin_high": (b + 1) / bins, "k": k, "n": n,
                         "accuracy": k / n if n else math.nan, "ci_low": low, "ci_high": high, "unit": "record"})
    return pd.DataFrame(rows)
