"""Protects the design card's layers and top level (issue 22): `hrbench/` (the core) <- `resources/` <- `assets/`
<- `pipelines/`. A module imports only its own layer and those below it, counting imports inside functions
(they tie the layers together at the first call just the same); every `@asset` and `@asset_check` lives in
`assets/`; the repository's top level is the card's list."""

from __future__ import annotations

import ast
import re
import subprocess
from pathlib import Path

import pytest

import hrbench

ROOT = Path(hrbench.__file__).resolve().parent.parent
# Lowest first: a layer may import any layer at or before its own place.
LAYERS = ("hrbench", "resources", "assets", "pipelines")
# The card's top level, plus what the project keeps beside it.
TOP_LEVEL = {"pyproject.toml", "pipelines", "assets", "resources", "task_registry", "workspace.yaml", "tests",
             "hrbench", "docs", "scripts", "deploy", "benchmarks", "examples", "README.md", ".ci", ".gitignore"}
DECORATOR = re.compile(r"^\s*@(dagster\.|dg\.)?(asset|asset_check|multi_asset|multi_asset_check|graph_asset)\b",
                       re.MULTILINE)


def imported_packages(path: Path) -> list[tuple[int, str]]:
    """(line, top-level package) of every import in the file, at any depth (absolute imports: the repo uses no others)."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name.split(".")[0]) for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            found.append((node.lineno, node.module.split(".")[0]))
    return found


def climbing_imports(root: Path = ROOT) -> list[str]:
    """`file:line imports <layer>` for every import of a layer above the file's own."""
    bad = []
    for rank, layer in enumerate(LAYERS):
        for path in sorted((root / layer).rglob("*.py")):
            for line, package in imported_packages(path):
                if package in LAYERS[rank + 1:] or (layer == "hrbench" and package == "dagster"):
                    bad.append(f"{path.relative_to(root)}:{line} imports {package}")
    return bad


def test_no_layer_imports_a_layer_above_it():
    assert climbing_imports() == []


def test_the_layer_check_sees_an_import_inside_a_function(tmp_path: Path):
    for layer in LAYERS:
        (tmp_path / layer).mkdir()
    (tmp_path / "hrbench" / "cli.py").write_text("def run():\n    from pipelines.materialize import run_study\n")
    (tmp_path / "resources" / "io.py").write_text("import assets.study\n")
    (tmp_path / "assets" / "study.py").write_text("from resources.study import StudyResource\n")  # allowed
    assert climbing_imports(tmp_path) == ["hrbench/cli.py:2 imports pipelines", "resources/io.py:1 imports assets"]


def test_every_asset_and_check_is_defined_in_assets():
    code = [p for folder in ("hrbench", "resources", "pipelines", "benchmarks", "scripts", "examples")
            for p in (ROOT / folder).rglob("*.py")]
    outside = [str(p.relative_to(ROOT)) for p in code if DECORATOR.search(p.read_text(errors="replace"))]
    assert outside == []
    assert any(DECORATOR.search(p.read_text()) for p in (ROOT / "assets").rglob("*.py"))  # the pattern finds them


def test_the_top_level_is_the_cards():
    listed = subprocess.run(["git", "-C", str(ROOT), "ls-files"], capture_output=True, text=True)
    if listed.returncode != 0:
        pytest.skip("not a git checkout: no tracked top level to compare")
    assert {f.split("/")[0] for f in listed.stdout.splitlines()} == TOP_LEVEL
