"""Protects the binomial intervals and the zero rules against textbook values."""

import numpy as np
import pytest
from scipy import stats

from hrbench.stats import jeffreys_interval, smoothed_proportion, wilson_interval
from hrbench.stats.intervals import lower_bound_exact, smoothed_log_table, upper_bound_exact


@pytest.mark.parametrize(
    "k, m, expected",
    [
        (8, 10, (0.4902, 0.9433)),  # Wilson score, textbook example
        (0, 10, (0.0, 0.2775)),
        (10, 10, (0.7225, 1.0)),
        (81, 263, (0.2553, 0.3662)),  # Newcombe (1998) example
    ],
)
def test_wilson_interval_matches_textbook_values(k, m, expected):
    assert wilson_interval(k, m) == pytest.approx(expected, abs=1e-4)


def test_jeffreys_interval_is_beta_quantiles_with_boundary_rule():
    low, high = jeffreys_interval(8, 10)
    assert low == pytest.approx(stats.beta.ppf(0.025, 8.5, 2.5))
    assert high == pytest.approx(stats.beta.ppf(0.975, 8.5, 2.5))
    assert jeffreys_interval(0, 10)[0] == 0.0
    assert jeffreys_interval(10, 10)[1] == 1.0


def test_exact_one_sided_bounds_rule_of_three():
    # k = 0 of m: upper limit 1 - alpha^(1/m) (≈ 3/m at 95%).
    assert upper_bound_exact(0, 100, 0.05) == pytest.approx(1 - 0.05 ** (1 / 100))
    assert lower_bound_exact(100, 100, 0.05) == pytest.approx(0.05 ** (1 / 100))


@pytest.mark.parametrize(
    "rule, k, m, expected",
    [
        ("jeffreys", 8, 10, 8.5 / 11),
        ("jeffreys", 0, 10, 0.5 / 11),
        ("haldane", 8, 10, 0.8),
        ("haldane", 0, 10, 0.5 / 11),
        ("haldane", 10, 10, 10.5 / 11),
        ("bound", 0, 10, 0.0),
        ("exclude", 7, 10, 0.7),
    ],
)
def test_smoothed_proportion_follows_declared_rule(rule, k, m, expected):
    assert smoothed_proportion(k, m, rule) == pytest.approx(expected)


def test_log_table_agrees_with_scalar_rule():
    table = smoothed_log_table(12, "haldane")
    for n in range(1, 13):
        for k in range(n + 1):
            assert table[n, k] == pytest.approx(np.log(smoothed_proportion(k, n, "haldane")))


def test_unknown_zero_rule_is_rejected():
    with pytest.raises(ValueError, match="zero_rule"):
        smoothed_proportion(1, 2, "laplace")
