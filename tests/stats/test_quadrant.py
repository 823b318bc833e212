"""Protects the quadrant labels (paper §3.4) under declared thresholds."""

import pytest
from pydantic import ValidationError

from hrbench.stats import QuadrantThresholds, quadrant

TH = QuadrantThresholds(high=0.5, low=0.2)


@pytest.mark.parametrize(
    "p_exp, p_obs, label",
    [
        (0.8, 0.7, "both_high"),
        (0.1, 0.05, "both_low"),
        (0.8, 0.1, "expected_high_observed_low"),
        (0.3, 0.45, "observed_above_expected"),
        (0.1, 0.6, "observed_above_expected"),
        (0.4, 0.3, "intermediate"),
        (0.6, 0.3, "intermediate"),
    ],
)
def test_quadrant_labels_follow_declared_thresholds(p_exp, p_obs, label):
    assert quadrant(p_exp, p_obs, TH) == label


def test_thresholds_must_be_ordered():
    with pytest.raises(ValidationError, match="quadrant.low must be below quadrant.high"):
        QuadrantThresholds(high=0.2, low=0.5)
