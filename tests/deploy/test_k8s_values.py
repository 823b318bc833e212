"""Protects the Kubernetes deployment files (deploy/k8s/): what can be checked without a cluster is checked —
the run launcher's config against dagster-k8s's K8sRunLauncher schema, the extra instance settings against
Dagster's instance schema (and equal to deploy/dagster.yaml's), the trial steps' executor the code builds for
HRBENCH_EXECUTOR=k8s against k8s_job_executor's schema, and one image everywhere, built from the Dockerfile."""

from __future__ import annotations

from pathlib import Path

import yaml
from dagster._config import process_config
from dagster._core.instance.config import dagster_instance_config
from dagster_k8s import K8sRunLauncher, k8s_job_executor
from dagster_k8s.models import k8s_model_from_dict
from kubernetes.client import V1Container, V1PodSpec

from pipelines.defs.study.executor import ExecutorSettings, k8s_executor_config, step_executor
from tests.conftest import FIXTURES, TINY_STUDY

REPO = Path(__file__).resolve().parents[2]
K8S = REPO / "deploy" / "k8s"


def _values() -> dict:
    return yaml.safe_load((K8S / "values.yaml").read_text())


def _env(deployment: dict) -> dict[str, str]:
    return {e["name"]: e["value"] for e in deployment["env"]}


def test_the_run_launcher_is_a_valid_k8s_run_launcher():
    launcher = _values()["runLauncher"]
    assert launcher["type"] == "CustomRunLauncher"
    custom = launcher["config"]["customRunLauncher"]
    assert (custom["module"], custom["class"]) == ("dagster_k8s", "K8sRunLauncher")
    checked = process_config(K8sRunLauncher.config_type(), custom["config"])
    assert checked.success, checked.errors
    assert checked.value["run_k8s_config"]["container_config"]["security_context"] == {"privileged": True}


def test_the_instance_settings_are_the_deployments_and_valid(tmp_path: Path):
    extra = _values()["additionalInstanceConfig"]
    plain = yaml.safe_load((REPO / "deploy" / "dagster.yaml").read_text())
    assert {k: plain[k] for k in extra} == extra  # no drift from the one-host deployment
    (tmp_path / "dagster.yaml").write_text(yaml.safe_dump(extra))
    config, _ = dagster_instance_config(str(tmp_path))  # Dagster's own validation of the instance file
    assert config["concurrency"]["pools"]["default_limit"] == 2


def test_one_image_everywhere_built_from_the_dockerfile():
    values = _values()
    images = {f"{values[part]['image']['repository']}:{values[part]['image']['tag']}"
              for part in ("dagsterWebserver", "dagsterDaemon")}
    (deployment,) = values["dagster-user-deployments"]["deployments"]
    images.add(f"{deployment['image']['repository']}:{deployment['image']['tag']}")
    images.add(values["runLauncher"]["config"]["customRunLauncher"]["config"]["job_image"])
    images.add(_env(deployment)["HRBENCH_EXECUTOR_IMAGE"])
    assert len(images) == 1, images
    assert deployment["dagsterApiGrpcArgs"] == ["-m", "pipelines.definitions"]
    dockerfile = (K8S / "Dockerfile").read_text()
    assert "bubblewrap" in dockerfile and "pip install --no-cache-dir ." in dockerfile
    for copied in ("hrbench", "resources", "pipelines", "task_registry"):
        assert f"COPY {copied} {copied}" in dockerfile and (REPO / copied).is_dir()


def test_the_trial_steps_executor_is_a_valid_k8s_job_executor(tmp_path: Path, monkeypatch):
    deployment = _values()["dagster-user-deployments"]["deployments"][0]
    for name, value in _env(deployment).items():
        monkeypatch.setenv(name, value)
    settings = ExecutorSettings.from_env()
    assert settings.kind == "k8s" and settings.namespace == "hrbench"
    out = tmp_path / "out"
    executor = step_executor("natural_trials_job", settings, TINY_STUDY, FIXTURES / "registry", out)
    assert executor.name == "hrbench_k8s_executor"
    config = k8s_executor_config(settings, out)  # what `configured` bound into the executor
    checked = process_config(k8s_job_executor.config_schema.as_field().config_type, config)
    assert checked.success, checked.errors
    # the pod and container settings against the Kubernetes API's models (dagster-k8s builds the Job from them)
    step = config["step_k8s_config"]
    container = k8s_model_from_dict(V1Container, {"name": "step", **step["container_config"]})
    pod = k8s_model_from_dict(V1PodSpec, {"containers": [], **step["pod_spec_config"]})
    assert container.security_context.privileged is True
    assert [m.mount_path for m in container.volume_mounts] == [str(out.resolve())] and pod.volumes[0].empty_dir
    run_container = _values()["runLauncher"]["config"]["customRunLauncher"]["config"]["run_k8s_config"]
    k8s_model_from_dict(V1Container, {"name": "run", **run_container["container_config"]})
    assert config["job_image"] == "registry.internal/hrbench:COMMIT"
    assert {"HRBENCH_STORE", "HRBENCH_S3_BUCKET", "HRBENCH_OUT"} <= set(config["env_vars"])
    assert not [v for v in config["env_vars"] if v.startswith("AWS_")]  # credentials come from the secret
    assert step_executor("study_setup_job", settings, TINY_STUDY, FIXTURES / "registry", out).name == "in_process"
