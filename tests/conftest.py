"""Shared fixtures: the fixture registry, a tiny study, and task-package builders."""

from __future__ import annotations

import os
import shutil
import tempfile
import uuid
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from hrbench.catalogue import StudyNames
from hrbench.protocol import load_study

FIXTURES = Path(__file__).resolve().parent / "fixtures"
TINY_STUDY = FIXTURES / "studies" / "tiny.yaml"


def study_names(study_path: str | Path) -> StudyNames:
    """The Dagster names of the study in this file: its asset keys, jobs, sensors and agents' partitions."""
    return StudyNames.of(load_study(study_path).study.name)


TINY = study_names(TINY_STUDY)
TINY_TASK = FIXTURES / "registry" / "tiny-chain"


def as_stored(design, agent: str, *frames):
    """Tables an analysis or a trial runner computed, stamped with the agent's registration hash as the assets
    store them (assets/common.py `stamp`): what the quality suites judge."""
    from assets.common import stamp

    registration = design.registration(agent)
    return tuple(stamp(f, registration) for f in frames)


@pytest.fixture
def tiny_task_copy(tmp_path: Path) -> Path:
    """A writable copy of the fixture task, for tests that break it."""
    target = tmp_path / "tiny-chain"
    shutil.copytree(TINY_TASK, target)
    return target


# -- which tests the S3 pass runs --------------------------------------------------------------
# scripts/test.sh runs the default suite twice: on local disk, then with every store on moto's S3
# (HRBENCH_STORE=s3). The S3 pass skips tests marked `no_store` (sandbox, verifier, statistics tests
# that never open a store): they would run the same code twice. THE RULE for a new test: leave it
# unmarked (it runs in both passes) unless it never opens a store, directly or through a fixture or a
# subprocess; only then may it carry `no_store`. The local pass enforces the rule: every opening of a
# store (`StoreConfig.from_env` / `.open`, in this process and in Python subprocesses, through
# tests/store_trace/sitecustomize.py on PYTHONPATH) is recorded under the running test's id, and a
# `no_store` test that opened one fails at teardown. A subprocess whose test replaces PYTHONPATH is not
# traced, so mark such a test `no_store` only when what it starts cannot reach a store.
#
# Modules whose default tests never open a store (measured with the trace over the whole default suite,
# then read where a subprocess replaces PYTHONPATH): their tests get `no_store` here, so that the files
# themselves need no edit. A module added here stays guarded; a test moved out of these runs in both
# passes (the safe direction). Slow tests keep their own marks: the S3 pass never runs them.
NO_STORE_MODULES = frozenset({
    "agents/test_agents_cli.py", "agents/test_command_agent.py", "agents/test_llm_agent.py",
    "deploy/test_code_version.py", "harbor/test_harbor_study.py", "harbor/test_harbor_tasks.py",
    "harness/test_fuzz.py", "harness/test_journal.py", "quality/test_suites.py", "report/test_report.py",
    "security/test_attacks.py", "security/test_cgroups.py", "security/test_command_agent_sandbox.py",
    "security/test_launcher.py", "security/test_noisy_neighbour.py", "security/test_verifier_integrity.py",
    "stats/test_aggregation.py", "stats/test_baselines.py", "stats/test_bootstrap.py",
    "stats/test_calibrated_aggregate.py", "stats/test_closed_form_rules.py", "stats/test_estimate.py",
    "stats/test_honest_intervals.py", "stats/test_horizon_planning.py", "stats/test_intervals.py",
    "stats/test_population_truth.py", "stats/test_quadrant.py", "stats/test_residual_outputs.py",
    "structure/test_dense.py", "structure/test_depth.py", "structure/test_depth_cli.py",
    "structure/test_depth_harness.py", "structure/test_packages.py", "structure/test_rank.py",
    "structure/test_sim_batching.py", "structure/test_tables.py", "structure/test_transducer_agent.py",
    "structure/test_transduction.py",
    "test_audit.py", "test_bad_input.py", "test_check_library.py", "test_core_boundary.py", "test_import_cycles.py",
    "test_plan_cli.py", "test_sandbox.py", "test_sim_agent.py", "test_static_names.py", "test_study_file.py",
    "test_tamper.py", "test_task_loader.py", "test_transduction_records.py",
    "test_layers.py", "stats/test_claims.py", "test_backend_registry.py", "deploy/test_k8s_values.py",
    "deploy/test_instance_config.py", "harbor/test_atif.py", "security/test_verifier_attribution.py",
    "security/test_cached_states.py", "security/test_bind_sources.py", "test_suite_selection.py",
    "security/test_etc_view.py",
})
# Tests of those modules that do open a store (they run in both passes).
STORE_TESTS = frozenset({
    "test_bad_input.py::test_a_journal_path_that_is_a_directory_is_one_clear_error",
    "test_backend_registry.py::test_a_study_run_uses_the_backend_registered_under_its_name",
    "security/test_cached_states.py::test_a_state_edited_from_outside_is_named_by_verify_and_rebuilt",
    # the first test of the module builds tests/quality/conftest.py's session study when its worker has not yet
    # (on two workers, test_checks.py may run on the other one)
    "quality/test_suites.py::test_the_study_tables_pass_every_suite_in_one_context",
})
TESTS = Path(__file__).resolve().parent


# -- two workers ---------------------------------------------------------------------------------
# scripts/test.sh runs every pass on two pytest-xdist workers. A group of tests runs on one worker, in order:
# each module is a group (its module-scoped studies are built once), and the docker suite is one group (one
# podman service, and the state images its session fixture builds once). Groups are handed out in collection
# order as workers free up, so the modules that take minutes come first (per-test durations in
# docs/performance.md) and the two workers finish together. A stale list only costs time, never an outcome.
DOCKER_GROUP = "docker/"
LONGEST_FIRST = (
    "test_demo.py", DOCKER_GROUP, "deploy/test_postgres_deployment.py", "test_plan_pilot.py",  # the slow pass
    "test_matched.py", "deploy/test_lineage.py", "test_pipeline.py", "agents/test_study_e2e.py",  # the default
    "test_checkpoint_variants.py", "test_resume_lock.py", "test_core_boundary.py",
)


# The slow pass runs on the two workers too, but for these modules, which scripts/test.sh runs afterwards one at
# a time (marked `serial`): they load the machine on purpose and measure how the harness holds up (the soak, the
# hostile and starving agents, on either backend), or run a real model whose CPU-bound replies have timeouts.
# (The docker suite's hostile agents beside another module once met a podman race, a starved container's
# archive call answered 500, in a clean-clone run.)
SERIAL_MODULES = frozenset({
    "test_soak.py", "security/test_hostile_agents.py", "security/test_hostile_load.py", "llm_real/test_real_model.py",
    "docker/test_docker_hostile_agents.py",
})


def worker_group(module: str) -> str:
    """The group a test module's tests run in on the workers (see above); `module` relative to tests/."""
    return DOCKER_GROUP if module.startswith(DOCKER_GROUP) else module


def _start_rank(module: str) -> int:
    group = worker_group(module)
    return LONGEST_FIRST.index(group) if group in LONGEST_FIRST else len(LONGEST_FIRST)


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log):
    """`--dist loadfile` with the groups above, in collection order rather than by group size (xdist's own
    `xdist_group` marks do not take with pytest 9, which no longer reads the node id xdist rewrites)."""
    if config.getvalue("dist") != "loadfile":
        return None
    from xdist.scheduler import LoadScopeScheduling

    class ModuleGroups(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return worker_group(nodeid.split("::", 1)[0].removeprefix("tests/"))

    config.option.loadscopereorder = False
    return ModuleGroups(config, log)


@pytest.hookimpl(tryfirst=True)  # run last, the sort did not survive collection
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    modules = {}
    for item in items:
        module = item.path.relative_to(TESTS).as_posix() if item.path.is_relative_to(TESTS) else ""
        modules[item] = module
        if (module in NO_STORE_MODULES and item.get_closest_marker("slow") is None
                and f"{module}::{item.name}" not in STORE_TESTS):
            item.add_marker(pytest.mark.no_store)
        if module in SERIAL_MODULES:
            item.add_marker(pytest.mark.serial)
    items.sort(key=lambda item: _start_rank(modules[item]))  # stable: a module's tests keep their order


def _store_trace_path(scratch: Path) -> Path | None:
    """The trace file of this (local) pass, tracing switched on; None in the S3 pass."""
    if os.environ.get("HRBENCH_STORE", "local") == "s3":
        return None
    from hrbench.storage.config import StoreConfig
    from tests.store_trace.sitecustomize import TRACE_ENV, trace

    # a trace file given from outside is kept (a survey of which tests use stores)
    os.environ.setdefault(TRACE_ENV, str(scratch / "store-trace"))
    site_dir = str(Path(__file__).resolve().parent / "store_trace")
    if site_dir not in os.environ.get("PYTHONPATH", "").split(os.pathsep):
        os.environ["PYTHONPATH"] = os.pathsep.join(p for p in (site_dir, os.environ.get("PYTHONPATH")) if p)
    trace(StoreConfig)
    return Path(os.environ[TRACE_ENV])


def pytest_configure(config: pytest.Config) -> None:
    from hrbench.content_cache import CACHE_ENV

    scratch = Path(tempfile.mkdtemp(prefix="hrbench-suite-"))
    config._hrbench_scratch = scratch  # type: ignore[attr-defined]
    # results cached across runs (hrbench.content_cache) start empty in every session: a test never
    # passes on an entry a developer's earlier run left behind
    os.environ[CACHE_ENV] = str(scratch / "cache")
    config._store_trace = _store_trace_path(scratch)  # type: ignore[attr-defined]
    config._store_users = set()  # type: ignore[attr-defined]
    config._store_trace_offset = 0  # type: ignore[attr-defined]


def pytest_unconfigure(config: pytest.Config) -> None:
    shutil.rmtree(getattr(config, "_hrbench_scratch", ""), ignore_errors=True)


def store_users(config: pytest.Config) -> set[str]:
    """Node ids of the tests that opened a store so far in this pass (reads the trace incrementally)."""
    path: Path | None = config._store_trace  # type: ignore[attr-defined]
    if path is not None and path.exists():
        with path.open("rb") as f:
            f.seek(config._store_trace_offset)  # type: ignore[attr-defined]
            new = f.read()
        complete = new[: new.rfind(b"\n") + 1]  # a line still being written waits for the next read
        config._store_trace_offset += len(complete)  # type: ignore[attr-defined]
        config._store_users.update(complete.decode().split())  # type: ignore[attr-defined]
    return config._store_users  # type: ignore[attr-defined]


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo):
    outcome = yield
    report = outcome.get_result()
    if call.when != "teardown" or item.get_closest_marker("no_store") is None:
        return
    if item.nodeid in store_users(item.config) and report.passed:
        report.outcome = "failed"
        report.longrepr = (f"{item.nodeid} is marked `no_store` but opened a store, so the S3 pass would "
                           "skip a storage test: remove the mark (tests/conftest.py states the rule)")


# -- the store the suite runs against -----------------------------------------------------------
# HRBENCH_STORE=s3 runs every test against moto's S3 server on loopback (started once per session):
# each output directory a test makes gets its own prefix (`{out}`), so tests stay independent.
# scripts/test.sh runs the default suite a second time this way.


@pytest.fixture(scope="session")
def moto_s3():
    """moto's S3 server on loopback: (endpoint URL, bucket)."""
    from tests.storage.moto import CREDENTIALS, create_bucket, moto_server

    server = moto_server()
    saved = {k: os.environ.get(k) for k in CREDENTIALS}
    os.environ.update(CREDENTIALS)
    create_bucket(server.url, "hrbench-test")
    yield server.url, "hrbench-test"
    server.kill()
    for key, value in saved.items():
        if value is None:
            os.environ.pop(key, None)
        else:
            os.environ[key] = value


@pytest.fixture(scope="session", autouse=True)
def suite_store(request):
    """Under HRBENCH_STORE=s3, point every store of the session at moto (subprocesses inherit it)."""
    if os.environ.get("HRBENCH_STORE", "local") != "s3":
        yield "local"
        return
    endpoint, bucket = request.getfixturevalue("moto_s3")
    os.environ.update({"HRBENCH_S3_ENDPOINT_URL": endpoint, "HRBENCH_S3_BUCKET": bucket,
                       "HRBENCH_S3_PREFIX": f"suite-{uuid.uuid4().hex[:8]}/{{out}}"})
    yield "s3"


@pytest.fixture(scope="module")
def postgres_url():
    """A PostgreSQL server of the module's own (scripts/postgres.sh, a private data directory): its URL."""
    import subprocess

    from tests.storage.moto import free_port

    data = Path(tempfile.mkdtemp(prefix="hrbench-pg-"))
    data.chmod(0o755)  # the server runs as the postgres user
    script = Path(__file__).resolve().parents[1] / "scripts" / "postgres.sh"
    started = subprocess.run([str(script), "start", str(data / "db"), str(free_port())], capture_output=True,
                             text=True, timeout=300)
    assert started.returncode == 0, started.stderr
    yield started.stdout.strip()
    subprocess.run([str(script), "stop", str(data / "db")], capture_output=True, timeout=120)
    shutil.rmtree(data, ignore_errors=True)


def stored_keys(out: Path, folder: str) -> list[str]:
    """Keys under `folder` in an output directory's store (local or S3, as the suite runs)."""
    from hrbench.storage import store_for

    return store_for(out).list(folder)


def stored_table(out: Path, key: str):
    """A stored parquet table by key (`tables/checkpoint_trials/steady/tiny-chain.parquet`)."""
    import io

    import pandas as pd

    from hrbench.storage import store_for

    return pd.read_parquet(io.BytesIO(store_for(out).get(key)))


def store_table(out: Path, key: str, frame) -> None:
    """Overwrite a stored table (tests that tamper with results)."""
    import io

    from hrbench.storage import store_for

    buffer = io.BytesIO()
    frame.to_parquet(buffer, index=False)
    store_for(out).put(key, buffer.getvalue())


def copy_output(source: Path, target: Path, ignore=None) -> None:
    """Copy an output directory and, with an S3 store, its objects (to the target's own prefix)."""
    from hrbench.storage import LocalStore, store_for

    shutil.copytree(source, target, ignore=ignore)
    src, dst = store_for(source), store_for(target)
    if not isinstance(src, LocalStore):
        # a study holds hundreds of objects (a row and a trajectory per trial): one at a time, the copy
        # took ~10 s per test under load
        with ThreadPoolExecutor(8) as pool:
            list(pool.map(lambda key: dst.put(key, src.get(key)), src.list("")))
