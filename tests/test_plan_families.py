"""Protects `hrbench plan`'s family sizing (issue 25 item 3): the number of families for a target half-width of
the families-resampled headline, its closed form, and its simulation check on a synthetic design."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import special, stats

from hrbench.plan import Anticipated, size_families
from hrbench.stats.cluster import FAMILY_LEVEL_MIN
from hrbench.stats.planning import predicted_families_half_width, sized_families


def test_the_families_half_width_is_t_on_f_minus_1_df_of_the_family_totals():
    x = np.array([0.1, -0.05, 0.02, -0.07, 0.0, 0.0])
    tau = np.full(6, 0.001)
    family = np.array([0, 0, 1, 1, 2, 2])
    width = predicted_families_half_width(x, tau, family, 0.95)
    totals = np.array([0.05, -0.05, 0.0])
    V = 3 * np.var(totals, ddof=1) + 0.006
    assert width.df == 2 and width.between == pytest.approx(3 * np.var(totals, ddof=1))
    assert width.half_width == pytest.approx(stats.t.ppf(0.975, 2) * math.sqrt(V))
    c4 = math.sqrt(2 / 2) * math.exp(special.gammaln(1.5) - special.gammaln(1.0))  # E√(χ²_2/2) = √π/2
    assert width.expected_half_width == pytest.approx(width.half_width * c4) and c4 == pytest.approx(math.pi**0.5 / 2)


def test_sized_families_repeats_the_declared_families_with_their_tasks():
    idx, labels = sized_families(["a", "a", "b", "c", "c", "c"], 5)
    assert idx == [0, 1, 2, 3, 4, 5, 0, 1, 2]
    assert labels == ["a", "a", "b", "c", "c", "c", "a#1", "a#1", "b#1"]


def _synthetic(n_families: int = 4, per_family: int = 3) -> tuple[list[Anticipated], list[str]]:
    """Families whose Γ differ (0.2 to 0.8 nats spread over the families), 3 stages, q_i = 0.85."""
    rows, families = [], []
    for f in range(n_families):
        for t in range(per_family):
            gamma = 0.2 + 0.6 * f / (n_families - 1) + 0.05 * (t - 1)
            rows.append(Anticipated(agent="a", task=f"F{f}t{t}", source="stated", q=[0.85] * 3,
                                    p_obs=0.85**3 * math.exp(-gamma)))
            families.append(f"F{f}")
    return rows, families


def test_the_families_the_target_needs_are_predicted_and_checked_by_simulation():
    inputs, families = _synthetic()
    common = dict(m=20, m0=20, level=0.95, zero_rule="jeffreys", rng=np.random.default_rng(3))
    wide = size_families(inputs, families, [1.0] * len(inputs), target=0.5, n_sims=0, **common)
    assert wide.families_needed == FAMILY_LEVEL_MIN  # the family level starts at 10 families
    sized = size_families(inputs, families, [1.0] * len(inputs), target=0.12, n_sims=60, **common)
    assert sized.families_needed > FAMILY_LEVEL_MIN and sized.tasks == 3 * sized.families_needed
    assert sized.half_width_predicted <= 0.12
    # the smallest number: a target just below its predicted half-width needs more families
    tighter = size_families(inputs, families, [1.0] * len(inputs), target=sized.half_width_predicted * 0.9999,
                            n_sims=0, **common)
    assert tighter.families_needed > sized.families_needed
    assert 0.8 <= sized.ratio <= 1.25, sized
    assert size_families(inputs, families, [1.0] * len(inputs), target=0.001, n_sims=0, **common).families_needed is None


def test_a_simulated_claim_reads_the_families_interval_where_its_row_has_one():
    """`hrbench plan` checks a claim on the interval the claim reads (hrbench.claims.claim_interval): families
    resampled from FAMILY_LEVEL_MIN families on, else the fixed-family cluster-t."""
    from hrbench.plan import _claim_interval
    from hrbench.stats import residual_table, simulate_task

    rng = np.random.default_rng(2)
    q = np.array([0.9, 0.9, 0.9])
    for n_families, column in ((FAMILY_LEVEL_MIN, "families_ci"), (FAMILY_LEVEL_MIN - 1, "ci")):
        tasks = [simulate_task(f"F{f}t{t}", f"F{f}", q, q * math.exp(-(0.3 + 0.1 * f) / 3), 20, 20, rng)
                 for f in range(n_families) for t in range(3)]
        row = residual_table(tasks, level=0.95, scopes=("all",))[0]
        half, _, _ = _claim_interval(row, 0.95, 0.99)
        assert half == pytest.approx((getattr(row, f"{column}_high") - getattr(row, f"{column}_low")) / 2)
