"""One configuration file for every process of a deployment: `$DAGSTER_HOME/hrbench.yaml`.

The webserver, the daemon and the run workers each load the code location in a process of their own, and each
used to read hrbench's settings from its own environment: a deployment whose daemon was started with another
HRBENCH_SCHEDULE than its webserver showed one cron and ran another. They share DAGSTER_HOME (the instance), so
the settings live beside the instance's dagster.yaml: a mapping of HRBENCH_* variable to value
(deploy/hrbench.yaml is the template). Loading the code location applies it to the process environment, which
is what every reader of a setting (and every step container the executor starts) sees. A variable the process
environment sets to another value is refused: the location fails to load with a message naming it, rather than
running with a setting the other processes do not have. Secrets (AWS_*, DAGSTER_PG_URL) stay in the
environment; the file takes HRBENCH_* names only.
"""

from __future__ import annotations

import os
from pathlib import Path

import yaml

FILE_NAME = "hrbench.yaml"
PREFIX = "HRBENCH_"


class DeploymentConfigError(ValueError):
    """The deployment's settings file is unusable, or the environment contradicts it."""


def settings_file() -> Path | None:
    """$DAGSTER_HOME/hrbench.yaml, when DAGSTER_HOME is set and the file exists."""
    home = os.environ.get("DAGSTER_HOME")
    path = Path(home) / FILE_NAME if home else None
    return path if path is not None and path.is_file() else None


def read_settings(path: Path) -> dict[str, str]:
    """The file's settings as environment values (strings); DeploymentConfigError on anything else."""
    try:
        data = yaml.safe_load(path.read_text()) or {}
    except yaml.YAMLError as exc:
        raise DeploymentConfigError(f"{path}: not YAML: {exc}") from exc
    if not isinstance(data, dict):
        raise DeploymentConfigError(f"{path}: expected a mapping of HRBENCH_* variables to values")
    wrong = sorted(str(k) for k in data if not str(k).startswith(PREFIX))
    if wrong:
        raise DeploymentConfigError(f"{path}: only {PREFIX}* settings belong here (secrets stay in the environment): "
                                    f"{', '.join(wrong)}")
    nested = sorted(k for k, v in data.items() if isinstance(v, (dict, list)) or v is None)
    if nested:
        raise DeploymentConfigError(f"{path}: give {', '.join(nested)} a single value")
    return {k: str(v).lower() if isinstance(v, bool) else str(v) for k, v in data.items()}


def apply_deployment_settings(environment_wins: frozenset[str] = frozenset()) -> dict[str, str]:
    """Put $DAGSTER_HOME/hrbench.yaml's settings into this process's environment; the settings applied.

    Refuses (DeploymentConfigError) a variable the environment already sets to another value, but for those
    in `environment_wins`: `hrbench run` names its own study and output directory on a team instance."""
    path = settings_file()
    if path is None:
        return {}
    settings = {k: v for k, v in read_settings(path).items() if not (k in environment_wins and k in os.environ)}
    conflicts = [f"{k}={os.environ[k]!r} (the file: {v!r})" for k, v in sorted(settings.items())
                 if k in os.environ and os.environ[k] != v]
    if conflicts:
        raise DeploymentConfigError(f"this process's environment contradicts {path}: {'; '.join(conflicts)}. "
                                    "Unset them here: every process of the deployment reads the file")
    os.environ.update(settings)
    return settings
