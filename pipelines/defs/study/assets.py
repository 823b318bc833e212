"""The asset graph of one study (DESIGN §8): shared checkpoint trials, one branch per condition,
then the contrasts, the sensitivity sweep and the report.

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

import pandas as pd
from dagster import (
    AssetDep, AssetExecutionContext, AssetIn, AssetKey, AssetsDefinition, AutomationCondition, BackfillPolicy, BetaWarning,
    DataVersion, Failure, MaterializeResult, MetadataValue, MultiPartitionsDefinition,
    MultiToSingleDimensionPartitionMapping, Output, PreviewWarning, asset,
)

from hrbench import analysis
from hrbench.lineage import read_record, stored_sha256
from hrbench.harness.records import records_table
from hrbench.preregistration import AgentRegistration, code_version, load_registration, record_study_source, store_registration
from hrbench.protocol import StudyError
from hrbench.report.context import depth_metadata, figure_metadata
from hrbench.report.figures import forest_plot
from hrbench.report.html import study_report as write_study_report
from hrbench.report.summary import write_summary
from hrbench.structure.study_depth import measure_study_depth
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
# Dagster's concurrency pool of every step that runs sandboxes: the instance bounds how many run at once
# across runs (deploy/dagster.yaml, `concurrency.pools`).
SANDBOXES = "sandboxes"
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
        digest.update(key.encode() + b"\0" + pd.util.hash_pandas_object(_hashable(tables[key]), index=False)
                      .to_numpy().tobytes())
    return DataVersion(digest.hexdigest()[:24])


def _hashable(frame: pd.DataFrame) -> pd.DataFrame:
    """The frame with list-valued cells (a residual row's `flags`) as their repr: pandas hashes scalars only."""
    listy = [c for c in frame.columns if frame[c].dtype == object
             and frame[c].map(lambda v: isinstance(v, (list, tuple, dict)) or hasattr(v, "tolist")).any()]
    return frame.assign(**{c: frame[c].map(repr) for c in listy}) if listy else frame


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


def _parallel(run: StudyRun, work, items: list) -> list:
    """Partitions side by side; their trials share the runner's one bound of `concurrency` at a time,
    so a partition's slowest trials never leave the pool idle while the next partition waits."""
    workers = min(len(items), run.study.concurrency)
    if workers <= 1:
        return [work(i) for i in items]
    with ThreadPoolExecutor(max_workers=workers) as pool:
        return list(pool.map(work, items))


def _previous_audit(run: StudyRun) -> list[StageAudit] | None:
    """The audit already stored under this pre-registration, if it passed and is intact.

    The pre-registration covers everything the audit depends on (task contents, check library,
    sandbox limits, code), so re-running it on an unchanged study only costs time."""
    store = run.stores.tables
    record = read_record(store.store, "verifier_audit", ())
    if record is None or record.prereg_sha256 != [run.prereg_sha256]:
        return None
    if stored_sha256(store.store, store.key("verifier_audit", ())) != record.sha256:
        return None
    stored = store.read("verifier_audit", ())
    rows = [StageAudit(**{k: _cell(v) for k, v in r.items() if k in StageAudit.model_fields})
            for r in stored.to_dict("records")]
    return rows if rows and all(r.ok for r in rows) else None


def _cell(value: object) -> object:
    """A stored cell as the model field it came from: parquet gives a list column (`notes`) back as an array,
    a missing scalar as NaN."""
    if hasattr(value, "tolist") and not pd.api.types.is_scalar(value):
        return value.tolist()
    return None if pd.api.types.is_scalar(value) and pd.isna(value) else value


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
    png = forest_plot(residuals)
    uri = f"data:image/png;base64,{base64.b64encode(png).decode()}" if png else ""
    return MetadataValue.md(f"![forest plot]({uri})" if png else "(no interval to plot)")


def _output(value: object, data_version: DataVersion, metadata: dict) -> Output:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", BetaWarning)  # data versions are beta; they carry the provenance we need
        return Output(value, data_version=data_version, metadata=metadata)


def build_study_assets(agent_task: MultiPartitionsDefinition, conditions: list[str],
                       prefix_rollouts: bool = False, depth: bool = False) -> list[AssetsDefinition]:
    """The assets, bound to the study's task partitions and conditions (each condition its own branch).

    `prefix_rollouts`: a `matched` checkpoint protocol needs recorded transcripts (`solution_conditioned`:
    the agent's own passing workspaces), so rollouts that only provide them run before the checkpoint
    trials (their outcomes are never observed as P_obs).
    `depth`: the study declares `depth:`, so a `task_depth` asset measures D of its tasks.
    """
    with warnings.catch_warnings():
        # Beta/preview parameters we rely on deliberately: single-run backfill policies, automation conditions.
        warnings.simplefilter("ignore", BetaWarning)
        warnings.simplefilter("ignore", PreviewWarning)
        return _build(agent_task, conditions, with_prefix=prefix_rollouts, with_depth=depth)


def _per_agent(context: AssetExecutionContext, run: StudyRun, compute) -> tuple[dict, dict]:
    """{agent: stamped table} over the agents of this run, and their registrations."""
    regs = {a: registered(run, a) for a in context.partition_keys}
    return {a: _stamp(compute(a), regs[a]) for a in context.partition_keys}, regs


def _of(frame: pd.DataFrame, agent: str) -> pd.DataFrame:
    return frame[frame["agent"] == agent] if len(frame) else frame


def _build(agent_task: MultiPartitionsDefinition, conditions: list[str],
           with_prefix: bool, with_depth: bool = False) -> list[AssetsDefinition]:
    # `with_prefix`, not `prefix_rollouts`: the asset function of that name below would shadow the flag.
    version = code_version().label

    @asset(group_name=PROTOCOL, code_version=version, automation_condition=STALE)
    def task_catalog(study: StudyResource) -> Output[pd.DataFrame]:
        """Every stage of every task in the study: family, structure, dependencies, work W, depth H_dep."""
        run = study.run()
        frame = run.design.catalog()
        return _output(frame, _version({"": frame}),
                       metadata=_meta(run, {"": frame}, tasks=len(run.design.tasks)))

    @asset(deps=[task_catalog], group_name=PROTOCOL, code_version=version, automation_condition=STALE,
           pool=SANDBOXES)
    def verifier_audit(study: StudyResource) -> Output[pd.DataFrame]:
        """Reference = 1, nothing = 0, key step removed = stage fails, for every stage; fails the run otherwise."""
        run = study.run()
        previous = _previous_audit(run)
        rows = previous if previous is not None else run.runner.audit()
        frame = run.design.stamp(pd.DataFrame([r.model_dump() for r in rows]))
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
        source = run.design.loaded.source
        run.stores.publish(record_study_source(run.out_dir, source, run.study))
        prereg = run.design.preregistration
        frame = pd.DataFrame([{"prereg_sha256": run.prereg_sha256, "study": run.study.name,
                               "version": run.study.version, "code_version": prereg.code.label,
                               "git_commit": prereg.code.git_commit, "dirty": prereg.code.dirty,
                               "source_sha256": prereg.code.source_sha256,
                               "check_library_sha256": prereg.check_library_sha256,
                               "path": str(path.relative_to(run.out_dir))}])
        return _output(frame, DataVersion(run.prereg_sha256[:24]), _meta(
            run, {"": frame}, file=str(path.relative_to(run.out_dir)), git_commit=str(prereg.code.git_commit),
            dirty=str(prereg.code.dirty), study_file=str(source)))

    @asset(deps=[preregistration], group_name=PROTOCOL, code_version=version, automation_condition=STALE,
           pool=SANDBOXES)
    def task_depth(study: StudyResource) -> Output[pd.DataFrame]:
        """Depth D by turn caps (depth paper App. B) and work W of the tasks the study's `depth:` names,
        measured with real rollouts of its depth agents; one row per task with every run made."""
        run = study.run()
        try:
            frame = measure_study_depth(run.design, run.runner.backend, run.stores)
        except StudyError as exc:
            raise Failure(str(exc)) from exc
        return _output(frame, _version({"": frame}), metadata=_meta(
            run, {"": frame}, tasks=len(frame), runs=int(frame["n_runs"].sum()),
            **{k: MetadataValue.md(v) for k, v in depth_metadata(frame).items()}))

    @asset(partitions_def=AGENTS, deps=[preregistration], group_name=TRIALS, code_version=version,
           backfill_policy=SINGLE_RUN, automation_condition=STALE)
    def agent_registration(context: AssetExecutionContext, study: StudyResource) -> Output[dict]:
        """Each agent's frozen config (and command program hash) under the protocol, OUT/registrations/<agent>.json,
        written before its first trial. A changed agent under the same id is refused."""
        run = study.run()
        tables, regs = {}, {}
        for agent in context.partition_keys:
            try:
                path = store_registration(run.out_dir, run.design.registration(agent))
                run.stores.publish(path)
            except (StudyError, KeyError) as exc:
                raise Failure(str(exc)) from exc
            regs[agent] = reg = registered(run, agent)
            tables[agent] = pd.DataFrame([{
                "prereg_sha256": run.prereg_sha256, "agent_sha256": reg.agent_sha256, "agent": agent,
                "kind": reg.config.get("kind"), "program": ",".join(f"{p.path}={p.sha256[:12]}" for p in reg.program),
                "registered_at": reg.registered_at, "path": str(path.relative_to(run.out_dir))}])
        return _output(tables, _version(tables), metadata=_meta(run, tables, regs))

    def trial_tables(context: AssetExecutionContext, run: StudyRun, execute) -> tuple[dict, dict, pd.DataFrame]:
        """Every (agent, task) partition of this run: its stamped trial table; the registrations; all rows."""
        pairs = _pairs(context)
        regs = {a: registered(run, a) for a in sorted({a for a, _ in pairs})}
        frames = _parallel(run, lambda p: _stamp(records_table(execute(p)), regs[p[0]]), pairs)
        tables = {_key(*p): f for p, f in zip(pairs, frames)}
        return tables, regs, pd.concat(frames, ignore_index=True)

    @asset(partitions_def=agent_task, group_name=TRIALS, code_version=version, backfill_policy=SINGLE_RUN,
           automation_condition=STALE, deps=[AssetDep(agent_registration, partition_mapping=BY_AGENT)], pool=SANDBOXES)
    def prefix_rollouts(context: AssetExecutionContext, study: StudyResource) -> Output[dict]:
        """Rollouts under full history whose transcripts `matched` checkpoints start from (not observed as P_obs)."""
        run = study.run()
        tables, regs, everything = trial_tables(context, run, lambda p: run.runner.run_prefix_rollouts(*p))
        return _output(tables, _version(tables), metadata=_meta(
            run, tables, regs, harness_errors=analysis.harness_errors(everything)))

    @asset(partitions_def=agent_task, group_name=TRIALS, code_version=version, backfill_policy=SINGLE_RUN,
           automation_condition=STALE, pool=SANDBOXES,
           deps=[AssetDep(agent_registration, partition_mapping=BY_AGENT),
                 *([prefix_rollouts] if with_prefix else [])])
    def checkpoint_trials(context: AssetExecutionContext, study: StudyResource) -> Output[dict]:
        """m_i trials of each stage from its declared checkpoint e_{i-1}, one row per trial, for every
        distinct checkpoint protocol (keyed by its hash: conditions sharing a protocol share its trials)."""
        run = study.run()
        tables, regs, everything = trial_tables(context, run, lambda p: run.runner.run_checkpoint_trials(*p))
        return _output(tables, _version(tables), metadata=_meta(
            run, tables, regs, passed=int(everything["passed"].sum()),
            harness_errors=analysis.harness_errors(everything), protocols=len(run.runner.protocol_labels())))

    branches = [a for condition in conditions for a in _condition_branch(condition, agent_task, version)]
    natural_ins = {f"natural_{c}": AssetIn(key=AssetKey([c, "natural_trials"]), partition_mapping=BY_AGENT)
                   for c in conditions}
    per_agent = dict(partitions_def=AGENTS, code_version=version, backfill_policy=SINGLE_RUN,
                     automation_condition=STALE)

    @asset(group_name=ESTIMATES, ins={"checkpoint_trials": AssetIn(partition_mapping=BY_AGENT), **natural_ins},
           deps=[AssetKey([c, "horizon_residuals"]) for c in conditions], **per_agent)
    def intervention_contrasts(context: AssetExecutionContext, study: StudyResource, checkpoint_trials: pd.DataFrame,
                               **natural: pd.DataFrame) -> Output[dict]:
        """ΔΓ(I) = Γ(baseline) − Γ(I) per condition, task, family and overall, paired over tasks."""
        run = study.run()
        rollouts = pd.concat(natural.values(), ignore_index=True)
        tables, regs = _per_agent(context, run, lambda a: analysis.intervention_contrasts(
            run.design, a, _of(checkpoint_trials, a), _of(rollouts, a)))
        return _output(tables, _version(tables), metadata=_meta(run, tables, regs))

    @asset(group_name=ESTIMATES, ins={"checkpoint_trials": AssetIn(partition_mapping=BY_AGENT),
                                      "natural_trials": AssetIn(key=AssetKey(["baseline", "natural_trials"]),
                                                                partition_mapping=BY_AGENT)},
           deps=[AssetKey(["baseline", "horizon_residuals"])], **per_agent)
    def sensitivity_sweep(context: AssetExecutionContext, study: StudyResource, checkpoint_trials: pd.DataFrame,
                          natural_trials: pd.DataFrame) -> Output[dict]:
        """Γ of the baseline under every admissible protocol, baseline model, zero rule and decomposition."""
        run = study.run()
        tables, regs = _per_agent(context, run, lambda a: analysis.sensitivity_sweep(
            run.design, a, _of(checkpoint_trials, a), _of(natural_trials, a)))
        extra = {}
        if len(tables) == 1:
            verdicts = analysis.sensitivity_verdicts(next(iter(tables.values())))
            overall = verdicts[verdicts["scope"] == "all"].iloc[0]
            extra = {"choices": int(overall["n_choices"]), "verdict_all": str(overall["verdict"])}
        return _output(tables, _version(tables), metadata=_meta(run, tables, regs, **extra))

    @asset(group_name=ESTIMATES, ins={"checkpoint_trials": AssetIn(partition_mapping=BY_AGENT), **natural_ins},
           **per_agent)
    def resource_accounting(context: AssetExecutionContext, study: StudyResource, checkpoint_trials: pd.DataFrame,
                            **natural: pd.DataFrame) -> Output[dict]:
        """Turns, tokens, wall time and cost per condition and trial kind, side by side."""
        run = study.run()
        rollouts = pd.concat(natural.values(), ignore_index=True)
        tables, regs = _per_agent(context, run, lambda a: analysis.resource_accounting(
            run.design, a, _of(checkpoint_trials, a), _of(rollouts, a)))
        return _output(tables, _version(tables), metadata=_meta(run, tables, regs))

    # A study of the baseline alone has no intervention to contrast: no contrasts asset.
    interventions = len(conditions) > 1
    report_ins = {f"residuals_{c}": AssetIn(key=AssetKey([c, "horizon_residuals"])) for c in conditions}
    report_ins["sensitivity_sweep"] = AssetIn()
    report_ins["resource_accounting"] = AssetIn()
    if interventions:
        report_ins["intervention_contrasts"] = AssetIn()

    @asset(ins=report_ins, deps=[task_depth] if with_depth else [], group_name=REPORT, code_version=version,
           automation_condition=STALE)
    def study_report(study: StudyResource, sensitivity_sweep: pd.DataFrame, resource_accounting: pd.DataFrame,
                     **tables_in: pd.DataFrame) -> MaterializeResult:
        """The HTML report and summary.json: residuals per condition, contrasts, sensitivity, lineage, and
        (from the stores) dense rewards, task_depth and the transduction verifiers' per-record scores."""
        run = study.run()
        contrasts = tables_in.pop("intervention_contrasts", pd.DataFrame())
        tables = analysis.current_tables(run.design, pd.concat(tables_in.values(), ignore_index=True),
                                         contrasts, sensitivity_sweep, resource_accounting)
        summary = write_summary(run.design, tables, run.stores.summary_path)
        report = write_study_report(run.design, tables, run.stores.report_path, run.stores)
        run.stores.publish(summary)
        run.stores.publish(report.path)
        residuals = tables.residuals
        return MaterializeResult(metadata={
            "prereg_sha256": run.prereg_sha256, "code_version": version,
            "report": str(report.path.relative_to(run.out_dir)), "summary": str(summary.relative_to(run.out_dir)),
            "rows": len(residuals), "agents": len(set(residuals["agent"])),
            "residuals": MetadataValue.md(residual_markdown(residuals[residuals["scope"] != "task"])),
            # the report's own figures (figure_forest among them): drawn once, not again for the metadata
            **{k: MetadataValue.md(v) for k, v in figure_metadata(report.figures).items()},
        })

    return [task_catalog, verifier_audit, preregistration, *([task_depth] if with_depth else []), agent_registration,
            *([prefix_rollouts] if with_prefix else []), checkpoint_trials, *branches,
            *([intervention_contrasts] if interventions else []), sensitivity_sweep, resource_accounting, study_report]


def _condition_branch(condition: str, agent_task: MultiPartitionsDefinition, version: str) -> list[AssetsDefinition]:
    """One condition's own branch: stage estimates → expected → natural rollouts → observed → residuals."""
    prefix = [condition]
    per_agent = dict(key_prefix=prefix, partitions_def=AGENTS, code_version=version, backfill_policy=SINGLE_RUN,
                     automation_condition=STALE)

    def key(name: str) -> AssetKey:
        return AssetKey([condition, name])

    def estimands(run: StudyRun) -> list[analysis.Estimand]:
        return [analysis.Estimand.declared(run.study, condition)]

    @asset(name="stage_estimates", group_name=ESTIMATES, ins={"checkpoint_trials": AssetIn(partition_mapping=BY_AGENT)},
           **per_agent)
    def stage_estimates(context: AssetExecutionContext, study: StudyResource,
                        checkpoint_trials: pd.DataFrame) -> Output[dict]:
        """q̂_i with Wilson intervals per task and stage, from this condition's checkpoint protocol."""
        run = study.run()
        tables, regs = _per_agent(context, run, lambda a: analysis.stage_estimates(
            run.design, a, _of(checkpoint_trials, a), estimands(run)))
        return _output(tables, _version(tables), metadata=_meta(
            run, tables, regs, protocol=run.study.checkpoint_protocol(condition).protocol_hash()))

    @asset(name="expected_success", group_name=ESTIMATES, ins={"stage_estimates": AssetIn(key=key("stage_estimates"))},
           **per_agent)
    def expected_success(context: AssetExecutionContext, study: StudyResource,
                         stage_estimates: pd.DataFrame) -> Output[dict]:
        """P_expected(I) per task: this condition's prediction, fixed before any of its natural rollouts."""
        run = study.run()
        tables, regs = _per_agent(context, run, lambda a: analysis.expected_success(
            run.design, a, _of(stage_estimates, a)))
        everything = pd.concat(tables.values(), ignore_index=True)
        return _output(tables, _version(tables), metadata=_meta(
            run, tables, regs, mean_p_expected=float(everything["p_expected"].mean())))

    @asset(key_prefix=prefix, name="natural_trials", partitions_def=agent_task, group_name=TRIALS,
           code_version=version, backfill_policy=SINGLE_RUN, automation_condition=STALE, pool=SANDBOXES,
           deps=[AssetDep(key("expected_success"), partition_mapping=BY_AGENT)])
    def natural_trials(context: AssetExecutionContext, study: StudyResource) -> Output[dict]:
        """m_0 natural end-to-end rollouts of this condition per task (stages passed, stop stage).

        Runs no rollout before this condition's P_expected for this agent is fixed under the same
        pre-registration and agent registration (so nothing is observed, or journaled for reuse, ahead
        of the prediction): it then stores an empty table and the blocking check
        `expected_success_precedes_natural_trials` fails the run."""
        run = study.run()
        pairs = _pairs(context)
        regs = {a: registered(run, a) for a in sorted({a for a, _ in pairs})}
        expected = {a: prior_expected_success(context.instance, a, run.prereg_sha256, regs[a].agent_sha256,
                                              condition=condition)
                    for a in regs}
        refused = sorted(a for a, e in expected.items() if e is None)
        for agent in refused:
            context.log.error(f"no {condition} expected_success for agent {agent!r} under this pre-registration and "
                              "registration: no natural rollout was run")

        def one(pair: tuple[str, str]) -> pd.DataFrame:
            records = [] if pair[0] in refused else run.runner.run_natural_trials(*pair, condition)
            return _stamp(records_table(records), regs[pair[0]])

        frames = _parallel(run, one, pairs)
        tables = {_key(*p): f for p, f in zip(pairs, frames)}
        everything = pd.concat(frames, ignore_index=True)
        extra = {"refused": f"expected_success missing for {refused}"} if refused else {}
        stamps = {f"expected_success_at/{a}": MetadataValue.timestamp(e.timestamp)
                  for a, e in expected.items() if e is not None}
        return _output(tables, _version(tables), metadata=_meta(
            run, tables, regs, passed=int(everything["passed"].sum()) if len(everything) else 0,
            harness_errors=analysis.harness_errors(everything), **stamps, **extra))

    @asset(name="observed_success", group_name=ESTIMATES, ins={
        "checkpoint_trials": AssetIn(partition_mapping=BY_AGENT),
        "natural_trials": AssetIn(key=key("natural_trials"), partition_mapping=BY_AGENT),
    }, **per_agent)
    def observed_success(context: AssetExecutionContext, study: StudyResource, checkpoint_trials: pd.DataFrame,
                         natural_trials: pd.DataFrame) -> Output[dict]:
        """r̂_i per stage and P̂_observed(I) per task from this condition's natural rollouts."""
        run = study.run()
        tables, regs = _per_agent(context, run, lambda a: analysis.observed_success(
            run.design, a, _of(checkpoint_trials, a), _of(natural_trials, a), estimands(run)))
        return _output(tables, _version(tables), metadata=_meta(run, tables, regs))

    @asset(name="horizon_residuals", group_name=ESTIMATES, ins={
        "checkpoint_trials": AssetIn(partition_mapping=BY_AGENT),
        "natural_trials": AssetIn(key=key("natural_trials"), partition_mapping=BY_AGENT),
        "expected_success": AssetIn(key=key("expected_success")),
    }, deps=[key("observed_success")], **per_agent)
    def horizon_residuals(context: AssetExecutionContext, study: StudyResource, checkpoint_trials: pd.DataFrame,
                          natural_trials: pd.DataFrame, expected_success: pd.DataFrame) -> Output[dict]:
        """Γ_H(I) = ln(P_expected(I) / P_observed(I)) per task, family and overall, from the registered prediction."""
        run = study.run()
        try:
            tables, regs = _per_agent(context, run, lambda a: analysis.horizon_residuals(
                run.design, a, _of(checkpoint_trials, a), _of(natural_trials, a), _of(expected_success, a),
                estimands(run)))
        except analysis.ExpectedMismatch as exc:
            raise Failure(str(exc)) from exc
        everything = pd.concat(tables.values(), ignore_index=True)
        headline = everything[everything["scope"] != "task"]
        extra = {}
        if len(tables) == 1:
            overall = headline[headline["scope"] == "all"].iloc[0]
            # an undefined Γ or a missing interval (too few tasks for one) is left out, not shown as a number
            extra = {k: float(overall[k]) for k in ("gamma", "ci_low", "ci_high")
                     if overall[k] is not None and not pd.isna(overall[k])}
            extra = {("gamma_all" if k == "gamma" else k): v for k, v in extra.items()}
        return _output(tables, _version(tables), metadata=_meta(
            run, tables, regs, residuals=MetadataValue.md(residual_markdown(headline)), forest_plot=_plot(everything),
            **extra))

    return [stage_estimates, expected_success, natural_trials, observed_success, horizon_residuals]
