"""What every study asset shares: group names, automation and backfill policies, the partition mapping onto
agents, and the helpers that stamp, version and describe the tables an asset returns.

Assets are thin: each calls the core (`StudyRun`: design, stores, runner; `hrbench.analysis`) and
returns a table with metadata. Run assets are partitioned agent x task; aggregates by agent.
Every partitioned asset runs many partitions in one run (a single-run backfill
policy), so the runs of a study step do not grow with its tasks; an asset hands
the IO manager a dict partition key -> table.
"""

import base64
import hashlib
import warnings
from concurrent.futures import ThreadPoolExecutor
from typing import TypeVar

import pandas as pd
from dagster import (
    AssetChecksDefinition, AssetExecutionContext, AssetKey, AssetsDefinition, AutomationCondition, BackfillPolicy, BetaWarning, DataVersion, Failure, MetadataValue,
    MultiToSingleDimensionPartitionMapping, Output,
)

from hrbench.catalogue import StudyNames, table_key
from hrbench.gate import upstream_problems
from hrbench.preregistration import AgentRegistration, code_version, load_registration
from hrbench.report.figures import forest_plot
from hrbench.study_run import StudyRun

with warnings.catch_warnings():
    # Beta API, and the documented way to map agent x task partitions onto the agent dimension.
    warnings.simplefilter("ignore", BetaWarning)
    BY_AGENT = MultiToSingleDimensionPartitionMapping(partition_dimension_name="agent")

AnyAssets = TypeVar("AnyAssets", AssetsDefinition, AssetChecksDefinition)
PROTOCOL, TRIALS, ESTIMATES, REPORT = "protocol", "trials", "estimates", "report"
# Dagster's concurrency pool of every step that runs sandboxes: the instance bounds how many run at once
# across runs (deploy/dagster.yaml, `concurrency.pools`).
SANDBOXES = "sandboxes"
SINGLE_RUN = BackfillPolicy.single_run()
# Stale work is redone when its inputs or the code change (and the automation sensor is on, docs/deploy.md).
# Not `all_deps_blocking_checks_passed()`: in dagster 1.13 it does not see the verdicts of partitioned checks
# and holds back every partitioned asset. A run it requests past a failed check is refused by the asset (`gated`).
STALE = AutomationCondition.eager() | (AutomationCondition.code_version_changed()
                                       & ~AutomationCondition.any_deps_missing()
                                       & ~AutomationCondition.in_progress())


def in_namespace(definitions: list[AnyAssets], names: StudyNames) -> list[AnyAssets]:
    """The assets (or checks) with every asset key they name, their own, their inputs' and their checks' targets,
    under the study's namespace, and their ops named in it: the one place a study's keys get it. The factories
    spell catalogue keys; the keys are replaced as Dagster's own `load_assets_from_modules(key_prefix=...)` does,
    the op renamed as `configured` does (one repository holding two studies would refuse two ops of one name)."""
    keys = {k for d in definitions for k in (*d.keys, *d.dependency_keys, *(c.asset_key for c in d.check_keys))}
    replacements = {k: AssetKey(names.asset_key(k.to_user_string())) for k in keys}
    namespaced = []
    for definition in definitions:
        attributes = definition.with_attributes(asset_key_replacements=replacements).get_attributes_dict()
        op = attributes["node_def"]
        attributes["node_def"] = op.with_replaced_properties(name=names.name(op.name))
        renamed = AssetsDefinition.dagster_internal_init(**attributes)
        # a checks definition is rebuilt as a plain AssetsDefinition: made one again, as Dagster's loader does
        namespaced.append(renamed.coerce_to_checks_def() if isinstance(definition, AssetChecksDefinition) else renamed)
    return namespaced  # type: ignore[return-value]


def sibling(key: AssetKey, name: str) -> AssetKey:
    """The asset `name` beside `key`: of the same study and, for a condition's asset, the same condition."""
    return AssetKey([*key.path[:-1], name])


def run_pairs(context: AssetExecutionContext) -> list[tuple[str, str]]:
    """(agent, task) of every partition this run materializes."""
    keys = [k.keys_by_dimension for k in context.partition_keys]  # type: ignore[attr-defined]
    return [(k["agent"], k["task"]) for k in keys]


def pair_key(agent: str, task: str) -> str:
    return f"{agent}|{task}"  # MultiPartitionKey's string form: dimensions sorted by name


def data_version(tables: dict[str, pd.DataFrame]) -> DataVersion:
    """Content hash of the tables (order-free), Dagster's data version of this materialization."""
    digest = hashlib.sha256()
    for key in sorted(tables):
        digest.update(key.encode() + b"\0" + pd.util.hash_pandas_object(_hashable(tables[key]), index=False)
                      .to_numpy().tobytes())
    return DataVersion(digest.hexdigest()[:24])


def _hashable(frame: pd.DataFrame) -> pd.DataFrame:
    """The frame with list-valued cells (a residual row's `flags`) as their repr: pandas hashes scalars only."""
    listy = [c for c in frame.columns if frame[c].dtype == object
             and frame[c].map(lambda v: isinstance(v, (list, tuple, dict)) or hasattr(v, "tolist")).any()]
    return frame.assign(**{c: frame[c].map(repr) for c in listy}) if listy else frame


def gated(run: StudyRun, asset: str, agents: list[str]) -> None:
    """Failure, before any work, unless setup is done and every blocking check this asset comes after passed on
    the current tables of these agents (hrbench/gate.py). Checked in the asset itself, so it holds however the
    run was launched: UI, backfill, schedule, automation, sensor or `hrbench run`."""
    problems = upstream_problems(run, asset, agents)
    if problems:
        more = f" (and {len(problems) - 5} more)" if len(problems) > 5 else ""
        raise Failure(f"{asset} not computed: " + "; ".join(problems[:5]) + more +
                      " — fix the cause and re-run that step (its checks run with it)")


def registered(run: StudyRun, agent: str) -> AgentRegistration:
    """The agent's stored registration under this protocol; Failure if it is missing or no longer matches."""
    stored = load_registration(run.out_dir, agent)
    current = run.design.registration(agent)
    if stored is None or stored.prereg_sha256 != run.prereg_sha256:
        raise Failure(f"agent {agent!r} has no registration under pre-registration {run.prereg_sha256[:12]} in "
                      f"{run.out_dir}/registrations: materialize agent_registration for it first")
    if stored.agent_sha256 != current.agent_sha256:
        raise Failure(f"agent {agent!r} is registered as {stored.agent_sha256[:12]} but its config or program is now "
                      f"{current.agent_sha256[:12]}: a changed agent is a new agent — give it a new id")
    return stored


def stamp(frame: pd.DataFrame, registration: AgentRegistration) -> pd.DataFrame:
    frame = frame.copy()
    frame.insert(1 if "prereg_sha256" in frame else 0, "agent_sha256", registration.agent_sha256)
    return frame


def asset_metadata(run: StudyRun, tables: dict[str, pd.DataFrame], regs: dict[str, AgentRegistration] | None = None,
          **extra) -> dict:
    meta = {"prereg_sha256": run.prereg_sha256, "code_version": code_version().label,
            "partitions": len(tables), "rows": sum(len(t) for t in tables.values())}
    if regs and len(regs) == 1:
        meta["agent_sha256"] = next(iter(regs.values())).agent_sha256
    elif regs:
        meta["agent_sha256"] = MetadataValue.json({a: r.agent_sha256 for a, r in sorted(regs.items())})
    return {**meta, **extra}


def in_parallel(run: StudyRun, work, items: list) -> list:
    """Partitions side by side; their trials share the runner's one bound of `concurrency` at a time,
    so a partition's slowest trials never leave the pool idle while the next partition waits."""
    workers = min(len(items), run.study.concurrency)
    if workers <= 1:
        return [work(i) for i in items]
    with ThreadPoolExecutor(max_workers=workers) as pool:
        return list(pool.map(work, items))




def residual_markdown(residuals: pd.DataFrame) -> str:
    """The residual table as the UI shows it: every row, zero-rule rows marked."""
    lines = ["| agent | condition | scope | name | P_exp | P_obs | Γ | 95% CI | zero rule | quadrant |",
             "|---|---|---|---|---:|---:|---:|---|---|---|"]
    fmt = lambda v: "—" if v is None or pd.isna(v) else f"{v:.3f}"  # noqa: E731
    for r in residuals.itertuples():
        lines.append(f"| {r.agent} | {r.condition} | {r.scope} | {r.name} | {fmt(r.p_expected)} | "
                     f"{fmt(r.p_observed)} | {fmt(r.gamma)} | [{fmt(r.ci_low)}, {fmt(r.ci_high)}] | "
                     f"{'applied' if getattr(r, 'zero_rule_applied', False) else ''} | {r.quadrant or ''} |")
    return "\n".join(lines)


def forest_plot_metadata(residuals: pd.DataFrame) -> MetadataValue:
    png = forest_plot(residuals)
    uri = f"data:image/png;base64,{base64.b64encode(png).decode()}" if png else ""
    return MetadataValue.md(f"![forest plot]({uri})" if png else "(no interval to plot)")


def versioned_output(value: object, data_version: DataVersion, metadata: dict) -> Output:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", BetaWarning)  # data versions are beta; they carry the provenance we need
        return Output(value, data_version=data_version, metadata=metadata)



def per_agent_tables(context: AssetExecutionContext, run: StudyRun, compute) -> tuple[dict, dict]:
    """{agent: stamped table} over the agents of this run, and their registrations (once the gate lets it)."""
    gated(run, table_key(context.asset_key.path), list(context.partition_keys))
    regs = {a: registered(run, a) for a in context.partition_keys}
    return {a: stamp(compute(a), regs[a]) for a in context.partition_keys}, regs


def of_agent(frame: pd.DataFrame, agent: str) -> pd.DataFrame:
    return frame[frame["agent"] == agent] if len(frame) else frame

