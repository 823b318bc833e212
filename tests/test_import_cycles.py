"""The import graph of `hrbench/` has no cycle (DESIGN §2), counting imports inside functions too.

A function-level import only postpones a cycle to the first call; it still ties the two modules
together, so it counts. Importing `a.b.c` runs `a/__init__` and `a/b/__init__` first, so a module
depends on every package above what it imports.
"""

from __future__ import annotations

import ast
from pathlib import Path

import hrbench

ROOT = Path(hrbench.__file__).resolve().parent.parent


def module_name(path: Path, root: Path) -> str:
    parts = path.relative_to(root).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def import_graph(package_dir: Path) -> dict[str, set[str]]:
    """Module -> hrbench modules it imports (anywhere in the file), with their parent packages."""
    files = {module_name(p, package_dir.parent): p for p in package_dir.rglob("*.py")}
    graph: dict[str, set[str]] = {}
    for name, path in files.items():
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        targets: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import):
                targets.update(a.name for a in node.names)
            elif isinstance(node, ast.ImportFrom):
                if node.level:
                    base = package.split(".")[: len(package.split(".")) - node.level + 1]
                    module = ".".join(base + ([node.module] if node.module else []))
                else:
                    module = node.module or ""
                targets.add(module)
                targets.update(f"{module}.{a.name}" for a in node.names)  # `from pkg import submodule`
        deps: set[str] = set()
        for target in targets:
            parts = target.split(".")
            deps.update(".".join(parts[:i]) for i in range(1, len(parts) + 1))
        # A package's own __init__ runs before its submodules: that edge is not a cycle.
        graph[name] = {d for d in deps if d in files and d != name and not name.startswith(d + ".")}
    return graph


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One cycle as a list of modules (first repeated at the end), or None."""
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        stack.append(node)
        for dep in sorted(graph[node]):
            if state.get(dep) == 1:
                return stack[stack.index(dep):] + [dep]
            if dep not in state:
                found = visit(dep)
                if found:
                    return found
        stack.pop()
        state[node] = 2
        return None

    for node in sorted(graph):
        if node not in state:
            found = visit(node)
            if found:
                return found
    return None


def test_hrbench_has_no_import_cycle():
    cycle = find_cycle(import_graph(ROOT / "hrbench"))
    assert cycle is None, "import cycle: " + " -> ".join(cycle or [])


def test_the_cycle_finder_finds_a_planted_cycle(tmp_path):
    pkg = tmp_path / "hrbench"
    (pkg / "sub").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "sub" / "__init__.py").write_text("")
    (pkg / "a.py").write_text("from hrbench.sub import b\n")
    (pkg / "sub" / "b.py").write_text("def f():\n    from hrbench import a  # lazy, still a cycle\n")
    cycle = find_cycle(import_graph(pkg))
    assert cycle is not None and set(cycle) == {"hrbench.a", "hrbench.sub.b"}


def test_the_core_never_imports_dagster():
    offenders = [str(p.relative_to(ROOT)) for p in (ROOT / "hrbench").rglob("*.py")
                 if any(isinstance(n, (ast.Import, ast.ImportFrom))
                        and any((getattr(n, "module", None) or "").startswith("dagster") or a.name.startswith("dagster")
                                for a in n.names)
                        for n in ast.walk(ast.parse(p.read_text())))]
    assert offenders == []
