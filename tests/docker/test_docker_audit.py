"""Protects the docker backend's acceptance: every built-in task's verifier audit, the tamper check
included, passes on docker as on local (tests/test_audit.py).

The audits run side by side (AUDITS_AT_ONCE tasks, each with its own stage threads): a task's audit is
mostly waiting on the engine (container start and removal, exec round trips), so on 2 cores this
module takes a fraction of the time of one audit after another. Each task is still its own test and
its own verdict: a session-wide pool starts the audits of the tasks selected in this run (all of them
in CI, the one named with `-k`), and each test waits for its own. CI's slow pass audits the first two
tasks of each family; HRBENCH_LONG=1 audits every one."""

from __future__ import annotations

from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path

import pytest

from hrbench.envs.docker import DockerBackend
from hrbench.tasks.audit import StageAudit, audit_task
from hrbench.tasks.loader import load_task
from tests.conftest import TINY_TASK
from tests.docker.conftest import REPO, hrbench_containers

pytestmark = pytest.mark.slow  # podman, image builds, containers

BUILTIN = sorted(p.parent for p in (REPO / "task_registry").glob("*/task.toml"))
AUDITS_AT_ONCE = 3
PER_FAMILY_IN_SLOW = 2  # the first two tasks of each family (a two- and a four-part one for transduction)


def _audited_tasks() -> list:
    """Every built-in task; beyond the first PER_FAMILY_IN_SLOW of each family they are marked `long`: the
    others share their family's verifier code, and all 53 audits on docker cost 5-13 minutes of CI."""
    seen: dict[str, int] = {}
    params = [pytest.param(TINY_TASK, id=TINY_TASK.name)]
    for path in BUILTIN:
        family = load_task(path).family
        seen[family] = seen.get(family, 0) + 1
        marks = [pytest.mark.long] if seen[family] > PER_FAMILY_IN_SLOW else []
        params.append(pytest.param(path, id=path.name, marks=marks))
    return params


@pytest.fixture(scope="module")
def audits(request: pytest.FixtureRequest, backend: DockerBackend):
    """{task directory name: the future of its audit}, for the tasks this run selected."""
    selected = [item.callspec.params["path"] for item in request.session.items
                if getattr(item, "originalname", "") == "test_reference_passes_and_nothing_fails_every_stage"]
    pool = ThreadPoolExecutor(max_workers=AUDITS_AT_ONCE, thread_name_prefix="docker-audit")
    futures: dict[str, Future[list[StageAudit]]] = {
        path.name: pool.submit(audit_task, load_task(path), backend) for path in selected}
    yield futures
    pool.shutdown(cancel_futures=True)


@pytest.mark.parametrize("path", _audited_tasks())
def test_reference_passes_and_nothing_fails_every_stage(audits, backend: DockerBackend, path: Path):
    rows = audits[path.name].result()
    assert rows and all(r.ok for r in rows), [r.problem for r in rows if not r.ok]
    # the same criterion as local's audit (tests/test_audit.py), the tamper check included: it ran, on the
    # container's files, and the planted forgers did not beat what doing nothing scores
    assert all(r.reference_reward == 1 and r.forged_reward is not None and r.forged_reward <= r.nothing_reward
               for r in rows), [(r.stage, r.forged_reward, r.nothing_reward) for r in rows]
    assert hrbench_containers(backend, load_task(path).name) == []
