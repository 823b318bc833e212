"""Which Dagster executor runs a study's trial steps: in the run's process (the default) or one container per step.

`HRBENCH_EXECUTOR=docker` puts the trial steps (`checkpoint_trials_job`, `natural_trials_job`: every asset
and check step of them) under dagster-docker's `docker_executor`, each step in its own container on the
Docker engine `DOCKER_HOST` names; the other steps (setup, estimates, residuals, report) are short and stay
in-process. The step container sees this deployment at the same paths, read-only where it only reads: the
code (the repository root, on PYTHONPATH, and its git directory: the code version is part of the
pre-registration hash), the virtualenv and the Python it was made from, the study file's
and the task registry's directories; OUT read-write (tables, journals, and the SQLite instance under
OUT/.dagster when no DAGSTER_HOME is set). Trials inside it run on the `local` backend, so the container is
privileged, with the host's cgroup tree mounted: bubblewrap needs namespaces and the trial cgroups a writable
cgroup tree (docs/deploy.md).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Literal

from dagster import ExecutorDefinition, in_process_executor
from pydantic import BaseModel, ConfigDict, Field

from hrbench.catalogue import CHECKPOINT, NATURAL

EXECUTOR_ENV = "HRBENCH_EXECUTOR"
TRIAL_JOBS = (CHECKPOINT, NATURAL)  # the steps that run trials
REPO_ROOT = Path(__file__).resolve().parents[3]
STEP_LABEL = "org.hrbench.step"  # on every step container, its value OUT: `ps --filter label=...=OUT`, clean-up
# Handed to each step container when set here: the study, the store, the instance (docs/deploy.md).
PASSED_ENV = ("HRBENCH_STUDY", "HRBENCH_OUT", "HRBENCH_PROGRESS", EXECUTOR_ENV, "HRBENCH_STORE",
              "HRBENCH_S3_ENDPOINT_URL", "HRBENCH_S3_BUCKET", "HRBENCH_S3_PREFIX", "AWS_ACCESS_KEY_ID",
              "AWS_SECRET_ACCESS_KEY", "AWS_DEFAULT_REGION", "DAGSTER_HOME", "DAGSTER_PG_URL")


class ExecutorSettings(BaseModel):
    """The executor of the trial steps, from the environment (`from_env`)."""

    model_config = ConfigDict(frozen=True)  # a key of the code location's definitions cache

    kind: Literal["in_process", "docker", "k8s"] = "in_process"
    image: str = Field("hrbench/executor:bookworm", description="HRBENCH_EXECUTOR_IMAGE: the step containers' image "
                       "(scripts/executor_image.sh builds this one: Debian 12 with python3, bubblewrap, procps, git)")
    network: str = Field("host", description="HRBENCH_EXECUTOR_NETWORK: the step containers' network (an agent may "
                         "call a model API, the store may be S3; trials themselves never have a network)")
    namespace: str = Field("hrbench", description="HRBENCH_K8S_NAMESPACE: the namespace of the step pods (k8s)")

    @classmethod
    def from_env(cls) -> "ExecutorSettings":
        """HRBENCH_EXECUTOR (in_process | docker | k8s), HRBENCH_EXECUTOR_IMAGE, HRBENCH_EXECUTOR_NETWORK,
        HRBENCH_K8S_NAMESPACE."""
        kind = os.environ.get(EXECUTOR_ENV) or "in_process"
        if kind not in ("in_process", "docker", "k8s"):
            raise ValueError(f"{EXECUTOR_ENV}={kind!r} is not an executor hrbench knows: "
                             "use in_process (the default), docker or k8s (docs/deploy.md, Executors)")
        values = {"image": os.environ.get("HRBENCH_EXECUTOR_IMAGE"), "network": os.environ.get("HRBENCH_EXECUTOR_NETWORK"),
                  "namespace": os.environ.get("HRBENCH_K8S_NAMESPACE")}
        return cls(kind=kind, **{k: v for k, v in values.items() if v})


def step_executor(job: str, settings: ExecutorSettings, study_file: Path, registry: Path, out: Path) -> ExecutorDefinition:
    """The executor of one step job: docker_executor for a trial step when configured, else in-process."""
    if settings.kind == "in_process" or job not in TRIAL_JOBS:
        return in_process_executor
    if settings.kind == "k8s":
        from dagster_k8s import k8s_job_executor  # only a Kubernetes deployment needs dagster-k8s loaded

        return k8s_job_executor.configured(k8s_executor_config(settings, out), name="hrbench_k8s_executor")
    from dagster_docker import docker_executor  # only a docker deployment needs dagster-docker loaded

    return docker_executor.configured(docker_executor_config(settings, study_file, registry, out),
                                      name="hrbench_docker_executor")


def docker_executor_config(settings: ExecutorSettings, study_file: Path, registry: Path, out: Path) -> dict:
    """docker_executor's config: the image, the network, the environment and the same-path volumes of a step."""
    return {
        "image": settings.image,
        "network": settings.network,
        "env_vars": same_path_environment(),
        "container_kwargs": {"volumes": same_path_volumes(study_file, registry, out), "privileged": True,
                             "labels": {STEP_LABEL: str(out.resolve())}, "working_dir": str(REPO_ROOT)},
    }


def same_path_volumes(study_file: Path, registry: Path, out: Path) -> dict[str, dict[str, str]]:
    """This deployment at the same paths in a container (a step's, or a run's: pipelines/docker_launcher.py),
    read-only where it only reads: the code and its git directory, the virtualenv and its Python, the study's and
    the registry's directories; OUT and DAGSTER_HOME read-write; the host's cgroup tree."""
    # A virtualenv made from the image's own python3 (base prefix /usr) needs no Python mounted: /usr is the image's.
    base_python = [] if Path(sys.base_prefix) in (Path("/usr"), Path("/")) else [Path(sys.base_prefix)]
    read_only = [REPO_ROOT, *_git_dir(), Path(sys.prefix), *base_python, study_file.parent, registry]
    volumes = {str(p): {"bind": str(p), "mode": "ro"} for p in dict.fromkeys(p.resolve() for p in read_only)}
    writable = [out, *([Path(os.environ["DAGSTER_HOME"])] if os.environ.get("DAGSTER_HOME") else [])]
    volumes.update({str(p.resolve()): {"bind": str(p.resolve()), "mode": "rw"} for p in writable})
    # The trial cgroups go under the container's own (hrbench.envs.local.confine finds it as mount point + the
    # path /proc/self/cgroup names): the hierarchies must be mounted from their root, which the engine's
    # own cgroup mounts are not on cgroup v1, and podman's Docker API ignores `cgroupns`.
    volumes["/sys/fs/cgroup"] = {"bind": "/sys/fs/cgroup", "mode": "rw"}
    return volumes


def same_path_environment() -> list[str]:
    """A container's environment (docker's `env_vars`): the study's, the store's and the instance's variables this
    process sets (names only: each value is read from the launching process), the code on PYTHONPATH and the
    virtualenv's `bin` first on PATH (a step's command is `dagster api execute_step`, a run's `execute_run`)."""
    return [*[name for name in PASSED_ENV if os.environ.get(name) is not None], f"PYTHONPATH={REPO_ROOT}",
            f"PATH={Path(sys.prefix) / 'bin'}:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"]


# The Kubernetes secrets every step pod gets as environment (deploy/k8s/values.yaml creates neither: the team does).
K8S_SECRETS = ("hrbench-s3-credentials", "dagster-postgresql-secret")


def k8s_executor_config(settings: ExecutorSettings, out: Path) -> dict:
    """k8s_job_executor's config: each trial step a Kubernetes Job of the hrbench image (deploy/k8s/Dockerfile:
    hrbench installed, so no mounts of code or virtualenv), privileged for bubblewrap and the trial cgroups as
    the docker executor's containers are, OUT an emptyDir working copy (pods share no disk: the study's store
    is S3, and a journal load is the union of the local log and the bucket)."""
    return {
        "job_image": settings.image,
        "job_namespace": settings.namespace,
        "image_pull_policy": "IfNotPresent",
        "env_vars": [name for name in PASSED_ENV if os.environ.get(name) is not None
                     and not name.startswith("AWS_") and name != "DAGSTER_PG_URL"],  # secrets come from K8S_SECRETS
        "env_secrets": list(K8S_SECRETS),
        "step_k8s_config": {
            "container_config": {"security_context": {"privileged": True},
                                 "volume_mounts": [{"name": "out", "mount_path": str(out.resolve())}],
                                 "resources": {"requests": {"cpu": "2", "memory": "4Gi"}, "limits": {"memory": "8Gi"}}},
            "pod_spec_config": {"volumes": [{"name": "out", "empty_dir": {}}]},
        },
    }


def _git_dir() -> list[Path]:
    """The code's git directory (a worktree's is in another checkout's `.git`), when the code is a git tree:
    a step computes the code version, and with it the pre-registration hash, from it as the launcher did."""
    if not (REPO_ROOT / ".git").exists() or shutil.which("git") is None:
        return []
    found = subprocess.run(["git", "-C", str(REPO_ROOT), "rev-parse", "--path-format=absolute", "--git-common-dir"],
                           capture_output=True, text=True)
    return [Path(found.stdout.strip())] if found.returncode == 0 else []
