"""Protects the study report: every figure drawn from plain tables, the statements it must make, a file that
fetches nothing, and (slow) that headless Chromium renders every figure without a request leaving the file."""

from __future__ import annotations

import base64
import hashlib
import json
import re
import shutil
import subprocess
import tempfile
from html.parser import HTMLParser
from pathlib import Path

import pandas as pd
import pytest

from hrbench.report.context import (
    ReportInputs,
    chunk_positions,
    figure_metadata,
    report_figures,
)
from hrbench.report.html import render_report
from tests.report import tables

ALL_FIGURES = ["forest", "waterfall", "q_vs_r", "survival", "contrasts", "sensitivity", "depth_work",
               "reward_histogram", "cost_pass", "position"]
ARTIFACTS = Path(__file__).resolve().parent.parent / "artifacts"
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")


@pytest.fixture(scope="module")
def full() -> tuple[ReportInputs, list, str]:
    inputs = tables.inputs()
    figs = report_figures(inputs)
    return inputs, figs, render_report(tables.header(), inputs, figs)


class _Images(HTMLParser):
    def __init__(self):
        super().__init__()
        self.srcs: list[str] = []

    def handle_starttag(self, tag, attrs):
        if tag == "img":
            self.srcs.append(dict(attrs)["src"])


def test_every_figure_is_drawn_when_its_table_is_there(full):
    _, figs, page = full
    assert [f.key for f in figs] == ALL_FIGURES
    parser = _Images()
    parser.feed(page)
    assert len(parser.srcs) == len(ALL_FIGURES)
    for src in parser.srcs:
        assert src.startswith("data:image/png;base64,")
        assert base64.b64decode(src.split(",", 1)[1])[:8] == b"\x89PNG\r\n\x1a\n"


def test_report_states_hash_protocol_counts_zero_rule_and_estimands(full):
    _, _, page = full
    assert tables.PREREG in page
    assert "oracle_replay" in page and "Zero rule <code>jeffreys</code>" in page
    assert re.search(r"applied in\s+4 of", page)  # the `all` row of each agent and condition
    assert "tasks: sampled" in page and "tasks: fixed" in page
    assert "10/10" in page or re.search(r"\d+/10 \d+/10", page)  # raw checkpoint k/m per stage
    assert "too few tasks" in page  # a column added upstream is shown without a change in the report


def test_the_report_opens_with_the_claims_then_figures_and_keeps_raw_counts_in_an_appendix(full):
    """Issue 25: a reader meets the confirmatory claims first, one sentence each with its verdict; the raw
    counts and every column follow in collapsed details; hashes are short, the full value on hover."""
    _, _, page = full
    claims, figures = page.index('id="claims"'), page.index("<h2>Figures</h2>")
    raw, residual_table = page.index("Appendix: raw counts"), page.index("<h2>Residual table</h2>")
    assert claims < figures < residual_table < raw
    first = page[claims:figures]
    assert first.count("<li>") == 4 and "adjusted interval [" in first and "inconclusive" in first
    assert "truth 0.450" in first and "family-wise error rate (Holm)" in first and "±0.5" in first
    assert "few-tasks" in first and "boundary" not in first  # flags only where they change the reading
    assert "<table" not in first
    assert f'<code title="{tables.PREREG}">{tables.PREREG[:12]}</code>' in page
    assert "<details><summary>Checkpoint k/m" in page[raw:]
    assert "[&#39;" not in page and "['" not in page  # flags as words, not a Python list's text


def test_only_the_residuals_are_required():
    only = ReportInputs(residuals=tables.inputs().residuals)
    figs = report_figures(only)
    # the forest plot and the waterfall come from the residual rows alone
    assert [f.key for f in figs] == ["forest", "waterfall"]
    parser = _Images()
    parser.feed(render_report(tables.header(), only, figs))
    assert len(parser.srcs) == 2


def test_without_depth_the_plane_says_h_dep_stands_in():
    inputs = tables.inputs()
    page = render_report(tables.header(), ReportInputs(residuals=inputs.residuals, catalog=inputs.catalog), figs=[])
    assert "D was not measured" in page


def test_the_file_fetches_nothing(full):
    _, _, page = full
    assert not re.search(r"https?://", page)
    assert not re.search(r"<(script|link|iframe|object|embed)\b", page)
    csp = re.search(r'<meta http-equiv="Content-Security-Policy" content="([^"]+)"', page)
    assert csp and "default-src 'none'" in csp.group(1) and "img-src data:" in csp.group(1)


def test_text_from_tables_is_escaped():
    inputs = tables.inputs()
    hostile = inputs.residuals.copy()
    hostile.loc[0, "name"] = "<img src=https://evil.example/x>"
    page = render_report(tables.header(), ReportInputs(residuals=hostile), figs=[])
    assert "<img src=https://evil" not in page and "&lt;img src=https://evil" in page


def test_chunk_positions_pool_checkpoint_passes_of_transduction_chunks():
    est = pd.DataFrame([
        {"agent": "a", "condition": "baseline", "protocol": "p", "task": "lt-x", "family": "transduction-arithmetic",
         "stage_index": 0, "k": 9, "m": 10},
        {"agent": "a", "condition": "baseline", "protocol": "p", "task": "lt-x", "family": "transduction-arithmetic",
         "stage_index": 1, "k": 3, "m": 10},
        {"agent": "a", "condition": "baseline", "protocol": "p", "task": "ops", "family": "ops",
         "stage_index": 0, "k": 0, "m": 10},  # not a transduction task: left out
        {"agent": "a", "condition": "context_reset", "protocol": "p", "task": "lt-x",
         "family": "transduction-arithmetic", "stage_index": 0, "k": 9, "m": 10},  # the same trials again
    ])
    table = chunk_positions(est, bins=2)
    assert list(table["k"]) == [9, 3] and list(table["n"]) == [10, 10]
    assert list(table["bin_low"]) == [0.0, 0.5] and set(table["unit"]) == {"chunk"}


def test_figure_metadata_is_markdown_with_the_image_inline(full):
    _, figs, _ = full
    meta = figure_metadata(figs)
    assert set(meta) == {f"figure_{k}" for k in ALL_FIGURES}
    assert all("](data:image/png;base64," in v for v in meta.values())


# -- headless Chromium -----------------------------------------------------------------------------

# Reports, on load, the natural width of every image, every resource the page fetched and every CSP
# violation into the title, which --dump-dom prints. Allowed by its hash only: the report's own CSP
# stays as written otherwise.
_PROBE = ("const v=[];document.addEventListener('securitypolicyviolation',e=>v.push(e.blockedURI));"
          "window.addEventListener('load',()=>{document.title='PROBE'+JSON.stringify({w:[...document.images]"
          ".map(i=>i.complete?i.naturalWidth:0),r:performance.getEntriesByType('resource').map(e=>e.name),v:v});});")


def _probe_page(page: str, script: str = _PROBE) -> str:
    digest = base64.b64encode(hashlib.sha256(script.encode()).digest()).decode()
    page = page.replace("default-src 'none';", f"default-src 'none'; script-src 'sha256-{digest}';", 1)
    return page.replace("<head>", f"<head><script>{script}</script>", 1)


def _chromium(args: list[str], html: Path) -> str:
    with tempfile.TemporaryDirectory() as profile:
        done = subprocess.run(
            [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-background-networking",
             "--disable-component-update", "--disable-sync", f"--user-data-dir={profile}",
             "--host-resolver-rules=MAP * ~NOTFOUND", *args, html.as_uri()],
            capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout


def _probe(html: Path, *args: str) -> dict:
    dom = _chromium([*args, "--virtual-time-budget=10000", "--dump-dom"], html)
    title = re.search(r"<title>PROBE(.*?)</title>", dom, re.DOTALL)
    assert title, f"the probe never ran: {dom[:500]}"
    return json.loads(title.group(1).replace("&quot;", '"').replace("&amp;", "&"))


def _screenshot(page: str, tmp_path: Path, size: str, name: str) -> Path:
    """Chromium's screenshot of the page at a window size, kept in tests/artifacts for a reader."""
    report = tmp_path / "report.html"
    report.write_text(page)
    shot = tmp_path / name
    _chromium([f"--window-size={size}", f"--screenshot={shot}"], report)
    ARTIFACTS.mkdir(exist_ok=True)
    shutil.copy(shot, ARTIFACTS / name)
    return shot


@pytest.mark.slow
@pytest.mark.skipif(CHROMIUM is None, reason="chromium is not installed (apt-get install -y chromium)")
def test_chromium_renders_every_figure_and_fetches_nothing(full, tmp_path):
    _, _, page = full
    assert _screenshot(page, tmp_path, "1300,9000", "report.png").stat().st_size > 50_000

    probed = tmp_path / "probed.html"
    probed.write_text(_probe_page(page))
    seen = _probe(probed)
    assert len(seen["w"]) == len(ALL_FIGURES) and all(w > 100 for w in seen["w"]), seen["w"]
    assert seen["r"] == [] and seen["v"] == [], seen


# Reports what the first screen (the viewport at load, nothing scrolled) shows: the claims' sentences
# whose box starts inside it, and every table with a rendered box inside it.
_FIRST_SCREEN = ("window.addEventListener('load',()=>{const h=window.innerHeight;const inside=e=>{const r=e"
                 ".getBoundingClientRect();return r.height>0&&r.top<h;};document.title='PROBE'+JSON.stringify({"
                 "claims:[...document.querySelectorAll('ul.claims li')].filter(inside).length,"
                 "tables:[...document.querySelectorAll('table')].filter(inside).map(t=>t.rows[0].innerText)});});")


@pytest.mark.slow
@pytest.mark.skipif(CHROMIUM is None, reason="chromium is not installed (apt-get install -y chromium)")
def test_chromium_first_screen_shows_the_claims_and_no_raw_count_table(full, tmp_path):
    """The first screen (1300 × 900) as Chromium renders it: every claim sentence, no table at all."""
    _, _, page = full
    _screenshot(page, tmp_path, "1300,900", "report_first_screen.png")
    probed = tmp_path / "first.html"
    probed.write_text(_probe_page(page, _FIRST_SCREEN))
    seen = _probe(probed, "--window-size=1300,900")
    assert seen["claims"] == len(tables.claims()) and seen["tables"] == [], seen


@pytest.mark.slow
@pytest.mark.skipif(CHROMIUM is None, reason="chromium is not installed (apt-get install -y chromium)")
def test_the_probe_sees_a_request_and_a_broken_image(full, tmp_path):
    """The check above can fail: an external image is blocked (a CSP violation) and renders empty."""
    _, _, page = full
    bad = tmp_path / "bad.html"
    bad.write_text(_probe_page(page.replace("</body>", '<img src="http://example.invalid/x.png"></body>', 1)))
    seen = _probe(bad)
    assert seen["w"][-1] == 0
    assert any("example.invalid" in v for v in seen["v"]), seen


def _structure_inputs(rates: list[float]) -> ReportInputs:
    """Six one-stage tasks with D, W and natural pass rates `rates` (the correlation needs ≥ 5 tasks)."""
    names = [f"t{i}" for i in range(len(rates))]
    catalog = pd.DataFrame([{"task": t, "family": "f", "n_stages": 1, "stage": "s1", "stage_index": 0,
                             "work_lines": 10 + 7 * i % 5, "dependency_depth": 1} for i, t in enumerate(names)])
    depth = pd.DataFrame([{"task": t, "depth": d, "depth_status": "estimate", "n_turns": d}
                          for t, d in zip(names, (1, 2, 3, 5, 10, 20))])
    natural = pd.DataFrame([{"agent": "a", "condition": "baseline", "task": t, "trial_index": j,
                             "passed": j < round(10 * rate), "stages_passed": int(j < round(10 * rate)),
                             "exit_reason": "passed" if j < round(10 * rate) else "failed"}
                            for t, rate in zip(names, rates) for j in range(10)])
    return ReportInputs(residuals=tables.inputs().residuals, catalog=catalog, depth=depth, natural=natural)


def test_the_depth_correlation_is_stated_when_d_is_measured_on_enough_tasks():
    page = render_report(tables.header(), _structure_inputs([0.9, 0.8, 0.8, 0.5, 0.3, 0.1]))
    stated = re.search(r"controlling for W \(Conover–Iman,\s*n = 6\):\s*r = (-?[0-9.]+) \[", page)
    assert stated and float(stated.group(1)) < 0  # deeper tasks pass less often here
    flat = render_report(tables.header(), _structure_inputs([0.5] * 6))  # constant pass rate: no number, and why
    assert re.search(r"n = 6\):\s*undefined \(", flat)


def test_a_forest_plot_of_a_large_study_keeps_every_family_and_overall_row_and_counts_the_task_rows_it_leaves():
    from hrbench.report.figures import FOREST_MAX_ROWS, forest_rows
    small = tables.inputs().residuals
    rows, left_out = forest_rows(small)
    assert len(small) <= FOREST_MAX_ROWS and left_out == 0 and len(rows) == len(small)
    # the same rows under enough agents to pass the limit
    large = pd.concat([small.assign(agent=f"agent-{i}") for i in range(FOREST_MAX_ROWS // len(small) + 1)],
                      ignore_index=True)
    rows, left_out = forest_rows(large)
    assert left_out == int((large["scope"] == "task").sum()) > 0
    assert set(rows["scope"]) == {"all", "family"} and len(rows) == len(large) - left_out


def test_the_report_says_where_the_zero_rule_moved_an_estimate_off_the_raw_ratio():
    """Issue 25: a row's `rule_note` (the rule moved its estimate off k/m at a count of 0 or m) is a column of the
    residual table; the zero-rule section counts those rows, quotes a task row's and lists the family/overall ones."""
    inputs = tables.inputs()
    residuals = inputs.residuals.assign(rule_note=None)
    task = residuals.index[residuals["scope"] == "task"][0]
    family = residuals.index[residuals["scope"] == "family"][0]
    residuals.loc[task, "rule_note"] = "jeffreys reads every k/m as (k+½)/(m+1) (checkpoint 10/10 at stage 1): TASK"
    residuals.loc[family, "rule_note"] = "jeffreys reads every k/m as (k+½)/(m+1) (natural 9/9 at stage 2): FAMILY"
    page = render_report(tables.header(), ReportInputs(residuals=residuals), [])
    section = page[page.index("<h2>Zero rule and estimands</h2>"):page.index("<h2>Residual table</h2>")]
    assert re.search(rf"ratio k/m: 2 of {len(residuals)} rows", section)
    assert f"e.g. {residuals.loc[task, 'agent']} · " in section and "TASK" in section
    assert re.search(r"<li>[^<]*· family [^<]*: jeffreys reads [^<]*FAMILY</li>", section)
    table = page[page.index("<h2>Residual table</h2>"):]
    assert "<th>rule_note</th>" in table and table.count("jeffreys reads every k/m") == 2
    assert "rule-notes" not in render_report(tables.header(), ReportInputs(residuals=inputs.residuals), [])
