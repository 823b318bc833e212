"""Pins the study's statistics to numbers stored before issue 22 moved the comparison schemes out.

`tests/fixtures/stats_golden.json` was written by the pre-move code (main at f4be9dd, with hrbench/stats/bootstrap.py) from the same seeded
tasks: the residual table and the paired differences of every zero rule, row by row. A change that moves
numbers of the production path (not only its code) fails here; regenerate the file only for a change that
means to move them, and say so in its commit.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest

from hrbench.stats import paired_difference, residual_table, simulate_task

GOLDEN = Path(__file__).resolve().parents[1] / "fixtures" / "stats_golden.json"
RULES = ("jeffreys", "haldane", "bound", "exclude")


def _tasks(rng: np.random.Generator) -> list:
    out = []
    for j in range(9):
        q = rng.uniform(0.5, 0.98, 4)
        r = q * rng.uniform(0.8, 1.0, 4)
        if j == 4:
            r[2] = 0.02  # a natural stage almost nobody passes: raw zeros, bounds and exclusions
        out.append(simulate_task(f"t{j}", f"F{j % 3}", q, r, 12, 15, rng))
    return out


def golden_tables() -> dict[str, list[dict]]:
    """Every rule's residual rows and paired-difference rows (and a shared-checkpoint contrast)."""
    rng = np.random.default_rng(3)
    a, b = _tasks(rng), _tasks(rng)
    out = {}
    for rule in RULES:
        out[f"residuals/{rule}"] = [r.model_dump(mode="json") for r in residual_table(a, rule, n_boot=200)]
        out[f"contrasts/{rule}"] = [r.model_dump(mode="json") for r in paired_difference(a, b, rule, n_boot=200)]
    out["contrasts/shared"] = [r.model_dump(mode="json") for r in paired_difference(a, a, n_boot=200,
                                                                                     shared_checkpoint=True)]
    return out


def _same(got, want, where: str) -> None:
    if isinstance(want, dict):
        assert set(got) == set(want), where
        for k in want:
            _same(got[k], want[k], f"{where}.{k}")
    elif isinstance(want, list):
        assert len(got) == len(want), where
        for i, (g, w) in enumerate(zip(got, want)):
            _same(g, w, f"{where}[{i}]")
    elif isinstance(want, float) and not isinstance(got, str):
        assert got == pytest.approx(want, rel=1e-12, abs=1e-15) or (math.isnan(got) and math.isnan(want)), where
    else:
        assert got == want, where


def test_study_statistics_match_the_numbers_stored_before_the_move():
    got = json.loads(json.dumps(golden_tables()))
    want = json.loads(GOLDEN.read_text())
    assert sorted(got) == sorted(want)
    for name in want:
        _same(got[name], want[name], name)
