"""The study's confirmatory claims on its tables: which rows they are, their adjusted intervals, and verdicts.

The residual and contrast tables are computed per agent, but the error rate is controlled across
the whole study's k claims (`Study.n_claims`, fixed by the study file before any data). So each
agent's table carries, on its claimed rows, what needs only that agent's trials — the p-value of
the row's interval (by inversion) and the interval at the simultaneous level 1 − α/k — and
`claims_table` adjusts the p-values across every agent when the report is written
(`hrbench.stats.claims` has the statistics; docs/statistics.md §13).
"""

from __future__ import annotations

import json
import math
from typing import Callable

import numpy as np
import pandas as pd

from hrbench.protocol import Study
from hrbench.stats import TaskOutcomes, estimate_task, paired_difference, residual_table
from hrbench.stats.claims import (
    MaxT,
    adjust,
    claim_level,
    claims_correlation,
    inversion_p_value,
    t_interval_rescaled,
    verdict,
)
from hrbench.stats.cluster import linearized_terms

#: Columns a claimed row gains (exploratory rows: `confirmatory` False, the rest null). `claim_df` (a t interval's
#: df) and `claim_terms` (its linearized per-task terms, JSON) let the max-|t| band rescale it across all claims.
CLAIM_COLUMNS = ["confirmatory", "claim_estimand", "p_value", "adj_level", "adj_ci_low", "adj_ci_high", "claim_df",
                 "claim_terms"]

Interval = tuple[float | None, float | None]


def _finite(x: object) -> float | None:
    return None if x is None or (isinstance(x, float) and math.isnan(x)) else float(x)


def claim_interval(row) -> tuple[str, str, str]:
    """Which interval of a row a claim is about: families resampled where the row has that interval (enough
    families, docs/statistics.md §7.6), else the headline (tasks: sampled), else the tasks-fixed interval.
    Returns the (low, high) column names and the estimand."""
    if _finite(row.get("families_ci_low")) is not None:
        return "families_ci_low", "families_ci_high", "families: sampled"
    if _finite(row.get("ci_low")) is not None or _finite(row.get("ci_high")) is not None:
        return "ci_low", "ci_high", str(row.get("ci_estimand") or "tasks: sampled")
    return "trial_ci_low", "trial_ci_high", "tasks: fixed"


def claim_values(row: dict, study: Study, estimand_point: str,
                 interval_at: Callable[[str, str, float], dict],
                 terms: Callable[[str, str], str | None] = lambda scope, name: None) -> dict:
    """CLAIM_COLUMNS of one claimed row (a dict of its columns); ``estimand_point`` is the column of its point
    estimate. A t interval (cluster-t; families resampled) is rescaled in closed form; any other interval is
    recomputed at other levels by ``interval_at(scope, name, level)`` (and inverted for its p-value).
    ``terms(scope, name)``: the row's linearized per-task terms (`linearized_claim_terms`), kept for a
    tasks-sampled cluster-t claim (the max-|t| band's correlation)."""
    level = claim_level(study.claims_alpha, study.n_claims)
    low_col, high_col, estimand = claim_interval(row)
    out = {"confirmatory": True, "claim_estimand": estimand, "adj_level": level, "claim_df": None,
           "claim_terms": None}
    # t intervals (cluster-t; families resampled) rescale in closed form: their SE and df do not depend on the level
    stratified = low_col == "ci_low" and row.get("ci_method") == "cluster-t"
    df = row.get("families_df") if low_col == "families_ci_low" else row.get("df") if stratified else None
    if _finite(df) is not None:
        p, lo, hi = t_interval_rescaled(float(row[estimand_point]), row[low_col], row[high_col], df,
                                        row["level"], level)
        return out | {"p_value": p, "adj_ci_low": lo, "adj_ci_high": hi, "claim_df": float(df),
                      "claim_terms": terms(row["scope"], row["name"]) if stratified else None}

    def at(lvl: float) -> Interval:
        again = interval_at(row["scope"], row["name"], lvl)
        return _finite(again.get(low_col)), _finite(again.get(high_col))

    low, high = at(level)
    return out | {"p_value": inversion_p_value(at), "adj_ci_low": low, "adj_ci_high": high}


def _task_terms(outcomes: list[TaskOutcomes], zero_rule, scope: str, name: str) -> dict[str, tuple[str, float]]:
    """{task: (family, x_t)}: the linearized terms of Γ̂ of a family or `all` row (hrbench.stats.cluster)."""
    kept = [t for t in outcomes if (scope == "all" or t.family == name) and not estimate_task(t, zero_rule).excluded]
    ests = [estimate_task(t, zero_rule) for t in kept]
    zeros = np.zeros(len(kept))
    found = linearized_terms(np.array([e.p_expected for e in ests]), np.array([e.p_observed for e in ests]),
                             zeros, zeros, np.array([t.weight for t in kept], np.float64)) if kept else None
    return {} if found is None else {t.name: (t.family, float(x)) for t, x in zip(kept, found[1])}


def linearized_claim_terms(zero_rule, scope: str, name: str, outcomes: list[TaskOutcomes],
                           other: list[TaskOutcomes] | None = None) -> str | None:
    """JSON {task: [family, x_t]} of a claimed row's estimate: Γ̂ of ``outcomes``, or ΔΓ̂ = Γ̂(outcomes) −
    Γ̂(other) (x_t of the two sides subtracted, tasks paired by name). None when Γ̂ is undefined."""
    terms = _task_terms(outcomes, zero_rule, scope, name)
    if other is not None:
        theirs = _task_terms(other, zero_rule, scope, name)
        terms = {t: (f, x - theirs[t][1]) for t, (f, x) in terms.items() if t in theirs}
    return json.dumps({t: [f, x] for t, (f, x) in terms.items()}) if terms else None


def residual_claim_values(study: Study, row: dict, outcomes: list[TaskOutcomes], zero_rule) -> dict:
    """`claim_values` of a claimed residual row of one agent and condition (``outcomes``: its tasks)."""

    def interval_at(scope: str, name: str, level: float) -> dict:
        rows = residual_table(outcomes, zero_rule=zero_rule, n_boot=study.bootstrap.n_boot,
                              level=level, scopes=(scope,), quadrant_thresholds=study.quadrant)
        return next(r.model_dump() for r in rows if r.name == name)

    return claim_values(row, study, "gamma", interval_at,
                        lambda scope, name: linearized_claim_terms(zero_rule, scope, name, outcomes))


def contrast_claim_values(study: Study, row: dict, base: list[TaskOutcomes], other: list[TaskOutcomes],
                          shared_checkpoint: bool) -> dict:
    """`claim_values` of a claimed ΔΓ row of one agent (``base``, ``other``: the two sides' tasks)."""

    def interval_at(scope: str, name: str, level: float) -> dict:
        rows = paired_difference(base, other, zero_rule=study.zero_rule, n_boot=study.bootstrap.n_boot,
                                 level=level, scopes=(scope,),
                                 shared_checkpoint=shared_checkpoint)
        return next(r.model_dump() for r in rows if r.name == name)

    return claim_values(row, study, "delta_gamma", interval_at,
                        lambda scope, name: linearized_claim_terms(study.zero_rule, scope, name, base, other))


def _mark(table: pd.DataFrame, claimed: pd.Series, values_of: Callable[[dict], dict]) -> pd.DataFrame:
    """Add CLAIM_COLUMNS: ``values_of(row)`` of each claimed row, nulls (and `confirmatory` False) elsewhere."""
    table = table.copy()
    values = {c: [None] * len(table) for c in CLAIM_COLUMNS}
    values["confirmatory"] = [bool(c) for c in claimed]
    for i, is_claim in enumerate(claimed):
        if is_claim:
            for column, value in values_of(table.iloc[i].to_dict()).items():
                values[column][i] = value
    dtypes = {"confirmatory": bool, "claim_estimand": object, "claim_terms": object}
    for column, vals in values.items():
        vals = [math.nan if v is None and column not in dtypes else v for v in vals]
        table[column] = pd.Series(vals, index=table.index, dtype=dtypes.get(column, float))
    return table


def is_residual_claim(study: Study, scope: str, name: str) -> bool:
    """Whether a residual row (any agent, a declared condition) is a confirmatory claim."""
    return scope in ("family", "all") and name in study.claims.rows


def mark_residual_claims(study: Study, table: pd.DataFrame, outcomes: list[TaskOutcomes], zero_rule) -> pd.DataFrame:
    """One agent's residual rows of one declared condition, with its claimed rows marked and measured."""
    claimed = pd.Series([is_residual_claim(study, s, n) for s, n in zip(table["scope"], table["name"])],
                        index=table.index)
    return _mark(table, claimed, lambda row: residual_claim_values(study, row, outcomes, zero_rule))


def mark_contrast_claims(study: Study, table: pd.DataFrame, condition: str, base: list[TaskOutcomes],
                         other: list[TaskOutcomes], shared_checkpoint: bool) -> pd.DataFrame:
    """One agent's ΔΓ rows of one condition, with the overall row marked when the contrast is claimed."""
    claimed = (table["scope"] == "all") & (condition in study.claimed_contrasts)
    return _mark(table, claimed, lambda row: contrast_claim_values(study, row, base, other, shared_checkpoint))


CLAIMS_FIELDS = ["agent", "kind", "condition", "name", "estimate", "claim_estimand", "ci_low", "ci_high",
                 "adj_ci_low", "adj_ci_high", "adj_level", "p_value", "p_adjusted", "verdict", "truth", "flags"]


def claim_record(kind: str, row: dict) -> dict:
    """One claim (CLAIMS_FIELDS but the adjusted p-value and verdict) from its marked row: a residual row
    (``kind`` "residual") or a contrast row ("contrast") with `claim_values`' columns."""
    low_col, high_col, _ = claim_interval(row)
    sampled = row.get("claim_estimand") == "tasks: sampled"
    truth_col = {"residual": ("true_gamma_sampled", "true_gamma"),
                 "contrast": ("true_delta_gamma_sampled", "true_delta_gamma")}[kind][0 if sampled else 1]
    if row.get("claim_estimand") == "families: sampled":
        truth_col = None  # a sim agent's declared families are not draws from a population of families
    return {
        "agent": row["agent"], "kind": kind, "condition": row.get("condition"), "name": row["name"],
        "estimate": _finite(row.get("gamma" if kind == "residual" else "delta_gamma")),
        "claim_estimand": row.get("claim_estimand"), "ci_low": row.get(low_col), "ci_high": row.get(high_col),
        "adj_ci_low": row.get("adj_ci_low"), "adj_ci_high": row.get("adj_ci_high"),
        "adj_level": row.get("adj_level"), "p_value": _finite(row.get("p_value")),
        "truth": _finite(row.get(truth_col)) if truth_col else None,
        "flags": list(row.get("flags") if row.get("flags") is not None else []),
        # what the max-|t| band needs beyond CLAIMS_FIELDS (adjusted_claims drops them)
        "level": row.get("level"), "claim_df": _finite(row.get("claim_df")), "claim_terms": row.get("claim_terms"),
    }


def _maxt_band(claims: pd.DataFrame, alpha: float) -> tuple[np.ndarray, MaxT]:
    """The claims' correlation (their linearized terms) and the max-|t| distribution; each t-interval claim's
    adjusted interval rescaled in place to the band's level. Claims whose interval is not a t interval keep
    their Bonferroni one (1 − α/k: never narrower than the band, so still simultaneous)."""
    terms = [None if not isinstance(t, str) else {k: (v[0], v[1]) for k, v in json.loads(t).items()}
             for t in claims["claim_terms"]]
    corr = claims_correlation(terms)
    band = MaxT.of(corr)
    level = band.level(alpha)
    low, high, levels = (claims[c].astype(float).to_numpy().copy() for c in ("adj_ci_low", "adj_ci_high", "adj_level"))
    for i, row in enumerate(claims[["estimate", "ci_low", "ci_high", "claim_df", "level"]].itertuples(index=False)):
        if _finite(row.claim_df) is not None and _finite(row.estimate) is not None:
            _, low[i], high[i] = t_interval_rescaled(row.estimate, row.ci_low, row.ci_high, row.claim_df, row.level,
                                                     level)
            levels[i] = level
    claims["adj_ci_low"], claims["adj_ci_high"], claims["adj_level"] = low, high, levels
    return corr, band


def adjusted_claims(study: Study, records: list[dict]) -> pd.DataFrame:
    """The claims table of these `claim_record`s: p-values adjusted across all of them, and verdicts."""
    internal = ["level", "claim_df", "claim_terms"]
    claims = pd.DataFrame(records, columns=[c for c in CLAIMS_FIELDS if c not in ("p_adjusted", "verdict")] + internal)
    if not len(claims):
        return claims.drop(columns=internal).assign(p_adjusted=[], verdict=[])
    alpha, margin = study.claims_alpha, study.claims.equivalence_margin
    p = claims["p_value"].astype(float)
    adjusted = np.full(len(p), np.nan)
    defined = p.notna().to_numpy()
    # A claim without an estimate (no success on either side) can reject nothing but still counts in k.
    padded = np.where(defined, p.to_numpy(), 1.0)
    if study.claims.error_rate == "maxt":
        _, band = _maxt_band(claims, alpha)
        adjusted[:] = band.adjust(padded)
    else:
        adjusted[:] = adjust(padded, study.claims.error_rate)
    claims = claims.drop(columns=internal)
    adjusted[~defined] = np.nan
    claims["p_adjusted"] = adjusted
    claims["verdict"] = [
        verdict(_finite(lo), _finite(hi), bool(pa <= alpha), margin) if not math.isnan(pa) else "inconclusive"
        for lo, hi, pa in zip(claims["adj_ci_low"], claims["adj_ci_high"], claims["p_adjusted"])]
    return claims


def claims_table(study: Study, residuals: pd.DataFrame, contrasts: pd.DataFrame) -> pd.DataFrame:
    """Every confirmatory claim of the study (all agents), its adjusted p-value and verdict.

    Residual claims first, then contrast claims, each in table order. The unadjusted interval is the
    row's own (at the study's level), beside the adjusted one at 1 − α/k.
    """
    records = [claim_record(kind, row)
               for kind, frame in (("residual", residuals), ("contrast", contrasts))
               if len(frame) and "confirmatory" in frame
               for row in frame[frame["confirmatory"].astype(bool)].to_dict(orient="records")]
    return adjusted_claims(study, records)
