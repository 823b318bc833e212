"""Protects the command line as a newcomer meets it, output redirected to a log as CI does."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from pipelines.cli import app
from tests.conftest import TINY_STUDY, TINY_TASK

REPO = Path(__file__).resolve().parents[2]


def test_a_failed_run_prints_one_line_and_names_the_log(tmp_path: Path):
    registry = tmp_path / "registry"
    shutil.copytree(TINY_TASK, registry / "tiny-chain")
    verifier = registry / "tiny-chain" / "steps" / "make" / "tests" / "test.sh"
    verifier.write_text("#!/bin/bash\nmkdir -p /logs/verifier\necho 1 > /logs/verifier/reward.txt\n")  # passes anything
    study = yaml.safe_load(TINY_STUDY.read_text())
    study["tasks"]["registry"] = str(registry)
    path = tmp_path / "study.yaml"
    path.write_text(yaml.safe_dump(study))
    out = tmp_path / "out"
    result = subprocess.run([sys.executable, "-m", "pipelines.cli", "run", str(path), "--out", str(out)], cwd=REPO,
                            capture_output=True, text=True, timeout=600)
    assert result.returncode == 1
    errors = [line for line in result.stderr.splitlines() if line.strip()]
    assert "Traceback" not in result.stderr and "DagsterExecutionStepExecutionError" not in result.stderr
    failure = next(line for line in errors if line.startswith("error:"))
    assert "catalog, audit and pre-registration failed: verifier audit failed for 1 stage(s): tiny-chain/make:" in failure
    log = Path(re.search(r"details: (\S+\.log)", failure).group(1))
    assert log.parent == out / "logs" and "tiny-chain/make" in log.read_text()
    assert len(errors) <= 3, result.stderr  # the study line and the error, nothing else
    assert "\r" not in result.stderr  # no progress bars in a redirected log


# slow: a whole study with redirected output (~90 s); scripts/test.sh runs it, the default suite keeps 10 min
@pytest.mark.slow
def test_run_output_redirected_keeps_full_lines(tmp_path: Path):
    study = yaml.safe_load(TINY_STUDY.read_text())
    study["tasks"]["registry"] = str(TINY_STUDY.parent.parent / "registry")
    long_id = "steady-agent-whose-id-is-long-enough-that-an-eighty-column-table-would-cut-it"
    study["agents"][0]["id"] = long_id
    study["trials"] = {"checkpoint": 2, "natural": 3}
    path = tmp_path / "study.yaml"
    path.write_text(yaml.safe_dump(study))
    out = tmp_path / "out"
    result = subprocess.run([sys.executable, "-m", "pipelines.cli", "run", str(path), "--out", str(out)], cwd=REPO,
                            capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stderr
    prereg = json.loads((out / "preregistration.json").read_text())["prereg_sha256"]
    assert f"pre-registered: prereg_sha256={prereg}" in result.stderr.splitlines()  # the hash on its own line
    assert long_id in result.stdout and "…" not in result.stdout and "\r" not in result.stderr
    assert "telemetry" not in (result.stdout + result.stderr).lower()
    assert (out / ".dagster" / "dagster.yaml").read_text().count("enabled: false") == 1


def test_ui_refuses_a_study_that_did_not_make_the_directory(tmp_path: Path):
    from hrbench.preregistration import record_study_source
    from hrbench.protocol import load_study

    out = tmp_path / "out"
    record_study_source(out, TINY_STUDY, load_study(TINY_STUDY).study)
    other = tmp_path / "other.yaml"
    other.write_text(TINY_STUDY.read_text())
    result = CliRunner().invoke(app, ["ui", "--out", str(out), "--study", str(other)])
    assert result.exit_code == 1
    assert f"{out} was made by {TINY_STUDY}" in " ".join(result.output.split())
