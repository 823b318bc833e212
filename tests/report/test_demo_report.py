"""Protects the report of a real study run (slow): the demo's pieces — its sim agents and protocol, its
transduction family, its depth measurement — plus one intervention, run end to end through the step jobs
(tests/report/report_demo.yaml, smaller than the demo itself), give a report.html in which every figure is
drawn from the run's own tables, renders in headless Chromium and fetches nothing."""

from __future__ import annotations

import shutil
import subprocess
import sys
from html.parser import HTMLParser
from pathlib import Path

import pandas as pd
import pytest

from hrbench.analysis import current_tables
from hrbench.catalogue import HORIZON_RESIDUALS
from hrbench.report.html import study_inputs
from hrbench.study_run import StudyRun
from tests.report.test_report import (
    ALL_FIGURES,
    ARTIFACTS,
    CHROMIUM,
    _chromium,
    _probe,
    _probe_page,
)

REPO = Path(__file__).resolve().parents[2]
STUDY = Path(__file__).resolve().parent / "report_demo.yaml"


class _Figures(HTMLParser):
    def __init__(self):
        super().__init__()
        self.keys: list[str] = []

    def handle_starttag(self, tag, attrs):
        if tag == "img":
            self.keys.append(dict(attrs).get("data-figure", ""))


@pytest.fixture(scope="module")
def study_out(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("report-demo")
    done = subprocess.run([sys.executable, "-m", "pipelines.cli", "run", str(STUDY), "--out", str(out)], cwd=REPO,
                          capture_output=True, text=True, timeout=3000, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    return out


@pytest.mark.slow
def test_every_figure_of_the_run_has_data_from_its_own_tables(study_out: Path):
    run = StudyRun.from_file(STUDY, study_out, progress=False)
    stores = run.stores
    tables = current_tables(
        run.design, pd.concat([stores.read_all(HORIZON_RESIDUALS.key(c))
                               for c in run.study.condition_names]),
        stores.read_all("intervention_contrasts"), stores.read_all("sensitivity_sweep"),
        stores.read_all("resource_accounting"))
    inputs = study_inputs(run.design, tables, stores)
    assert len(inputs.contrasts) and len(inputs.sensitivity) and len(inputs.dense)
    # depth measured for every task (D, not H_dep, on the plane)
    assert len(inputs.depth) == len(run.design.tasks) and inputs.depth["depth"].notna().all()
    # accuracy by position from the verifiers' per-line scores of the natural rollouts, every bin filled
    assert set(inputs.positions["unit"]) == {"record"} and (inputs.positions["n"] > 0).all()
    page = (study_out / "report.html").read_text()
    parser = _Figures()
    parser.feed(page)
    assert parser.keys == ALL_FIGURES


@pytest.mark.slow
@pytest.mark.skipif(CHROMIUM is None, reason="chromium is not installed (apt-get install -y chromium)")
def test_chromium_renders_the_runs_report_with_every_figure_and_fetches_nothing(study_out: Path, tmp_path: Path):
    report = study_out / "report.html"
    shot = tmp_path / "demo-report.png"
    _chromium(["--window-size=1300,12000", f"--screenshot={shot}"], report)
    assert shot.stat().st_size > 50_000
    ARTIFACTS.mkdir(exist_ok=True)
    shutil.copy(shot, ARTIFACTS / "demo-report.png")
    probed = tmp_path / "probed.html"
    probed.write_text(_probe_page(report.read_text()))
    seen = _probe(probed)
    assert len(seen["w"]) == len(ALL_FIGURES) and all(w > 100 for w in seen["w"]), seen["w"]
    assert seen["r"] == [] and seen["v"] == [], seen
