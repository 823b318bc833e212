"""The asset graph of one study (DESIGN §8), for the product baseline.

Assets are thin: each calls the core (`StudyRun`, `hrbench.analysis`) and returns a
table with metadata. Run assets are partitioned agent x task; aggregates by agent.
Every partitioned asset runs many partitions in one run (a single-run backfill
policy), so the runs of a study step do not grow with its tasks; an asset hands
the IO manager a dict partition key -> table.
"""


import hashlib
import warnings
from concurrent.futures import ThreadPoolExecutor

import pandas as pd
from dagster import (
    AssetDep, AssetExecutionContext, AssetIn, AssetsDefinition, AutomationCondition, BackfillPolicy, BetaWarning,
    DataVersion, Failure, MaterializeResult, MetadataValue, MultiPartitionsDefinition,
    MultiToSingleDimensionPartitionMapping, Output, PreviewWarning, asset,
)

from hrbench import analysis
from hrbench.lineage import file_sha256, read_record
from hrbench.preregistration import (
    AgentRegistration, code_version, load_registration, record_study_source, register_agent, store_registration,
)
from hrbench.protocol import StudyError
from hrbench.report.html import forest_plot
from hrbench.report.html import write_report
from hrbench.report.summary import write_summary
from hrbench.storage import LocalTableStore
from hrbench.study_run import StudyRun
from hrbench.tasks.audit import StageAudit
from pipelines.defs.study.evidence import prior_expected_success
from pipelines.defs.study.partitions import AGENTS
from resources.study import StudyResource

with warnings.catch_warnings():
    # Beta API, and the documented way to map agent x task partitions onto the agent dimension.
    warnings.simplefilter("ignore", BetaWarning)
    BY_AGENT = MultiToSingleDimensionPartitionMapping(partition_dimension_name="agent")

PROTOCOL, TRIALS, ESTIMATES, REPORT = "protocol", "trials", "estimates", "report"
SINGLE_RUN = BackfillPolicy.single_run()
# Stale work is redone when its inputs or the code change (and the automation sensor is on, docs/deploy.md).
STALE = AutomationCondition.eager() | (AutomationCondition.code_version_changed()
                                       & ~AutomationCondition.any_deps_missing()
                                       & ~AutomationCondition.in_progress())


def _pairs(context: AssetExecutionContext) -> list[tuple[str, str]]:
    """(agent, task) of every partition this run materializes."""
    keys = [k.keys_by_dimension for k in context.partition_keys]  # type: ignore[attr-defined]
    return [(k["agent"], k["task"]) for k in keys]


def _key(agent: str, task: str) -> str:
    return f"{agent}|{task}"  # MultiPartitionKey's string form: dimensions sorted by name


def _version(tables: dict[str, pd.DataFrame]) -> DataVersion:
    """Content hash of the tables (order-free), Dagster's data version of this materialization."""
    digest = hashlib.sha256()
    for key in sorted(tables):
        digest.update(key.encode() + b"\0" + pd.util.hash_pandas_object(tables[key], index=False).to_numpy().tobytes())
    return DataVersion(digest.hexdigest()[:24])


def registered(run: StudyRun, agent: str) -> AgentRegistration:
    """The agent's stored registration under this protocol; Failure if it is missing or no longer matches."""
    stored = load_registration(run.out_dir, agent)
    current = register_agent(run.preregistration, run.study.agent(agent))
    if stored is None or stored.prereg_sha256 != run.prereg_sha256:
        raise Failure(f"agent {agent!r} has no registration under pre-registration {run.prereg_sha256[:12]} in "
                      f"{run.out_dir}/registrations: materialize agent_registration for it first")
    if stored.agent_sha256 != current.agent_sha256:
        raise Failure(f"agent {agent!r} is registered as {stored.agent_sha256[:12]} but its config or program is now "
                      f"{current.agent_sha256[:12]}: a changed agent is a new agent — give it a new id")
    return stored


def _stamp(frame: pd.DataFrame, registration: AgentRegistration) -> pd.DataFrame:
    frame = frame.copy()
    frame.insert(1 if "prereg_sha256" in frame else 0, "agent_sha256", registration.agent_sha256)
    return frame


def _meta(run: StudyRun, tables: dict[str, pd.DataFrame], regs: dict[str, AgentRegistration] | None = None,
          **extra) -> dict:
    meta = {"prereg_sha256": run.prereg_sha256, "code_version": code_version().label,
            "partitions": len(tables), "rows": sum(len(t) for t in tables.values())}
    if regs and len(regs) == 1:
        meta["agent_sha256"] = next(iter(regs.values())).agent_sha256
    elif regs:
        meta["agent_sha256"] = MetadataValue.json({a: r.agent_sha256 for a, r in sorted(regs.items())})
    return {**meta, **extra}


def _parallel(run: StudyRun, per_partition: int, work, items: list) -> list:
    """Partitions in parallel when each has fewer trials than the pool (many small tasks); else one at a time."""
    workers = max(1, run.study.concurrency // max(1, min(run.study.concurrency, per_partition)))
    if workers == 1 or len(items) == 1:
        return [work(i) for i in items]
    with ThreadPoolExecutor(max_workers=workers) as pool:
        return list(pool.map(work, items))


def _previous_audit(run: StudyRun) -> list[StageAudit] | None:
    """The audit already stored under this pre-registration, if it passed and is intact.

    The pre-registration covers everything the audit depends on (task contents, check library,
    sandbox limits, code), so re-running it on an unchanged study only costs time."""
    record = read_record(run.out_dir, "verifier_audit", ())
    store = LocalTableStore(run.out_dir)
    if record is None or record.prereg_sha256 != [run.prereg_sha256] or not store.exists("verifier_audit", ()):
        return None
    if file_sha256(store.path("verifier_audit", ())) != record.sha256:
        return None
    stored = store.read("verifier_audit", ())
    rows = [StageAudit(**{k: (None if pd.isna(v) else v) for k, v in r.items() if k in StageAudit.model_fields})
            for r in stored.to_dict("records")]
    return rows if rows and all(r.ok for r in rows) else None


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


def _plot(residuals: pd.DataFrame) -> MetadataValue:
    return MetadataValue.md(f"![forest plot]({forest_plot(residuals)})")


def _output(value: object, data_version: DataVersion, metadata: dict) -> Output:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", BetaWarning)  # data versions are beta; they carry the provenance we need
        return Output(value, data_version=data_version, metadata=metadata)


def build_study_assets(agent_task: MultiPartitionsDefinition) -> list[AssetsDefinition]:
    """The assets, bound to the study's task partitions."""
    with warnings.catch_warnings():
        # Beta/preview parameters we rely on deliberately: single-run backfill policies, automation conditions.
        warnings.simplefilter("ignore", BetaWarning)
        warnings.simplefilter("ignore", PreviewWarning)
        return _build(agent_task)


def _build(agent_task: MultiPartitionsDefinition) -> list[AssetsDefinition]:
    version = code_version().label

    @asset(group_name=PROTOCOL, code_version=version, automation_condition=STALE)
    def task_catalog(study: StudyResource) -> Output[pd.DataFrame]:
        """Every stage of every task in the study: family, structure, dependencies, work W, depth H_dep."""
        run = study.run()
        frame = run.catalog()
        return _output(frame, _version({"": frame}),
                      metadata=_meta(run, {"": frame}, tasks=len(run.tasks)))

    @asset(deps=[task_catalog], group_name=PROTOCOL, code_version=version, automation_condition=STALE)
    def verifier_audit(study: StudyResource) -> Output[pd.DataFrame]:
        """Reference = 1, nothing = 0, key step removed = stage fails, for every stage; fails the run otherwise."""
        run = study.run()
        previous = _previous_audit(run)
        rows = previous if previous is not None else run.audit()
        frame = run.stamp(pd.DataFrame([r.model_dump() for r in rows]))
        bad = [r for r in rows if not r.ok]
        if bad:
            lines = "\n".join(f"  {r.task}/{r.stage}: {r.problem}" for r in bad)
            raise Failure(f"verifier audit failed for {len(bad)} stage(s):\n{lines}")
        return _output(frame, _version({"": frame}), metadata=_meta(
            run, {"": frame}, stages_audited=len(rows), reused=previous is not None))

    @asset(deps=[verifier_audit], group_name=PROTOCOL, code_version=version, automation_condition=STALE)
    def preregistration(study: StudyResource) -> Output[pd.DataFrame]:
        """The frozen protocol (study settings, task contents, check library, sandbox limits, code version),
        OUT/preregistration.json, and its SHA-256. Agents register separately (agent_registration)."""
        run = study.run()
        try:
            path = run.write_preregistration()
        except StudyError as exc:
            raise Failure(str(exc)) from exc
        record_study_source(run.out_dir, run.loaded.source, run.study)
        prereg = run.preregistration
        frame = pd.DataFrame([{"prereg_sha256": run.prereg_sha256, "study": run.study.name,
                               "version": run.study.version, "code_version": prereg.code.label,
                               "git_commit": prereg.code.git_commit, "dirty": prereg.code.dirty,
                               "source_sha256": prereg.code.source_sha256,
                               "check_library_sha256": prereg.check_library_sha256,
                               "path": str(path.relative_to(run.out_dir))}])
        return _output(frame, DataVersion(run.prereg_sha256[:24]), _meta(
            run, {"": frame}, file=str(path.relative_to(run.out_dir)), git_commit=str(prereg.code.git_commit),
            dirty=str(prereg.code.dirty), study_file=str(run.loaded.source)))

    @asset(partitions_def=AGENTS, deps=[preregistration], group_name=TRIALS, code_version=version,
           backfill_policy=SINGLE_RUN, automation_condition=STALE)
    def agent_registration(context: AssetExecutionContext, study: StudyResource) -> Output[dict]:
        """Each agent's frozen config (and command program hash) under the protocol, OUT/registrations/<agent>.json,
        written before its first trial. A changed agent under the same id is refused."""
        run = study.run()
        tables, regs = {}, {}
        for agent in context.partition_keys:
            try:
                path = store_registration(run.out_dir, register_agent(run.preregistration, run.study.agent(agent)))
            except (StudyError, KeyError) as exc:
                raise Failure(str(exc)) from exc
            regs[agent] = reg = registered(run, agent)
            tables[agent] = pd.DataFrame([{
                "prereg_sha256": run.prereg_sha256, "agent_sha256": reg.agent_sha256, "agent": agent,
                "kind": reg.config.get("kind"), "program": ",".join(f"{p.path}={p.sha256[:12]}" for p in reg.program),
                "registered_at": reg.registered_at, "path": str(path.relative_to(run.out_dir))}])
        return _output(tables, _version(tables), metadata=_meta(run, tables, regs))

    @asset(partitions_def=agent_task, group_name=TRIALS, code_version=version, backfill_policy=SINGLE_RUN,
           automation_condition=STALE, deps=[AssetDep(agent_registration, partition_mapping=BY_AGENT)])
    def checkpoint_trials(context: AssetExecutionContext, study: StudyResource) -> Output[dict]:
        """m_i trials of each stage from its declared checkpoint e_{i-1}, one row per trial."""
        run = study.run()
        pairs = _pairs(context)
        regs = {a: registered(run, a) for a in sorted({a for a, _ in pairs})}
        per_partition = len(run.checkpoint_specs(*pairs[0])) if pairs else 1
        frames = _parallel(run, per_partition, lambda p: _stamp(run.records_table(run.run_checkpoint_trials(*p)),
                                                                regs[p[0]]), pairs)
        tables = {_key(*p): f for p, f in zip(pairs, frames)}
        everything = pd.concat(frames, ignore_index=True)
        return _output(tables, _version(tables), metadata=_meta(
            run, tables, regs, passed=int(everything["passed"].sum()),
            harness_errors=analysis.harness_errors(everything)))

    @asset(partitions_def=AGENTS, ins={"checkpoint_trials": AssetIn(partition_mapping=BY_AGENT)}, group_name=ESTIMATES,
           code_version=version, backfill_policy=SINGLE_RUN, automation_condition=STALE)
    def stage_estimates(context: AssetExecutionContext, study: StudyResource,
                        checkpoint_trials: pd.DataFrame) -> Output[dict]:
        """q̂_i with Wilson intervals per task and stage."""
        run = study.run()
        regs = {a: registered(run, a) for a in context.partition_keys}
        tables = {a: _stamp(analysis.stage_estimates(run, a, checkpoint_trials[checkpoint_trials["agent"] == a]),
                            regs[a]) for a in context.partition_keys}
        return _output(tables, _version(tables), metadata=_meta(run, tables, regs))

    @asset(partitions_def=AGENTS, group_name=ESTIMATES, code_version=version, backfill_policy=SINGLE_RUN,
           automation_condition=STALE)
    def expected_success(context: AssetExecutionContext, study: StudyResource,
                         stage_estimates: pd.DataFrame) -> Output[dict]:
        """P_expected per task: the pre-registered prediction, fixed before any natural rollout."""
        run = study.run()
        regs = {a: registered(run, a) for a in context.partition_keys}
        tables = {a: _stamp(analysis.expected_success(run, a, stage_estimates[stage_estimates["agent"] == a]),
                            regs[a]) for a in context.partition_keys}
        everything = pd.concat(tables.values(), ignore_index=True)
        return _output(tables, _version(tables), metadata=_meta(
            run, tables, regs, mean_p_expected=float(everything["p_expected"].mean())))

    @asset(partitions_def=agent_task, group_name=TRIALS, code_version=version, backfill_policy=SINGLE_RUN,
           automation_condition=STALE, deps=[AssetDep(expected_success, partition_mapping=BY_AGENT)])
    def natural_trials(context: AssetExecutionContext, study: StudyResource) -> Output[dict]:
        """m_0 natural end-to-end rollouts per task, one row per rollout (stages passed, stop stage).

        Runs no rollout before P_expected of this agent is fixed under the same pre-registration and
        agent registration (so nothing is observed, or journaled for reuse, ahead of the prediction):
        it then stores an empty table and the blocking check `expected_success_precedes_natural_trials`
        fails the run."""
        run = study.run()
        pairs = _pairs(context)
        regs = {a: registered(run, a) for a in sorted({a for a, _ in pairs})}
        expected = {a: prior_expected_success(context.instance, a, run.prereg_sha256, regs[a].agent_sha256)
                    for a in regs}
        refused = sorted(a for a, e in expected.items() if e is None)
        for agent in refused:
            context.log.error(f"no expected_success for agent {agent!r} under this pre-registration and "
                              "registration: no natural rollout was run")

        def one(pair: tuple[str, str]) -> pd.DataFrame:
            records = [] if pair[0] in refused else run.run_natural_trials(*pair)
            return _stamp(run.records_table(records), regs[pair[0]])

        per_partition = len(run.natural_specs(*pairs[0])) if pairs else 1
        frames = _parallel(run, per_partition, one, pairs)
        tables = {_key(*p): f for p, f in zip(pairs, frames)}
        everything = pd.concat(frames, ignore_index=True)
        extra = {"refused": f"expected_success missing for {refused}"} if refused else {}
        stamps = {f"expected_success_at/{a}": MetadataValue.timestamp(e.timestamp)
                  for a, e in expected.items() if e is not None}
        return _output(tables, _version(tables), metadata=_meta(
            run, tables, regs, passed=int(everything["passed"].sum()) if len(everything) else 0,
            harness_errors=analysis.harness_errors(everything), **stamps, **extra))

    @asset(partitions_def=AGENTS, group_name=ESTIMATES, code_version=version, backfill_policy=SINGLE_RUN,
           automation_condition=STALE, ins={
               "checkpoint_trials": AssetIn(partition_mapping=BY_AGENT),
               "natural_trials": AssetIn(partition_mapping=BY_AGENT),
           })
    def observed_success(context: AssetExecutionContext, study: StudyResource, checkpoint_trials: pd.DataFrame,
                         natural_trials: pd.DataFrame) -> Output[dict]:
        """r̂_i per stage and P̂_observed per task from the natural rollouts."""
        run = study.run()
        regs = {a: registered(run, a) for a in context.partition_keys}
        tables = {a: _stamp(analysis.observed_success(run, a, checkpoint_trials[checkpoint_trials["agent"] == a],
                                                      natural_trials[natural_trials["agent"] == a]), regs[a])
                  for a in context.partition_keys}
        return _output(tables, _version(tables), metadata=_meta(run, tables, regs))

    @asset(partitions_def=AGENTS, group_name=ESTIMATES, code_version=version, backfill_policy=SINGLE_RUN,
           automation_condition=STALE, ins={
               "checkpoint_trials": AssetIn(partition_mapping=BY_AGENT),
               "natural_trials": AssetIn(partition_mapping=BY_AGENT),
           }, deps=[expected_success, observed_success])
    def horizon_residuals(context: AssetExecutionContext, study: StudyResource, checkpoint_trials: pd.DataFrame,
                          natural_trials: pd.DataFrame) -> Output[dict]:
        """Γ_H = ln(P_expected / P_observed) per task, family and overall, with bootstrap intervals."""
        run = study.run()
        regs = {a: registered(run, a) for a in context.partition_keys}
        tables = {a: _stamp(analysis.horizon_residuals(run, a, checkpoint_trials[checkpoint_trials["agent"] == a],
                                                       natural_trials[natural_trials["agent"] == a]), regs[a])
                  for a in context.partition_keys}
        everything = pd.concat(tables.values(), ignore_index=True)
        headline = everything[everything["scope"] != "task"]
        extra = {}
        if len(tables) == 1:
            overall = headline[(headline["scope"] == "all") & (headline["condition"] == "baseline")].iloc[0]
            extra = {"gamma_all": float(overall["gamma"]), "ci_low": float(overall["ci_low"]),
                     "ci_high": float(overall["ci_high"])}
        return _output(tables, _version(tables), metadata=_meta(
            run, tables, regs, residuals=MetadataValue.md(residual_markdown(headline)), forest_plot=_plot(everything),
            **extra))

    @asset(ins={"horizon_residuals": AssetIn()}, group_name=REPORT, code_version=version,
           automation_condition=STALE)
    def study_report(study: StudyResource, horizon_residuals: pd.DataFrame) -> MaterializeResult:
        """The HTML report and summary.json: residual table, forest plot, lineage to the pre-registration."""
        run = study.run()
        residuals = analysis.current_residuals(run, horizon_residuals)
        summary = write_summary(run, residuals, run.out_dir / "summary.json")
        report = write_report(run, residuals, run.out_dir / "report.html")
        return MaterializeResult(metadata={
            "prereg_sha256": run.prereg_sha256, "code_version": version,
            "report": str(report.relative_to(run.out_dir)), "summary": str(summary.relative_to(run.out_dir)),
            "rows": len(residuals), "agents": len(set(residuals["agent"])),
            "residuals": MetadataValue.md(residual_markdown(residuals[residuals["scope"] != "task"])),
            "forest_plot": _plot(residuals),
        })

    return [task_catalog, verifier_audit, preregistration, agent_registration, checkpoint_trials, stage_estimates,
            expected_success, natural_trials, observed_success, horizon_residuals, study_report]
