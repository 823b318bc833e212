"""The per-agent aggregates over every condition: intervention contrasts, the sensitivity sweep and the
resource accounting."""

from typing import Callable

import pandas as pd
from dagster import AssetExecutionContext, AssetIn, AssetKey, AssetsDefinition, Output, asset

from assets.common import (
    BY_AGENT, ESTIMATES, SINGLE_RUN, STALE, asset_metadata, data_version, of_agent, per_agent_tables,
    versioned_output,
)
from assets.partitions import AGENTS
from hrbench import analysis
from hrbench.design import StudyDesign
from resources.study import StudyResource


def _over_conditions(context: AssetExecutionContext, study: StudyResource, checkpoint_trials: pd.DataFrame,
                     natural: dict[str, pd.DataFrame],
                     compute: Callable[[StudyDesign, str, pd.DataFrame, pd.DataFrame], pd.DataFrame]) -> Output[dict]:
    """Each agent's table from its checkpoint trials and its natural rollouts of every condition together."""
    run = study.run()
    rollouts = pd.concat(natural.values(), ignore_index=True)
    tables, regs = per_agent_tables(context, run, lambda a: compute(
        run.design, a, of_agent(checkpoint_trials, a), of_agent(rollouts, a)))
    return versioned_output(tables, data_version(tables), metadata=asset_metadata(run, tables, regs))


def aggregate_assets(conditions: list[str], version: str) -> list[AssetsDefinition]:
    """[intervention_contrasts (two conditions or more)], sensitivity_sweep, resource_accounting."""
    natural_ins = {f"natural_{c}": AssetIn(key=AssetKey([c, "natural_trials"]), partition_mapping=BY_AGENT)
                   for c in conditions}
    per_agent = dict(partitions_def=AGENTS, code_version=version, backfill_policy=SINGLE_RUN,
                     automation_condition=STALE)

    @asset(group_name=ESTIMATES, ins={"checkpoint_trials": AssetIn(partition_mapping=BY_AGENT), **natural_ins},
           deps=[AssetKey([c, "horizon_residuals"]) for c in conditions], **per_agent)
    def intervention_contrasts(context: AssetExecutionContext, study: StudyResource, checkpoint_trials: pd.DataFrame,
                               **natural: pd.DataFrame) -> Output[dict]:
        """ΔΓ(I) = Γ(baseline) − Γ(I) per condition, task, family and overall, paired over tasks."""
        return _over_conditions(context, study, checkpoint_trials, natural, analysis.intervention_contrasts)

    @asset(group_name=ESTIMATES, ins={"checkpoint_trials": AssetIn(partition_mapping=BY_AGENT),
                                      "natural_trials": AssetIn(key=AssetKey(["baseline", "natural_trials"]),
                                                                partition_mapping=BY_AGENT)},
           deps=[AssetKey(["baseline", "horizon_residuals"])], **per_agent)
    def sensitivity_sweep(context: AssetExecutionContext, study: StudyResource, checkpoint_trials: pd.DataFrame,
                          natural_trials: pd.DataFrame) -> Output[dict]:
        """Γ of the baseline under every admissible protocol, baseline model, zero rule and decomposition."""
        run = study.run()
        tables, regs = per_agent_tables(context, run, lambda a: analysis.sensitivity_sweep(
            run.design, a, of_agent(checkpoint_trials, a), of_agent(natural_trials, a)))
        extra = {}
        if len(tables) == 1:
            verdicts = analysis.sensitivity_verdicts(next(iter(tables.values())),
                                                     run.design.study.claims.equivalence_margin)
            overall = verdicts[verdicts["scope"] == "all"].iloc[0]
            extra = {"choices": int(overall["n_choices"]), "verdict_all": str(overall["verdict"])}
        return versioned_output(tables, data_version(tables), metadata=asset_metadata(run, tables, regs, **extra))

    @asset(group_name=ESTIMATES, ins={"checkpoint_trials": AssetIn(partition_mapping=BY_AGENT), **natural_ins},
           **per_agent)
    def resource_accounting(context: AssetExecutionContext, study: StudyResource, checkpoint_trials: pd.DataFrame,
                            **natural: pd.DataFrame) -> Output[dict]:
        """Turns, tokens, wall time and cost per condition and trial kind, side by side."""
        return _over_conditions(context, study, checkpoint_trials, natural, analysis.resource_accounting)

    # A study of the baseline alone has no intervention to contrast: no contrasts asset.
    return [*([intervention_contrasts] if len(conditions) > 1 else []), sensitivity_sweep, resource_accounting]
