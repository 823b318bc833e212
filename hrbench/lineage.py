"""Lineage an auditor can check: a record beside every stored table, the chain behind each residual,
and `verify`, which re-hashes an output directory and names every file that no longer matches (the
cached environment states included: hrbench/envs/states.py).

Layout under OUT: `preregistration.json` (the protocol), `registrations/<agent>.json` (one per
agent), `tables/[<condition>/]<asset>[/<key>...].parquet`, and beside each table
`lineage/[<condition>/]<asset>[/<key>...].json`:
its sha256, rows, run id, time written and the sha256 of the tables it was computed from; and
`checks/[<condition>/]<asset>[/<key>...]/<check>.json`: the verdict of each of its blocking checks, bound to
the bytes judged (written by the check; the gate between steps reads them: hrbench/gate.py).
"""

from __future__ import annotations

import hashlib
import io
import json
from collections import defaultdict
from datetime import datetime, timezone
from pathlib import Path

import pandas as pd
from pydantic import BaseModel

from hrbench import catalogue
from hrbench.catalogue import (
    CHECKPOINT_TRIALS, CONDITION_TABLES, EXPECTED_SUCCESS, HORIZON_RESIDUALS, NATURAL_TRIALS, TABLES, TRIAL_TABLES,
)
from hrbench.envs.docker import sealed_state_problems
from hrbench.envs.states import cached_states
from hrbench.envs.states import check as check_state
from hrbench.envs.states import record_path
from hrbench.exits import NO_RESULT_REASONS
from hrbench.preregistration import AgentRegistration, Preregistration
from hrbench.protocol import sha256_json
from hrbench.storage import Store, TableStore, store_for
from hrbench.stores import PREREGISTRATION_KEY, REGISTRATIONS, registration_key



class TableRecord(BaseModel):
    """What was stored, by which run, when, from what."""

    asset: str
    partition: list[str]
    path: str  # relative to the output directory
    sha256: str  # of the parquet file's bytes
    rows: int
    run_id: str
    written_at: str  # ISO 8601, UTC
    code_version: str
    prereg_sha256: list[str]
    agent_sha256: list[str]
    inputs: dict[str, str]  # upstream asset -> sha256 over the records of the tables read


def record_key(asset: str, partition: tuple[str, ...]) -> str:
    """Where a table's lineage record lives in the store."""
    if not partition:
        return f"lineage/{asset}.json"
    return "/".join(("lineage", asset, *partition[:-1], f"{partition[-1]}.json"))


def _store(where: Store | Path | str) -> Store:
    return where if isinstance(where, Store) else store_for(where)


def write_record(where: Store | Path, asset: str, partition: tuple[str, ...], sha256: str, frame: pd.DataFrame,
                 run_id: str, code_version: str, inputs: dict[str, str]) -> TableRecord:
    """Record a table just written (atomically, like the table); `sha256` is of the table's stored bytes."""
    record = TableRecord(
        asset=asset, partition=list(partition), path=TableStore.key(asset, partition),
        sha256=sha256, rows=len(frame), run_id=run_id,
        written_at=datetime.now(timezone.utc).isoformat(timespec="milliseconds"), code_version=code_version,
        prereg_sha256=_distinct(frame, "prereg_sha256"), agent_sha256=_distinct(frame, "agent_sha256"),
        inputs=inputs,
    )
    _store(where).put(record_key(asset, partition), (record.model_dump_json(indent=2) + "\n").encode())
    return record


def read_record(where: Store | Path, asset: str, partition: tuple[str, ...]) -> TableRecord | None:
    """A table's lineage record (None if there is none); `where` is a store or a (local-store) output directory."""
    try:
        return TableRecord.model_validate_json(_store(where).get(record_key(asset, partition)))
    except FileNotFoundError:
        return None


def stored_sha256(where: Store | Path, key: str) -> str | None:
    """The sha256 of a stored object's bytes (None if it is not stored)."""
    try:
        return hashlib.sha256(_store(where).get(key)).hexdigest()
    except FileNotFoundError:
        return None


def inputs_digest(records: list[TableRecord]) -> str:
    """One version for the set of tables an asset read (order-free)."""
    return sha256_json(sorted(r.sha256 for r in records))


def file_sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def _distinct(frame: pd.DataFrame, column: str) -> list[str]:
    return sorted(str(v) for v in frame[column].dropna().unique()) if column in frame and len(frame) else []


# -- check verdicts -----------------------------------------------------------------------------

class CheckRecord(BaseModel):
    """One blocking check's verdict on one partition of a table, as the check wrote it."""

    asset: str
    partition: list[str]
    check: str
    passed: bool
    table_sha256: str | None  # the bytes judged (from the table's lineage record); None: there was no table
    run_id: str
    checked_at: str  # ISO 8601, UTC
    description: str = ""


def check_record_key(asset: str, partition: tuple[str, ...], check: str) -> str:
    return "/".join(("checks", asset, *partition, f"{check}.json"))


def write_check_record(store: Store, asset: str, partition: tuple[str, ...], check: str, passed: bool, run_id: str,
                       description: str | None) -> CheckRecord:
    """Record a check's verdict on a partition, bound to the table's current bytes."""
    lineage = read_record(store, asset, partition)
    record = CheckRecord(asset=asset, partition=list(partition), check=check, passed=passed,
                         table_sha256=lineage.sha256 if lineage else None, run_id=run_id,
                         checked_at=datetime.now(timezone.utc).isoformat(timespec="milliseconds"),
                         description=(description or "")[:2000])
    store.put(check_record_key(asset, partition, check), (record.model_dump_json(indent=2) + "\n").encode())
    return record


def read_check_record(store: Store, asset: str, partition: tuple[str, ...], check: str) -> CheckRecord | None:
    try:
        return CheckRecord.model_validate_json(store.get(check_record_key(asset, partition, check)))
    except FileNotFoundError:
        return None


def check_problems(store: Store, asset: str, partition: tuple[str, ...]) -> list[str]:
    """Each blocking check of this table partition that failed, never ran, or ran on other bytes than the table's."""
    spec = catalogue.table(asset)
    lineage = read_record(store, asset, partition)
    where = "/".join((asset, *partition))
    if lineage is None:
        return [f"{where}: no table"] if spec.blocking_checks else []
    problems = []
    for check in spec.blocking_checks:
        record = read_check_record(store, asset, partition, check)
        if record is None:
            problems.append(f"{where}: blocking check {check} never ran")
        elif record.table_sha256 != lineage.sha256:
            problems.append(f"{where}: blocking check {check} never ran on the current table (it judged "
                            f"{str(record.table_sha256)[:12]}, run {record.run_id[:8]}; the table is {lineage.sha256[:12]})")
        elif not record.passed:
            problems.append(f"{where}: blocking check {check} failed (run {record.run_id[:8]}): "
                            f"{record.description.splitlines()[0] if record.description else 'no description'}")
    return problems


# -- verify -----------------------------------------------------------------------------------


class Problem(BaseModel):
    path: str  # relative to the output directory
    problem: str


def verify(out_dir: Path, store: Store | None = None) -> tuple[list[Problem], dict[str, int]]:
    """Re-hash everything in the study's store (default: as configured for OUT); return the problems
    (object and what is wrong) and what was checked."""
    store = store or store_for(out_dir)
    problems: list[Problem] = []
    checked: dict[str, int] = defaultdict(int)

    def bad(key: str, text: str) -> None:
        problems.append(Problem(path=key, problem=text))

    # the environment backend's cached states (always in the local output directory), whatever else is there
    for state in cached_states(Path(out_dir) / "cache"):
        checked["cached environment states"] += 1
        problem = check_state(state)
        if problem is not None:
            bad(str(state.relative_to(out_dir)), f"{problem}: changed after it was built (a checkpoint state is "
                                                 "rebuilt by the next trial that needs it)")
    # the docker backend's state images (in the engine), by the ids recorded in the cache when they were built
    for record, problem in sealed_state_problems(Path(out_dir) / "cache"):
        checked["cached environment states"] += 1
        if problem is not None:
            bad(str(record.relative_to(out_dir)), f"state image {problem} (it is rebuilt by the next trial that "
                                                  "needs it)")
    try:
        prereg_text = store.get(PREREGISTRATION_KEY)
    except FileNotFoundError:
        bad("preregistration.json", "missing: not an hrbench output directory, or the study never got past its "
                                    "pre-registration")
        return problems, dict(checked)
    try:
        prereg = Preregistration.model_validate_json(prereg_text)
    except ValueError as exc:
        bad("preregistration.json", f"unreadable: {str(exc).splitlines()[0]}")
        return problems, dict(checked)
    checked["pre-registration"] += 1
    if sha256_json(prereg.body()) != prereg.prereg_sha256:
        bad("preregistration.json", f"content does not hash to its prereg_sha256 {prereg.prereg_sha256[:12]}: "
                                    "edited after it was frozen")

    registrations: dict[str, AgentRegistration] = {}
    for key in (k for k in store.list(REGISTRATIONS) if k.count("/") == 1 and k.endswith(".json")):
        checked["agent registrations"] += 1
        stem = key.split("/")[-1].removesuffix(".json")
        try:
            reg = AgentRegistration.model_validate_json(store.get(key))
        except ValueError as exc:
            bad(key, f"unreadable: {str(exc).splitlines()[0]}")
            continue
        if sha256_json(reg.body()) != reg.agent_sha256:
            bad(key, f"content does not hash to its agent_sha256 {reg.agent_sha256[:12]}: edited after registration")
        if reg.prereg_sha256 != prereg.prereg_sha256:
            bad(key, f"registered under pre-registration {reg.prereg_sha256[:12]}, not this directory's "
                     f"{prereg.prereg_sha256[:12]}")
        if stem != reg.agent:
            bad(key, f"holds agent {reg.agent!r}, not {stem!r}")
        registrations[reg.agent] = reg

    for table in (k for k in store.list("tables") if k.endswith(".parquet")):
        checked["tables"] += 1
        asset, partition = _asset_partition(table)
        record = read_record(store, asset, partition)
        if record is None:
            bad(table, f"no lineage record ({record_key(asset, partition)}): not written "
                       "by hrbench, or its record was deleted")
            continue
        data = store.get(table)
        if hashlib.sha256(data).hexdigest() != record.sha256:
            bad(table, f"sha256 differs from its lineage record (written by run {record.run_id} at "
                       f"{record.written_at}): the table was changed after it was written")
            continue
        frame = pd.read_parquet(io.BytesIO(data))
        if set(record.prereg_sha256) - {prereg.prereg_sha256} or ("prereg_sha256" in frame and
                                                                  set(frame["prereg_sha256"]) - {prereg.prereg_sha256}):
            bad(table, "rows carry a prereg_sha256 that is not this directory's pre-registration")
        if "agent" in frame and len(frame):
            for agent, rows in frame.groupby("agent"):
                reg = registrations.get(str(agent))
                if reg is None:
                    bad(table, f"rows of agent {agent!r}, which has no registration in registrations/")
                elif "agent_sha256" in rows and set(rows["agent_sha256"]) - {reg.agent_sha256}:
                    bad(table, f"rows of agent {agent!r} carry an agent_sha256 that is not its registration's "
                               f"{reg.agent_sha256[:12]}")
        if asset.split("/")[-1] in TRIAL_TABLES:
            checked["trial rows matched to the journal"] += _verify_against_journal(store, table, frame, bad)
        if catalogue.table(asset).blocking_checks:
            checked["tables' blocking-check verdicts"] += 1
            for problem in check_problems(store, asset, partition):
                bad(table, problem.split(": ", 1)[1] + ": nothing computed from it can be trusted until it passes")
    return problems, dict(checked)


def _asset_partition(table: str) -> tuple[str, tuple[str, ...]]:
    """The asset key and partition of a stored table (`tables/[<condition>/]<asset>[/<key>...].parquet`)."""
    parts = tuple(table.removeprefix("tables/").removesuffix(".parquet").split("/"))
    split = 2 if len(parts) > 2 and parts[1] in CONDITION_TABLES else 1
    return "/".join(parts[:split]), tuple(parts[split:])


def check_lines(store: Store) -> list[str]:
    """Every stored table whose blocking checks failed, never ran, or judged other bytes; or that all passed."""
    tables = [k for k in store.list("tables") if k.endswith(".parquet")]
    checked = [(k, *_asset_partition(k)) for k in tables]
    checked = [(k, a, p) for k, a, p in checked if catalogue.table(a).blocking_checks]
    problems = [problem for _, asset, partition in checked for problem in check_problems(store, asset, partition)]
    if not problems:
        return ["", f"blocking checks: passed on all {len(checked)} checked tables"]
    return ["", f"blocking checks: NOT PASSED on {len(problems)} (table, check) pairs — nothing computed from these "
                "tables can be trusted:", *(f"  {p}" for p in problems)]


def _journal_lines(store: Store, key: str) -> list[bytes]:
    """A journal's lines: the JSON-lines file, or (in an object store) its one-object-per-trial folder."""
    if key.endswith(".jsonl"):
        return store.get(key).splitlines()
    return [store.get(k) for k in store.list(key) if k.endswith(".json")]


def _verify_against_journal(store: Store, table: str, frame: pd.DataFrame, bad) -> int:
    """Every trial row equals the journal line of the same trial (the journal is written as trials finish)."""
    if not len(frame):
        return 0
    journal: dict[str, dict] = {}
    kind = str(frame["kind"].iloc[0])
    # natural rollouts are journaled per condition (journal/<prereg>/natural/<condition>/<agent>/<task>.jsonl)
    where = {f"{kind}/{c}" if kind == "natural" else kind
             for c in (frame["condition"] if "condition" in frame else [None])}
    wanted = {f"{w}/{agent}/{task}" for w in where
              for agent, task in {(str(a), str(t)) for a, t in zip(frame["agent"], frame["task"])}}
    journals = sorted({k.split(".jsonl")[0] + (".jsonl" if k.endswith(".jsonl") else ".jsonl.d")
                       for k in store.list("journal") if ".jsonl" in k and "/attempts/" not in k
                       and ".attempts.d/" not in k})
    for key in journals:
        if key.split("/", 2)[-1].split(".jsonl")[0] not in wanted:
            continue
        for line in _journal_lines(store, key):
            try:
                row = json.loads(line)
            except ValueError:
                continue
            journal.setdefault(row.get("trial_key"), row)
    compared = 0
    for row in frame.to_dict("records"):
        logged = journal.get(row["trial_key"])
        if logged is None:
            if row.get("exit_reason") not in NO_RESULT_REASONS:  # trials without a result are not journaled
                bad(table, f"trial {row['trial_key']} is not in the journal")
                return compared
            continue
        for field in ("passed", "stages_passed", "exit_reason", "turns", "stage_outcomes_json"):
            if field in logged and logged[field] != row[field]:
                bad(table, f"trial {row['trial_key']}: {field} is {row[field]!r} in the table but "
                           f"{logged[field]!r} in the journal")
                return compared
        compared += 1
    return compared


# -- lineage ------------------------------------------------------------------------------------


def lineage_lines(out_dir: Path, store: Store | None = None) -> list[str]:
    """For each residual row: the chain back to its trials, agent registration, tasks, code and protocol."""
    store = store or store_for(out_dir)
    prereg = Preregistration.model_validate_json(store.get(PREREGISTRATION_KEY))
    lines = [
        f"pre-registration {prereg.prereg_sha256}  frozen {prereg.frozen_at}  (preregistration.json)",
        f"  code {prereg.code.label}  commit {prereg.code.git_commit or '—'}  dirty {prereg.code.dirty}  "
        f"source {prereg.code.source_sha256[:12]}  check library {prereg.check_library_sha256[:12]}",
        f"  backend {prereg.sandbox.get('backend')}"
        + "".join(f"  {task}={name}" for task, name in sorted(prereg.sandbox.get("task_backends", {}).items())),
        f"  sandbox {prereg.sandbox.get('bwrap')}  budget {json.dumps(prereg.sandbox.get('budget'), sort_keys=True)}",
        "  tasks " + ", ".join(f"{t.name}={t.content_sha256[:12]}" for t in prereg.tasks),
    ]
    if prereg.sealed_inputs:
        jobs = sorted({path.split("/", 1)[0] for path in prereg.sealed_inputs})
        lines.append(f"  sealed inputs {len(prereg.sealed_inputs)} files of imported Harbor jobs {', '.join(jobs)}")
    cache = Path(out_dir) / "cache"
    sealed = [f"{state.relative_to(cache)}={record_path(state).read_text().strip()[:12]}"
              for state in cached_states(cache) if record_path(state).is_file()]
    if sealed:
        lines.append("  cached states (sealed when built, checked at every reuse) " + ", ".join(sealed))
    residual_tables = [k for k in store.list("tables") if k.count("/") == 3 and k.split("/")[2] == HORIZON_RESIDUALS.name
                       and k.endswith(".parquet")]
    for table in residual_tables:
        agent, condition = table.split("/")[3].removesuffix(".parquet"), table.split("/")[1]
        residuals = pd.read_parquet(io.BytesIO(store.get(table)))
        record = read_record(store, HORIZON_RESIDUALS.key(condition), (agent,))
        try:
            reg = AgentRegistration.model_validate_json(store.get(registration_key(agent)))
        except FileNotFoundError:
            reg = None
        lines.append("")
        lines.append(f"agent {agent}  registration {reg.agent_sha256[:12] if reg else 'MISSING'}  registered "
                     f"{reg.registered_at if reg else '—'}  (registrations/{agent}.json)  condition {condition}")
        expected = read_record(store, EXPECTED_SUCCESS.key(condition), (agent,))
        natural = [read_record(store, NATURAL_TRIALS.key(condition), (agent, t.name)) for t in prereg.tasks]
        checkpoint = [read_record(store, CHECKPOINT_TRIALS.key(), (agent, t.name)) for t in prereg.tasks]
        first_natural = min((r.written_at for r in natural if r), default=None)
        order = "expected before observed" if expected and first_natural and expected.written_at < first_natural \
            else "ORDER NOT SHOWN (expected_success must precede natural_trials)"
        lines.append(f"  checkpoint_trials {sum(r.rows for r in checkpoint if r)} rows in "
                     f"{sum(1 for r in checkpoint if r)} tables, last written "
                     f"{max((r.written_at for r in checkpoint if r), default='—')}")
        lines.append(f"  expected_success  {expected.written_at if expected else '—'}  run "
                     f"{expected.run_id[:8] if expected else '—'}  (P_expected fixed)")
        lines.append(f"  natural_trials    {first_natural or '—'} first written  "
                     f"{sum(r.rows for r in natural if r)} rows  -> {order}")
        lines.append(f"  horizon_residuals {record.written_at if record else '—'}  run "
                     f"{record.run_id[:8] if record else '—'}  sha256 {record.sha256[:12] if record else '—'}")
        for row in residuals.itertuples():
            gamma = "—" if pd.isna(row.gamma) else f"{row.gamma:.3f}"
            if row.scope == "task":
                ck = read_record(store, CHECKPOINT_TRIALS.key(), (agent, row.name))
                nat = read_record(store, NATURAL_TRIALS.key(condition), (agent, row.name))
                content = next((t.content_sha256[:12] for t in prereg.tasks if t.name == row.name), "—")
                lines.append(f"    {row.condition} task:{row.name}  Γ={gamma}  <- {_table(ck)} + {_table(nat)}  "
                             f"task content {content}")
                continue
            task_hashes = ", ".join(f"{t.name}:{t.content_sha256[:8]}" for t in prereg.tasks
                                    if row.scope == "all" or t.name == row.name or _family(prereg, t.name) == row.name)
            lines.append(f"    {row.condition} {row.scope}:{row.name}  Γ={gamma}  <- trials of tasks [{task_hashes}]")
    conditions = list(dict.fromkeys(t.split("/")[1] for t in residual_tables))
    return lines + check_lines(store) + report_lines(store, conditions)


def report_lines(store: Store, conditions: list[str]) -> list[str]:
    """The report's inputs: every stored table report.html and summary.json are made from (the report asset's
    upstream tables in the catalogue), with its records' rows and when it was last written."""
    lines = ["", "report report.html, summary.json  <- the tables it reads:"]
    for spec in (t for t in TABLES if t.report_reads):
        for key in spec.keys(conditions):
            keys = [record_key(key, ())] if spec.partitioned == "none" else store.list(f"lineage/{key}")
            records = [TableRecord.model_validate_json(store.get(k)) for k in keys if store.exists(k)]
            if records:
                lines.append(f"  {key:<30} {len(records)} tables, {sum(r.rows for r in records)} rows, last written "
                             f"{max(r.written_at for r in records)}")
    return lines


def _table(record: TableRecord | None) -> str:
    if record is None:
        return "(no lineage record)"
    return f"{record.path} ({record.rows} rows, sha256 {record.sha256[:12]}, run {record.run_id[:8]}, {record.written_at})"


def _family(prereg: Preregistration, task: str) -> str | None:
    return next((t.family for t in prereg.tasks if t.name == task), None)
