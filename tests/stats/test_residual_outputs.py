"""Protects how the residual table reaches a reader (issue 8): summary.json keeps ±∞ apart from
undefined, and the CLI table puts each interval beside its own truth and shows every flag."""

import json

import pandas as pd
import pytest
from rich.console import Console

from hrbench.cli import _residual_table, rule_note_lines
from hrbench.report.summary import summary_rows
from hrbench.stats import outcomes_from_counts as counts
from hrbench.stats import residual_table
from hrbench.stats.estimate import rule_note


def _frame():
    tasks = [counts("a", "F", [8, 8], [10, 10], [17, 0, 8]), counts("b", "F", [8, 5], [10, 10], [20, 0, 5]),
             counts("c", "G", [0, 5], [10, 10], [20, 0, 5])]  # c: a stage that never passed -> upper bound
    frame = pd.DataFrame([r.model_dump() for r in residual_table(tasks, n_boot=300)])
    frame.insert(0, "condition", "baseline")
    frame.insert(0, "agent", "sim")
    frame["true_gamma"] = 0.5
    frame["true_gamma_sampled"] = [None if s == "task" else 0.6 for s in frame["scope"]]
    return frame


def test_summary_writes_infinite_ends_as_strings_and_undefined_as_null():
    rows = {(r["scope"], r["name"]): r for r in summary_rows(_frame())}
    bounded = rows[("task", "c")]
    assert bounded["gamma"] is None and bounded["bound"] == "upper"
    assert bounded["trial_ci_low"] == "-Infinity" and isinstance(bounded["trial_ci_high"], float)
    lone = rows[("family", "G")]
    assert lone["ci_low"] is None and lone["ci_method"] == "too-few-tasks" and "too-few-tasks" in lone["flags"]
    assert rows[("family", "F")]["ci_estimand"] == "tasks: sampled" and "few-tasks" in rows[("family", "F")]["flags"]
    text = json.dumps(summary_rows(_frame()), allow_nan=False)  # strict JSON: no NaN / Infinity literals
    assert "NaN" not in text and "-Infinity" in text


def test_summary_reads_flag_arrays_back_from_parquet(tmp_path):
    path = tmp_path / "r.parquet"
    _frame().to_parquet(path)
    rows = summary_rows(pd.read_parquet(path))
    assert all(isinstance(r["flags"], list) for r in rows)
    assert any("zero-rule" in r["flags"] for r in rows)


@pytest.mark.parametrize("level, label", [(0.95, "95%"), (0.995, "99.5%")])
def test_the_cli_interval_header_is_the_study_level(level, label):
    """The header says the study's level (it once said "95% CI" over 99.5 % intervals)."""
    summary = {"study": "s", "prereg_sha256": "0" * 64, "level": level, "residuals": summary_rows(_frame())}
    console = Console(width=250, record=True)
    console.print(_residual_table(summary))
    header = console.export_text()
    assert f"{label} CI tasks: sampled" in header and f"{label} CI tasks: fixed" in header
    other = "99.5%" if label == "95%" else "95%"
    assert f"{other} CI" not in header


def test_cli_table_shows_each_interval_beside_its_truth_and_the_flags():
    summary = {"study": "s", "prereg_sha256": "0" * 64, "level": 0.95, "residuals": summary_rows(_frame())}
    console = Console(width=250, record=True)
    console.print(_residual_table(summary))
    out = console.export_text()
    assert "95% CI tasks: sampled" in out and "true Γ sampled" in out and "95% CI tasks: fixed" in out
    line_g = next(line for line in out.splitlines() if " G " in line and "family" in line)
    assert "too few tasks" in line_g and "too-few-tasks" in line_g and "zero-rule" in line_g
    assert "upper bound" in line_g and "−∞" in line_g
    line_f = next(line for line in out.splitlines() if " F " in line and "family" in line)
    assert "few-tasks" in line_f and "0.600" in line_f and "0.500" in line_f
    assert not any(" a " in line for line in out.splitlines())  # task rows live in the report


def test_the_cli_says_where_the_zero_rule_moved_a_shown_estimate_off_the_raw_ratio():
    """Issue 25: one line per shown row the rule moved (here a one-task family whose every trial passed), and a
    count of the task rows it moved; a family of two tasks sums raw ratios and carries none."""
    tasks = [counts("a", "F", [8, 8], [10, 10], [17, 0, 8]), counts("b", "F", [8, 5], [10, 10], [20, 1, 4]),
             counts("d", "G", [10, 10], [10, 10], [0, 0, 10])]
    rows = residual_table(tasks)
    frame = pd.DataFrame([r.model_dump() for r in rows])
    frame.insert(0, "condition", "baseline")
    frame.insert(0, "agent", "sim")
    by_name = {t.name: t for t in tasks}
    frame["rule_note"] = [
        rule_note([by_name[r.name]] if r.scope == "task" else [t for t in tasks if r.scope == "all" or t.family == r.name],
                  "jeffreys", r.p_expected, r.p_observed, r.gamma) for r in rows]
    lines = rule_note_lines({"residuals": summary_rows(frame)})
    assert len(lines) == 2, lines
    assert lines[0].startswith("sim baseline family G: jeffreys reads every k/m as (k+½)/(m+1) (checkpoint 10/10 at "
                               "stages 1, 2; natural 10/10 at stages 1, 2): P_exp 0.911 (raw 1.000)")
    assert lines[1].startswith("task rows: the jeffreys rule moved 2 task rows'")  # d, and a (its natural 8/8 at stage 2)
