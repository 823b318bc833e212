"""The shared trial assets: prefix rollouts (when a checkpoint protocol needs recorded transcripts) and the
checkpoint trials every condition's stage estimates read."""

import pandas as pd
from dagster import AssetDep, AssetExecutionContext, AssetsDefinition, MultiPartitionsDefinition, Output, asset

from assets.common import (
    BY_AGENT, SANDBOXES, SINGLE_RUN, STALE, TRIALS, asset_metadata, data_version, gated, in_parallel, pair_key, registered,
    run_pairs, stamp, versioned_output,
)
from hrbench import analysis
from hrbench.catalogue import table_key
from hrbench.harness.records import records_table
from hrbench.study_run import StudyRun
from resources.study import StudyResource


def trial_assets(agent_task: MultiPartitionsDefinition, version: str, with_prefix: bool) -> list[AssetsDefinition]:
    """[prefix_rollouts ->] checkpoint_trials, partitioned agent x task."""

    def trial_tables(context: AssetExecutionContext, run: StudyRun, execute) -> tuple[dict, dict, pd.DataFrame]:
        """Every (agent, task) partition of this run: its stamped trial table; the registrations; all rows."""
        pairs = run_pairs(context)
        gated(run, table_key(context.asset_key.path), sorted({a for a, _ in pairs}))
        regs = {a: registered(run, a) for a in sorted({a for a, _ in pairs})}
        frames = in_parallel(run, lambda p: stamp(records_table(execute(p)), regs[p[0]]), pairs)
        tables = {pair_key(*p): f for p, f in zip(pairs, frames)}
        return tables, regs, pd.concat(frames, ignore_index=True)

    @asset(partitions_def=agent_task, group_name=TRIALS, code_version=version, backfill_policy=SINGLE_RUN,
           automation_condition=STALE, deps=[AssetDep("agent_registration", partition_mapping=BY_AGENT)], pool=SANDBOXES)
    def prefix_rollouts(context: AssetExecutionContext, study: StudyResource) -> Output[dict]:
        """Rollouts under full history whose transcripts `matched` checkpoints start from (not observed as P_obs)."""
        run = study.run()
        tables, regs, everything = trial_tables(context, run, lambda p: run.runner.run_prefix_rollouts(*p))
        return versioned_output(tables, data_version(tables), metadata=asset_metadata(
            run, tables, regs, missing_trials=analysis.missing_trials(everything)))

    @asset(partitions_def=agent_task, group_name=TRIALS, code_version=version, backfill_policy=SINGLE_RUN,
           automation_condition=STALE, pool=SANDBOXES,
           deps=[AssetDep("agent_registration", partition_mapping=BY_AGENT),
                 *(["prefix_rollouts"] if with_prefix else [])])
    def checkpoint_trials(context: AssetExecutionContext, study: StudyResource) -> Output[dict]:
        """m_i trials of each stage from its declared checkpoint e_{i-1}, one row per trial, for every
        distinct checkpoint protocol (keyed by its hash: conditions sharing a protocol share its trials)."""
        run = study.run()
        tables, regs, everything = trial_tables(context, run, lambda p: run.runner.run_checkpoint_trials(*p))
        return versioned_output(tables, data_version(tables), metadata=asset_metadata(
            run, tables, regs, passed=int(everything["passed"].sum()),
            missing_trials=analysis.missing_trials(everything), protocols=len(run.runner.protocol_labels())))

    return [*([prefix_rollouts] if with_prefix else []), checkpoint_trials]
