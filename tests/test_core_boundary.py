"""Protects the house rule: the core package `hrbench` never imports Dagster."""

from __future__ import annotations

import pkgutil
import subprocess
import sys

import hrbench


def test_no_core_module_imports_dagster():
    modules = sorted(m.name for m in pkgutil.walk_packages(hrbench.__path__, "hrbench."))
    code = ("import importlib, sys\n"
            f"for name in {modules!r}:\n    importlib.import_module(name)\n"
            "bad = sorted(m for m in sys.modules if m == 'dagster' or m.startswith('dagster.'))\n"
            "print(len(bad))\n")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "0"
    assert "hrbench.cli" in modules and "hrbench.analysis" in modules
