"""Protects the team deployment: webserver + daemon on a PostgreSQL instance run a study launched through GraphQL.

Real parts only: Debian's PostgreSQL (started by scripts/postgres.sh in a private data directory),
`dagster-webserver` and `dagster-daemon` on loopback, the study's step jobs launched by GraphQL
and finished by the agent sensor in the daemon, and a headless Chromium screenshot of the asset
lineage page (saved to test-artifacts/ and checked not to be blank).
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

import pytest
import yaml

from hrbench.catalogue import (
    CHECKPOINT, CHECKPOINT_TRIALS, EXPECTED, NATURAL, REPORT, RESIDUALS, SETUP, STAGE_ESTIMATES, StudyNames,
    table_key,
)
from hrbench.lineage import check_problems, read_record, record_key
from hrbench.storage import store_for
from tests.conftest import store_table, stored_table
from tests.deploy.conftest import write_study

REPO = Path(__file__).resolve().parents[2]
ARTIFACTS = REPO / "test-artifacts"
LOCATION = "hrbench"  # workspace.yaml
TEAM = StudyNames.of("teamstudy")  # the Dagster names of the study below: `teamstudy/...`, `teamstudy__...`

pytestmark = pytest.mark.slow


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _reset_signals() -> None:
    # dagster's servers ignore SIGINT/SIGTERM when started from a background shell; give them the defaults back
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)


class Deployment:
    def __init__(self, root: Path, postgres_url: str):
        self.port = _free_port()
        self.home = root / "dagster-home"
        self.home.mkdir()
        shutil.copy(REPO / "deploy" / "dagster.yaml", self.home / "dagster.yaml")
        self.out = root / "out"
        study = write_study(root, ["steady", "rotting"], name="teamstudy")
        # hrbench's settings in the one file every process reads (deploy/hrbench.yaml); the refresh every minute
        (self.home / "hrbench.yaml").write_text(yaml.safe_dump({
            "HRBENCH_STUDY": str(study), "HRBENCH_OUT": str(self.out), "HRBENCH_SENSOR_INTERVAL": 3,
            "HRBENCH_SCHEDULE": "* * * * *"}))
        environment = {k: v for k, v in os.environ.items() if k not in ("HRBENCH_STUDY", "HRBENCH_OUT",
                                                                         "HRBENCH_SENSOR_INTERVAL", "HRBENCH_SCHEDULE")}
        # a code server's answer (a run's launch) may take minutes on a loaded host (docs/deploy.md)
        self.env = {**environment, "DAGSTER_HOME": str(self.home), "DAGSTER_PG_URL": postgres_url,
                    "PYTHONPATH": str(REPO), "DAGSTER_GRPC_TIMEOUT_SECONDS": "300"}
        self.logs = root / "logs"
        self.logs.mkdir()
        self.procs: list[subprocess.Popen] = []
        self.named: dict[str, subprocess.Popen] = {}

    def start(self, name: str, argv: list[str]) -> None:
        log = open(self.logs / f"{name}.log", "a")
        self.named[name] = subprocess.Popen(argv, cwd=REPO, env=self.env, stdout=log, stderr=subprocess.STDOUT,
                                            preexec_fn=_reset_signals, start_new_session=True)
        self.procs.append(self.named[name])

    def start_daemon(self) -> None:
        self.start("daemon", [str(Path(sys.executable).parent / "dagster-daemon"), "run", "-w",
                              str(REPO / "workspace.yaml")])

    def kill_daemon(self) -> None:
        """SIGKILL to the daemon's process group: the daemon, the code server it started and the run workers that
        code server spawned (DefaultRunLauncher), as a crash or an OOM kill of the host's daemon would."""
        daemon = self.named["daemon"]
        os.killpg(daemon.pid, signal.SIGKILL)
        daemon.wait()

    def stop(self) -> None:
        for proc in self.procs:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGTERM)
        for proc in self.procs:
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                pass
            try:  # code servers the two started share their process group and may outlive them
                os.killpg(proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            proc.wait()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def graphql(self, query: str, variables: dict | None = None) -> dict:
        body = json.dumps({"query": query, "variables": variables or {}}).encode()
        request = urllib.request.Request(f"{self.url}/graphql", data=body, headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(request, timeout=60) as response:
            answer = json.loads(response.read())
        assert "errors" not in answer, answer["errors"]
        return answer["data"]

    def log_tail(self) -> str:
        """Why runs failed (from the event log), then the end of the servers' logs."""
        lines = []
        try:
            failed = self.graphql('{ runsOrError(filter: {statuses: [FAILURE]}) { ... on Runs { results { runId jobName '
                                  'tags { key value } } } } }')["runsOrError"]["results"]
            for run in failed:
                events = self.graphql("""query($id: ID!) { logsForRun(runId: $id) { ... on EventConnection { events {
                    __typename ... on ExecutionStepFailureEvent { error { message } } ... on MessageEvent { message }
                    } } } }""", {"id": run["runId"]})["logsForRun"]["events"]
                errors = [e.get("error", {}).get("message") or e.get("message") for e in events
                          if e["__typename"] in ("ExecutionStepFailureEvent", "RunFailureEvent")]
                lines.append(f"FAILED RUN {run['jobName']} {run['tags']}: {errors}")
        except Exception as exc:  # the diagnosis must not hide the failure it explains
            lines.append(f"(could not read failed runs: {exc})")
        lines += [f"--- {p.name}\n{p.read_text()[-3000:]}" for p in sorted(self.logs.glob("*.log"))]
        return "\n".join(lines)


@pytest.fixture
def deployment(tmp_path: Path, postgres_url: str):
    d = Deployment(tmp_path, postgres_url)
    workspace = str(REPO / "workspace.yaml")
    d.start("webserver", [sys.executable, "-m", "dagster_webserver", "-w", workspace, "-h", "127.0.0.1",
                          "-p", str(d.port)])
    try:
        deadline = time.monotonic() + 240
        while True:
            try:
                with urllib.request.urlopen(f"{d.url}/server_info", timeout=5):
                    break
            except OSError:
                alive = all(p.poll() is None for p in d.procs)
                assert alive and time.monotonic() < deadline, "webserver did not come up\n" + d.log_tail()
                time.sleep(1)
        d.graphql("mutation { setNuxSeen }")  # or a first-visit pop-up covers the page
        while not _location_loaded(d):
            assert time.monotonic() < deadline, "code location did not load\n" + d.log_tail()
            time.sleep(2)
        yield d  # the test starts the daemon (Deployment.start_daemon) once it has queued its first run
    finally:
        d.stop()


def _location_loaded(d: Deployment) -> bool:
    entries = d.graphql("""{ workspaceOrError { ... on Workspace { locationEntries { name loadStatus
        locationOrLoadError { __typename ... on PythonError { message } } } } } }""")["workspaceOrError"]["locationEntries"]
    entry = next((e for e in entries if e["name"] == LOCATION), None)
    assert entry is not None, f"no code location {LOCATION!r} among {[e['name'] for e in entries]}"
    error = entry["locationOrLoadError"] or {}
    assert error.get("__typename") != "PythonError", error.get("message")
    return entry["loadStatus"] == "LOADED" and error.get("__typename") == "RepositoryLocation"


ASSETS = """{ assetNodes { assetKey { path } isPartitioned
  partitionStats { numMaterialized numPartitions numFailed }
  assetMaterializations(limit: 1) { runId }
  assetChecksOrError { ... on AssetChecks { checks { name executionForLatestMaterialization { status } } } } } }"""


def _assets(d: Deployment) -> dict[str, dict]:
    nodes = d.graphql(ASSETS)["assetNodes"]
    assert all(n["assetKey"]["path"][0] == TEAM.namespace for n in nodes)  # every key in the study's namespace
    return {table_key(n["assetKey"]["path"]): n for n in nodes}


def _launch(d: Deployment, job: str, checks_of: str | None = None, **tags: str) -> str:
    """Launch the study's step job `job` (its catalogue name: `study_setup_job`) as the UI's Launchpad does;
    `checks_of`: only that asset's checks (its catalogue key; "Execute checks")."""
    tags = {"hrbench/study": "teamstudy", **tags}
    selector = {"repositoryLocationName": LOCATION, "repositoryName": "__repository__", "jobName": TEAM.name(job)}
    if checks_of:
        key = {"path": [TEAM.namespace, *checks_of.split("/")]}
        selector |= {"assetSelection": [], "assetCheckSelection": [{"assetKey": key, "name": c} for c in CHECKS]}
    data = d.graphql("""mutation($p: ExecutionParams!) { launchRun(executionParams: $p) { __typename
        ... on LaunchRunSuccess { run { runId } } ... on PythonError { message } } }""", {"p": {
        "selector": selector,
        "runConfigData": {}, "executionMetadata": {"tags": [{"key": k, "value": v} for k, v in tags.items()]}}})
    launched = data["launchRun"]
    assert launched["__typename"] == "LaunchRunSuccess", launched
    return launched["run"]["runId"]


CHECKS = ("data_quality", "hashes_match_stored_registration")  # the blocking checks of a trial table


def _status(d: Deployment, run_id: str) -> str:
    return d.graphql("query($id: ID!) { runOrError(runId: $id) { ... on Run { status } } }",
                     {"id": run_id})["runOrError"]["status"]


def test_a_study_runs_on_webserver_daemon_and_postgres(deployment: Deployment):
    d = deployment
    # queued before the daemon starts: the agent sensor's first tick sees it (a setup launched after that tick
    # would be a second one beside the sensor's)
    run_id = _launch(d, SETUP)
    d.start_daemon()
    deadline = time.monotonic() + 1500  # twelve run processes; on a loaded 2-core machine each takes ~30 s
    while _status(d, run_id) not in ("SUCCESS", "FAILURE", "CANCELED"):
        assert time.monotonic() < deadline, "setup run did not finish\n" + d.log_tail()
        time.sleep(2)
    assert _status(d, run_id) == "SUCCESS", d.log_tail()

    # the agent sensor (running by default in the daemon) adds both agents and runs their steps, then the report;
    # the daemon is killed while a run journals its trials, and started again
    killed, journaled = _kill_the_daemon_mid_trials(d, deadline)
    while True:
        nodes = _assets(d)
        if nodes["study_report"]["assetMaterializations"]:
            break
        assert time.monotonic() < deadline, "the sensor did not finish the study\n" + d.log_tail()
        time.sleep(3)

    expected = {"task_catalog", "verifier_audit", "preregistration", "agent_registration", "checkpoint_trials",
                "baseline/stage_estimates", "baseline/expected_success", "baseline/natural_trials",
                "baseline/observed_success", "baseline/horizon_residuals", "sensitivity_sweep", "resource_accounting",
                "study_report"}  # a baseline-only study: its branch, no contrasts
    assert set(nodes) == expected
    for name, node in nodes.items():
        assert node["assetMaterializations"], f"{name} never materialized"
        if node["isPartitioned"]:
            stats = node["partitionStats"]
            assert stats["numMaterialized"] == stats["numPartitions"] > 0 and not stats["numFailed"], (name, stats)
        for check in node["assetChecksOrError"].get("checks", []):
            assert check["executionForLatestMaterialization"]["status"] == "SUCCEEDED", (name, check)
    checks = {c["name"] for n in nodes.values() for c in n["assetChecksOrError"].get("checks", [])}
    assert {"expected_success_precedes_natural_trials", "data_quality", "hashes_match_stored_registration"} <= checks
    runs = d.graphql('{ runsOrError { ... on Runs { results { jobName status tags { key value } } } } }')
    results = [r for r in runs["runsOrError"]["results"] if r["status"] == "SUCCESS"]
    assert all({"key": "hrbench/study", "value": "teamstudy"} in r["tags"] for r in results)
    # setup, five steps per agent, report, one successful run each: independent of the task count (a run that
    # failed to launch on a loaded machine is retried by the sensor, so only successful runs are counted; the
    # refresh schedule's are not)
    study_runs = [r for r in _runs(d) if r["status"] == "SUCCESS" and "dagster/schedule_name" not in r["tags"]]
    by_step = _by_step(study_runs)
    assert all(len(runs) == 1 for runs in by_step.values()) and len(by_step) == 1 + 2 * 5 + 1, _runs_said(by_step)
    summary = json.loads((d.out / "summary.json").read_text())
    assert {r["agent"] for r in summary["residuals"]} == {"steady", "rotting"}
    _dagster_retried_the_killed_run_losing_no_trial(d, killed, journaled)

    _two_runs_of_one_agent_take_turns(d)
    _a_failed_check_stops_every_launch_path_until_it_passes(d)
    _the_schedule_refreshes_the_finished_study(d, finished=time.time(), deadline=deadline + 300)

    _screenshot_lineage(d)


def _by_step(runs: list[dict]) -> dict[str, list[dict]]:
    """Runs (from `_runs`) by the work they do: their job and agent (none for the setup and the report)."""
    steps: dict[str, list[dict]] = {}
    for run in runs:
        tags = run["tags"]
        agent = tags.get("hrbench/agent") or tags.get("dagster/partition") or \
            tags.get("dagster/asset_partition_range_start", "").split("|")[0]
        steps.setdefault(f"{run['jobName']}[{agent}]", []).append(run)
    return steps


def _runs_said(by_step: dict[str, list[dict]]) -> str:
    """Each step's runs in a line, the doubled steps first: who launched each run (sensor run key, schedule, a
    retry of which run, the UI) and when; short enough for a CI log."""
    def said(run: dict) -> str:
        tags = run["tags"]
        by = (f"key={tags['dagster/run_key']}" if "dagster/run_key" in tags else
              "schedule" if "dagster/schedule_name" in tags else "ui")
        if "dagster/parent_run_id" in tags:
            by += f" retry#{tags.get('dagster/retry_number', '?')} of {tags['dagster/parent_run_id'][:8]}"
        return f"{run['runId'][:8]} {by} t={int(run['startTime'] or 0) % 100000}"

    lines = {step: f"{step}: " + "; ".join(map(said, runs)) for step, runs in sorted(by_step.items())}
    doubled = [line for step, line in lines.items() if len(by_step[step]) > 1]
    # the first line is what a CI summary keeps
    return f"{len(by_step)} steps, doubled: {' | '.join(doubled) or 'none'}\n" + "\n".join(lines.values())


def _two_runs_of_one_agent_take_turns(d: Deployment) -> None:
    """Two runs on one agent launched at once (its registration, again): the second waits in the queue
    (deploy/dagster.yaml's tag concurrency limits), then both succeed."""
    first = _launch(d, "agent_registration_job", **{"dagster/partition": "steady", "hrbench/agent": "steady"})
    second = _launch(d, "agent_registration_job", **{"dagster/partition": "steady", "hrbench/agent": "steady"})
    seen, deadline = [], time.monotonic() + 600
    while True:
        statuses = (_status(d, first), _status(d, second))
        seen.append(statuses)
        if all(s in ("SUCCESS", "FAILURE", "CANCELED") for s in statuses):
            break
        assert time.monotonic() < deadline, f"the two runs did not finish: {seen[-5:]}\n" + d.log_tail()
        time.sleep(0.5)
    assert statuses == ("SUCCESS", "SUCCESS"), d.log_tail()
    busy = ("STARTING", "STARTED")
    assert not any(a in busy and b in busy for a, b in seen), seen  # never both at work on the agent
    assert any(a in busy and b == "QUEUED" for a, b in seen), seen  # the second waited for the first


def _the_schedule_refreshes_the_finished_study(d: Deployment, finished: float, deadline: float) -> None:
    """The refresh schedule (every minute here, from hrbench.yaml) re-runs the setup of the finished study."""
    query = """{ runsOrError(filter: {tags: [{key: "dagster/schedule_name", value: "teamstudy__study_refresh_schedule"}]}) {
        ... on Runs { results { runId status startTime tags { key value } } } } }"""
    while True:
        runs = [r for r in d.graphql(query)["runsOrError"]["results"] if (r["startTime"] or 0) > finished]
        done = [r for r in runs if r["status"] in ("SUCCESS", "FAILURE", "CANCELED")]
        if done:
            break
        assert time.monotonic() < deadline, "no refresh ran after the study finished\n" + d.log_tail()
        time.sleep(3)
    assert done[0]["status"] == "SUCCESS", d.log_tail()
    failed = [r for r in d.graphql(query)["runsOrError"]["results"] if r["status"] == "FAILURE"
              and {"key": "dagster/will_retry", "value": "true"} not in r["tags"]]  # not the daemon's kill
    assert not failed, d.log_tail()  # no refresh failed, during the study or after it


def _screenshot_lineage(d: Deployment) -> None:
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    assert chromium, "chromium is not installed: scripts/deploy_deps.sh installs it"
    ARTIFACTS.mkdir(exist_ok=True)
    target = ARTIFACTS / "asset-lineage.png"
    target.unlink(missing_ok=True)
    profile = tempfile.mkdtemp(prefix="hrbench-chromium-")
    try:
        subprocess.run([chromium, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
                        "--disable-background-networking", "--disable-component-update", "--disable-sync",
                        f"--user-data-dir={profile}", "--hide-scrollbars", "--virtual-time-budget=20000",
                        f"--screenshot={target}", "--window-size=1600,1000",
                        f"{d.url}/asset-groups"], capture_output=True, timeout=180)
    finally:
        shutil.rmtree(profile, ignore_errors=True)
    assert target.is_file() and target.stat().st_size > 10_000, "no screenshot"
    import matplotlib.image as mpimg
    import numpy as np

    pixels = mpimg.imread(target)[..., :3]
    colours = np.unique((pixels.reshape(-1, 3) * 255).astype(np.uint8), axis=0)
    assert len(colours) > 50 and float(pixels.std()) > 0.02, "the lineage page rendered blank"


RUNS = """{ runsOrError { ... on Runs { results { runId jobName status startTime tags { key value } } } } }"""


def _runs(d: Deployment) -> list[dict]:
    runs = d.graphql(RUNS)["runsOrError"]["results"]
    # job names as the catalogue spells them (the instance's carry the study's namespace)
    return [{**r, "jobName": r["jobName"].removeprefix(TEAM.name("")), "tags": {t["key"]: t["value"] for t in r["tags"]}}
            for r in runs]


def _set_schedule(d: Deployment, running: bool) -> None:
    selector = {"repositoryLocationName": LOCATION, "repositoryName": "__repository__",
                "scheduleName": TEAM.name("study_refresh_schedule")}
    if running:
        d.graphql("mutation($s: ScheduleSelector!) { startSchedule(scheduleSelector: $s) { __typename } }",
                  {"s": selector})
        return
    state = d.graphql("query($s: ScheduleSelector!) { scheduleOrError(scheduleSelector: $s) { ... on Schedule { "
                      "scheduleState { id } } } }", {"s": selector})["scheduleOrError"]["scheduleState"]
    d.graphql("mutation($id: String!) { stopRunningSchedule(id: $id) { __typename } }", {"id": state["id"]})


def _journal_lines(d: Deployment) -> dict[str, list[str]]:
    """Every trial journal's records (one line per trial), by path; not a line the kill tore (no newline yet)."""
    return {str(p): [line for line in p.read_text().split("\n")[:-1] if line.strip()]
            for p in sorted((d.out / "journal").rglob("*.jsonl"))}


def _kill_the_daemon_mid_trials(d: Deployment, deadline: float) -> tuple[str, dict[str, list[str]]]:
    """SIGKILL to the daemon (its code server and run workers with it) the moment a trial run journals a trial,
    then a new daemon. The refresh schedule is paused meanwhile, and the kill waits for a moment when no run is
    being launched: a run caught STARTING has no worker to check and waits out run monitoring's start timeout
    (15 min, deploy/dagster.yaml). Returns the killed trial run and the journals as they were at the kill."""
    _set_schedule(d, running=False)
    busy = ("NOT_STARTED", "STARTING")
    while True:
        assert time.monotonic() < deadline, "no trial run to kill\n" + d.log_tail()
        runs = _runs(d)
        started = [r for r in runs if r["jobName"] in (CHECKPOINT, NATURAL) and r["status"] == "STARTED"]
        if not started or any(r["status"] in busy for r in runs):
            time.sleep(0.5)
            continue
        before, until = sum(map(len, _journal_lines(d).values())), time.monotonic() + 15
        while time.monotonic() < until and sum(map(len, _journal_lines(d).values())) == before:
            time.sleep(0.01)
        runs = _runs(d)
        target = [r for r in runs if r["runId"] in {s["runId"] for s in started} and r["status"] == "STARTED"]
        if target and not any(r["status"] in busy for r in runs):
            d.kill_daemon()
            journaled = _journal_lines(d)
            break
    assert sum(map(len, journaled.values())) > before  # killed after a trial was journaled, its run unfinished
    d.start_daemon()
    _set_schedule(d, running=True)
    return target[0]["runId"], journaled


def _dagster_retried_the_killed_run_losing_no_trial(d: Deployment, killed: str,
                                                    journaled: dict[str, list[str]]) -> None:
    """Run monitoring marked the killed run failed (its worker is gone), Dagster's run retries launched it again,
    and every trial journaled before the kill is in the tables once, as recorded then (not run again)."""
    runs = {r["runId"]: r for r in _runs(d)}
    assert runs[killed]["status"] == "FAILURE", runs[killed]
    assert runs[killed]["tags"].get("dagster/will_retry") == "true", runs[killed]["tags"]
    retries = [r for r in runs.values() if r["tags"].get("dagster/parent_run_id") == killed]
    assert [r["status"] for r in retries] == ["SUCCESS"], retries
    events = d.graphql("""query($id: ID!) { logsForRun(runId: $id) { ... on EventConnection { events {
        __typename ... on MessageEvent { message } } } } }""", {"id": killed})["logsForRun"]["events"]
    assert any(e["__typename"] == "RunFailureEvent" and "is gone" in e["message"] for e in events), events

    import pandas as pd

    tables = [pd.read_parquet(p) for p in sorted((d.out / "tables").rglob("*.parquet"))]
    rows = pd.concat([t for t in tables if "trial_key" in t.columns])
    assert rows["trial_key"].is_unique, rows["trial_key"][rows["trial_key"].duplicated()].tolist()  # none twice
    final = {json.loads(line)["trial_key"] for lines in _journal_lines(d).values() for line in lines}
    assert set(rows["trial_key"]) == final  # every journaled trial is in a table: none lost
    started = dict(zip(rows["trial_key"], rows["started_at"]))
    before = [json.loads(line) for lines in journaled.values() for line in lines]
    assert before and all(started.get(r["trial_key"]) == r["started_at"] for r in before)  # kept, not run again


def _wait(d: Deployment, run_ids: list[str], minutes: float = 10) -> list[str]:
    deadline = time.monotonic() + 60 * minutes
    while True:
        statuses = [_status(d, r) for r in run_ids]
        if all(s in ("SUCCESS", "FAILURE", "CANCELED") for s in statuses):
            return statuses
        assert time.monotonic() < deadline, f"runs did not finish: {statuses}\n" + d.log_tail()
        time.sleep(2)


def _step_failures(d: Deployment, run_id: str) -> list[str]:
    events = d.graphql("""query($id: ID!) { logsForRun(runId: $id) { ... on EventConnection { events {
        __typename ... on ExecutionStepFailureEvent { error { message } } } } } }""", {"id": run_id})
    return [e["error"]["message"] for e in events["logsForRun"]["events"]
            if e["__typename"] == "ExecutionStepFailureEvent"]


def _backfill(d: Deployment, asset: str, agent: str) -> str:
    """A backfill of one partition of an asset, as the UI's "Materialize" over partitions submits it; its run."""
    data = d.graphql("""mutation($p: LaunchBackfillParams!) { launchPartitionBackfill(backfillParams: $p) {
        __typename ... on LaunchBackfillSuccess { backfillId } ... on PythonError { message } } }""", {"p": {
        "assetSelection": [{"path": [TEAM.namespace, *asset.split("/")]}], "partitionNames": [agent],
        "tags": [{"key": "hrbench/study", "value": "teamstudy"}]}})["launchPartitionBackfill"]
    assert data["__typename"] == "LaunchBackfillSuccess", data
    deadline = time.monotonic() + 600
    while True:  # the daemon's backfill iteration creates the run
        runs = [r for r in _runs(d) if r["tags"].get("dagster/backfill") == data["backfillId"]]
        if runs:
            return runs[0]["runId"]
        assert time.monotonic() < deadline, "the backfill launched no run\n" + d.log_tail()
        time.sleep(2)


def _materialized_by(d: Deployment, asset: str) -> set[str]:
    data = d.graphql("""query($k: AssetKeyInput!) { assetOrError(assetKey: $k) { ... on Asset {
        assetMaterializations(limit: 1000) { runId } } } }""", {"k": {"path": [TEAM.namespace, *asset.split("/")]}})
    return {m["runId"] for m in data["assetOrError"]["assetMaterializations"]}


def _a_failed_check_stops_every_launch_path_until_it_passes(d: Deployment) -> None:
    """A checkpoint table that lost a trial (its lineage record made to match, as if written so) fails its
    blocking data_quality check, run from the UI. While it fails, a UI launch of the next step's job and a
    backfill of a downstream asset start and fail before computing anything, the agent sensor requests nothing
    downstream and the refresh schedule runs only the setup; re-running the checkpoint step (its trials come
    back from the journal) passes the check, and the same launches then succeed."""
    agent, task = "steady", "tiny-chain"
    partition, asset = (agent, task), CHECKPOINT_TRIALS.name
    pair = {"dagster/asset_partition_range_start": f"{agent}|{task}",
            "dagster/asset_partition_range_end": f"{agent}|{task}"}
    key, store = f"tables/{asset}/{agent}/{task}.parquet", store_for(d.out)
    store_table(d.out, key, stored_table(d.out, key).iloc[1:])
    record = read_record(store, asset, partition)
    record.sha256 = hashlib.sha256(store.get(key)).hexdigest()
    store.put(record_key(asset, partition), record.model_dump_json().encode())
    broken = time.time()
    _wait(d, [_launch(d, CHECKPOINT, checks_of=asset, **pair)])
    assert any("blocking check data_quality failed" in p for p in check_problems(store, asset, partition))

    estimates = STAGE_ESTIMATES.key("baseline")
    ui = _launch(d, EXPECTED, **{"dagster/partition": agent})
    backfill = _backfill(d, estimates, agent)
    assert _wait(d, [ui, backfill]) == ["FAILURE", "FAILURE"], d.log_tail()
    for run_id in (ui, backfill):
        assert any(f"{asset}/{agent}/{task}: blocking check data_quality failed" in m
                   for m in _step_failures(d, run_id)), _step_failures(d, run_id)
    assert not {ui, backfill} & _materialized_by(d, estimates)  # refused before computing anything
    deadline = time.monotonic() + 180  # the schedule (every minute) ticks while the check fails
    while not [r for r in _runs(d) if r["tags"].get("dagster/schedule_name") and (r["startTime"] or 0) > broken
               and r["status"] in ("SUCCESS", "FAILURE")]:
        assert time.monotonic() < deadline, "the refresh schedule did not run while the check failed\n" + d.log_tail()
        time.sleep(3)
    downstream = (EXPECTED, NATURAL, RESIDUALS, REPORT)
    launched = [(r["jobName"], r["tags"]) for r in _runs(d) if (r["startTime"] or 0) > broken
                and r["jobName"] in downstream and r["runId"] not in (ui, backfill)]
    assert not launched, launched  # neither the sensor nor the schedule started anything downstream

    assert _wait(d, [_launch(d, CHECKPOINT, **pair)]) == ["SUCCESS"], d.log_tail()  # the repair
    assert not check_problems(store, asset, partition)
    ui, backfill = _launch(d, EXPECTED, **{"dagster/partition": agent}), _backfill(d, estimates, agent)
    assert _wait(d, [ui, backfill]) == ["SUCCESS", "SUCCESS"], d.log_tail()
    assert {ui, backfill} <= _materialized_by(d, estimates)
