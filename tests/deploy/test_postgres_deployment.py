"""Protects the team deployment: webserver + daemon on a PostgreSQL instance run a study launched through GraphQL.

Real parts only: Debian's PostgreSQL (started by scripts/postgres.sh in a private data directory),
`dagster-webserver` and `dagster-daemon` on loopback, the study's step jobs launched by GraphQL
and finished by the agent sensor in the daemon, and a headless Chromium screenshot of the asset
lineage page (saved to test-artifacts/ and checked not to be blank).
"""

from __future__ import annotations

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

from hrbench.catalogue import StudyNames, table_key
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


@pytest.fixture(scope="module")
def postgres_url():
    data = Path(tempfile.mkdtemp(prefix="hrbench-pg-"))
    data.chmod(0o755)  # the server runs as the postgres user
    script = REPO / "scripts" / "postgres.sh"
    started = subprocess.run([str(script), "start", str(data / "db"), str(_free_port())], capture_output=True,
                             text=True, timeout=300)
    assert started.returncode == 0, started.stderr
    yield started.stdout.strip()
    subprocess.run([str(script), "stop", str(data / "db")], capture_output=True, timeout=120)
    shutil.rmtree(data, ignore_errors=True)


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
        self.env = {**environment, "DAGSTER_HOME": str(self.home), "DAGSTER_PG_URL": postgres_url,
                    "PYTHONPATH": str(REPO)}
        self.logs = root / "logs"
        self.logs.mkdir()
        self.procs: list[subprocess.Popen] = []

    def start(self, name: str, argv: list[str]) -> None:
        log = open(self.logs / f"{name}.log", "w")
        self.procs.append(subprocess.Popen(argv, cwd=REPO, env=self.env, stdout=log, stderr=subprocess.STDOUT,
                                           preexec_fn=_reset_signals, start_new_session=True))

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
    d.start("daemon", [str(Path(sys.executable).parent / "dagster-daemon"), "run", "-w", workspace])
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
        yield d
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


def _launch(d: Deployment, job: str, **tags: str) -> str:
    """Launch the study's step job `job` (its catalogue name: `study_setup_job`) as the UI does."""
    tags = {"hrbench/study": "teamstudy", **tags}
    data = d.graphql("""mutation($p: ExecutionParams!) { launchRun(executionParams: $p) { __typename
        ... on LaunchRunSuccess { run { runId } } ... on PythonError { message } } }""", {"p": {
        "selector": {"repositoryLocationName": LOCATION, "repositoryName": "__repository__", "jobName": TEAM.name(job)},
        "runConfigData": {}, "executionMetadata": {"tags": [{"key": k, "value": v} for k, v in tags.items()]}}})
    launched = data["launchRun"]
    assert launched["__typename"] == "LaunchRunSuccess", launched
    return launched["run"]["runId"]


def _status(d: Deployment, run_id: str) -> str:
    return d.graphql("query($id: ID!) { runOrError(runId: $id) { ... on Run { status } } }",
                     {"id": run_id})["runOrError"]["status"]


def test_a_study_runs_on_webserver_daemon_and_postgres(deployment: Deployment):
    d = deployment
    run_id = _launch(d, "study_setup_job")  # queued; the daemon launches it
    deadline = time.monotonic() + 1500  # twelve run processes; on a loaded 2-core machine each takes ~30 s
    while _status(d, run_id) not in ("SUCCESS", "FAILURE", "CANCELED"):
        assert time.monotonic() < deadline, "setup run did not finish\n" + d.log_tail()
        time.sleep(2)
    assert _status(d, run_id) == "SUCCESS", d.log_tail()

    # the agent sensor (running by default in the daemon) adds both agents and runs their steps, then the report
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
    # setup, five steps per agent, report: independent of the task count (a run that failed to launch on a
    # loaded machine is retried by the sensor, so only successful runs are counted; the refresh schedule's are not)
    study_runs = [r for r in results if not any(t["key"] == "dagster/schedule_name" for t in r["tags"])]
    assert len(study_runs) == 1 + 2 * 5 + 1, [(r["jobName"], {t["key"]: t["value"] for t in r["tags"]
                                                               if not t["key"].startswith("dagster/code")})
                                              for r in study_runs]
    summary = json.loads((d.out / "summary.json").read_text())
    assert {r["agent"] for r in summary["residuals"]} == {"steady", "rotting"}

    _two_runs_of_one_agent_take_turns(d)
    _the_schedule_refreshes_the_finished_study(d, finished=time.time(), deadline=deadline + 300)

    _screenshot_lineage(d)


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
        ... on Runs { results { runId status startTime } } } }"""
    while True:
        runs = [r for r in d.graphql(query)["runsOrError"]["results"] if (r["startTime"] or 0) > finished]
        done = [r for r in runs if r["status"] in ("SUCCESS", "FAILURE", "CANCELED")]
        if done:
            break
        assert time.monotonic() < deadline, "no refresh ran after the study finished\n" + d.log_tail()
        time.sleep(3)
    assert done[0]["status"] == "SUCCESS", d.log_tail()
    failed = [r for r in d.graphql(query)["runsOrError"]["results"] if r["status"] == "FAILURE"]
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
