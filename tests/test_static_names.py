"""Every name the code uses is defined: pyflakes over the package and its Dagster layers.

A slow test once found `load_registry` undefined in `hrbench depth` only after ten minutes of CI; this
check finds such a name in a second, in the default suite.
"""
from __future__ import annotations

import io
from pathlib import Path

from pyflakes.api import checkPath
from pyflakes.reporter import Reporter

ROOT = Path(__file__).resolve().parents[1]
# Messages that are bugs (a name used but never bound), not style.
FATAL = ("undefined name", "undefined local variable", "may be undefined", "referenced before assignment")


def test_no_undefined_names_in_the_code():
    out, err = io.StringIO(), io.StringIO()
    reporter = Reporter(out, err)
    for package in ("hrbench", "pipelines", "resources", "benchmarks", "tests", "scripts"):
        for path in sorted((ROOT / package).rglob("*.py")):
            checkPath(str(path), reporter)
    fatal = [line for line in out.getvalue().splitlines() if any(f in line for f in FATAL)]
    assert not err.getvalue(), err.getvalue()
    assert not fatal, "\n".join(fatal)
