"""Protects the calibration of every row (issue 8): the quick grid of benchmarks/calibration.py
(families of 1, 2, 3, 5 and 10 tasks; P_exp 0.2 and 0.9, where k = 0 and k = m are common) must
cover at ≥ 0.90 wherever the method does not flag the row as too small. Slow: ~1 min on 2 cores."""

import importlib.util
from pathlib import Path

import pytest

CALIBRATION = Path(__file__).resolve().parents[2] / "benchmarks" / "calibration.py"


def _calibration():
    spec = importlib.util.spec_from_file_location("calibration", CALIBRATION)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.slow
def test_quick_calibration_covers_every_unflagged_row():
    cal = _calibration()
    results = cal.run(cal.QUICK_GRID, reps=200, n_boot=300, workers=1)
    low = []
    for cell in results:
        for kind, r in cell["kinds"].items():
            if r["scored"] >= 50 and r["cover"] < 0.90:
                low.append((cell["nf"], cell["p"], kind, r["cover"]))
            if kind[1] == "fixed":  # a tasks-fixed interval exists for every row (never "too small")
                assert r["small"] == 0, (cell["nf"], kind)
    assert not low, low
    # Families of one task have no tasks-sampled interval and say so; families of 10 always have one.
    by_nf = {c["nf"]: c for c in results if c["p"] == 0.9}
    assert by_nf[1]["kinds"][("family", "sampled")]["small"] == 1.0
    assert by_nf[10]["kinds"][("family", "sampled")]["small"] == 0.0
