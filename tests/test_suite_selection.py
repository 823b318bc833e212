"""Protects the S3 pass's selection (tests/conftest.py): a test marked `no_store` that opens a store,
in its own process or in a Python subprocess, fails in the local pass, so no storage test can drop out
of the S3 pass unnoticed; unmarked tests and `no_store` tests that never open a store pass."""

from __future__ import annotations

import os
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest


REPO = Path(__file__).resolve().parent.parent

PROBE = '''
import subprocess, sys
import pytest
from hrbench.storage import store_for

OPEN_IN_A_SUBPROCESS = "from hrbench.storage import store_for; store_for('/tmp/hrbench-probe-out')"

@pytest.mark.no_store
def test_marked_opens_in_process(tmp_path):
    store_for(tmp_path)

@pytest.mark.no_store
def test_marked_opens_in_a_subprocess():
    subprocess.run([sys.executable, "-c", OPEN_IN_A_SUBPROCESS], check=True)

@pytest.mark.no_store
def test_marked_never_opens():
    assert True

def test_unmarked_opens(tmp_path):
    store_for(tmp_path)
'''


# scripts/test.sh runs the local pass on pytest-xdist's workers: the guard must hold there too (the workers
# share the trace file their controller names, and each reads it under its own tests' ids)
@pytest.mark.parametrize("workers", [[], ["-n", "2", "--dist", "load"]], ids=["one-process", "xdist-workers"])
def test_a_no_store_test_that_opens_a_store_fails_in_the_local_pass(tmp_path: Path, workers: list[str]):
    (tmp_path / "test_probe.py").write_text(PROBE)
    (tmp_path / "pytest.ini").write_text("[pytest]\nmarkers =\n    no_store: never opens a store\n")
    env = {k: v for k, v in os.environ.items() if k not in ("HRBENCH_TEST_STORE_TRACE", "PYTEST_CURRENT_TEST")}
    env["HRBENCH_STORE"] = "local"
    report = tmp_path / "report.xml"
    subprocess.run([sys.executable, "-m", "pytest", "-p", "tests.conftest", "-c", str(tmp_path / "pytest.ini"),
                    "--rootdir", str(tmp_path), "-p", "no:cacheprovider", f"--junitxml={report}", *workers,
                    str(tmp_path / "test_probe.py")], cwd=REPO, env=env, capture_output=True, text=True, timeout=300)
    verdicts = {}
    for case in ET.parse(report).getroot().iter("testcase"):
        failed = [c for c in case if c.tag in ("failure", "error")]
        verdicts[case.get("name")] = "failed" if failed else "passed"
        if failed:
            assert "marked `no_store` but opened a store" in failed[0].get("message", "") + (failed[0].text or "")
    assert verdicts == {"test_marked_opens_in_process": "failed", "test_marked_opens_in_a_subprocess": "failed",
                        "test_marked_never_opens": "passed", "test_unmarked_opens": "passed"}
