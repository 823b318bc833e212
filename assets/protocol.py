"""The protocol assets: the task catalog, the verifier audit, the pre-registration, the tasks' depth (when the
study declares `depth:`) and each agent's registration, all fixed before any trial."""

import pandas as pd
from dagster import (
    AssetExecutionContext, AssetsDefinition, DataVersion, DynamicPartitionsDefinition, Failure, MetadataValue, Output,
    asset,
)

from assets.common import (
    PROTOCOL, SANDBOXES, SINGLE_RUN, STALE, TRIALS, asset_metadata, data_version, gated, registered, versioned_output,
)
from hrbench.lineage import read_record, stored_sha256
from hrbench.preregistration import record_study_source, store_registration
from hrbench.protocol import StudyError
from hrbench.report.context import depth_metadata
from hrbench.structure.study_depth import measure_study_depth
from hrbench.study_run import StudyRun
from hrbench.tasks.audit import StageAudit
from resources.study import StudyResource


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


def protocol_assets(agents: DynamicPartitionsDefinition, version: str, with_depth: bool) -> list[AssetsDefinition]:
    """task_catalog -> verifier_audit -> preregistration -> [task_depth], agent_registration."""

    @asset(group_name=PROTOCOL, code_version=version, automation_condition=STALE)
    def task_catalog(study: StudyResource) -> Output[pd.DataFrame]:
        """Every stage of every task in the study: family, structure, dependencies, work W, depth H_dep."""
        run = study.run()
        frame = run.design.catalog()
        return versioned_output(frame, data_version({"": frame}),
                       metadata=asset_metadata(run, {"": frame}, tasks=len(run.design.tasks)))

    @asset(deps=["task_catalog"], group_name=PROTOCOL, code_version=version, automation_condition=STALE,
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
        return versioned_output(frame, data_version({"": frame}), metadata=asset_metadata(
            run, {"": frame}, stages_audited=len(rows), reused=previous is not None))

    @asset(deps=["verifier_audit"], group_name=PROTOCOL, code_version=version, automation_condition=STALE)
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
        return versioned_output(frame, DataVersion(run.prereg_sha256[:24]), asset_metadata(
            run, {"": frame}, file=str(path.relative_to(run.out_dir)), git_commit=str(prereg.code.git_commit),
            dirty=str(prereg.code.dirty), study_file=str(source)))

    @asset(deps=["preregistration"], group_name=PROTOCOL, code_version=version, automation_condition=STALE,
           pool=SANDBOXES)
    def task_depth(study: StudyResource) -> Output[pd.DataFrame]:
        """Depth D by turn caps (depth paper App. B) and work W of the tasks the study's `depth:` names,
        measured with real rollouts of its depth agents; one row per task with every run made."""
        run = study.run()
        try:
            frame = measure_study_depth(run.design, run.runner.backend, run.stores)
        except StudyError as exc:
            raise Failure(str(exc)) from exc
        return versioned_output(frame, data_version({"": frame}), metadata=asset_metadata(
            run, {"": frame}, tasks=len(frame), runs=int(frame["n_runs"].sum()),
            **{k: MetadataValue.md(v) for k, v in depth_metadata(frame).items()}))

    @asset(partitions_def=agents, deps=["preregistration"], group_name=TRIALS, code_version=version,
           backfill_policy=SINGLE_RUN, automation_condition=STALE)
    def agent_registration(context: AssetExecutionContext, study: StudyResource) -> Output[dict]:
        """Each agent's frozen config (and command program hash) under the protocol, OUT/registrations/<agent>.json,
        written before its first trial. A changed agent under the same id is refused."""
        run = study.run()
        gated(run, "agent_registration", list(context.partition_keys))  # no agent is registered before setup
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
        return versioned_output(tables, data_version(tables), metadata=asset_metadata(run, tables, regs))

    return [task_catalog, verifier_audit, preregistration, *([task_depth] if with_depth else []), agent_registration]
