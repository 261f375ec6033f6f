"""The layout shows the data flow, and imports follow it: a test fails on an import that goes the wrong
way or on a cycle between modules, whether the import is at the top of a file or inside a function.

    kernel  <-  instrument
    kernel  <-  collector  <-  queries  <-  alerts  <-  export  <-  dashboard
    kernel, instrument  <-  sample_data            turnlens (the command line) composes them all
"""

from __future__ import annotations

import ast
import fnmatch
import subprocess
import tomllib
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]

# folder -> the turnlens packages its modules may import (besides their own)
MAY_IMPORT: dict[str, set[str]] = {
    "kernel": set(),
    "instrument": {"kernel"},
    "collector": {"kernel"},
    "queries": {"kernel", "collector"},
    "alerts": {"kernel", "collector", "queries"},
    "export": {"kernel", "collector", "queries", "alerts"},
    "dashboard": {"kernel", "collector", "queries", "alerts", "export"},
    "sample_data": {"kernel", "instrument"},
}
PACKAGES = {**{name: name for name in MAY_IMPORT}, "turnlens": "turnlens"}


def _modules() -> dict[str, Path]:
    """turnlens.<package>.<module> -> file, for every Python file of the installed packages."""
    found = {}
    for folder in PACKAGES:
        for path in sorted((REPO / folder).rglob("*.py")):
            parts = path.relative_to(REPO / folder).with_suffix("").parts
            if parts[-1] == "__init__":
                parts = parts[:-1]
            prefix = ("turnlens",) if folder == "turnlens" else ("turnlens", folder)
            name = ".".join((*prefix, *parts))
            found[name] = path
    return found


def _imports(path: Path) -> set[str]:
    """Every turnlens module the file imports, at any depth of the code (lazy imports count)."""
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names if alias.name.startswith("turnlens"))
        elif isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("turnlens"):
            names.add(node.module)
            names.update(f"{node.module}.{alias.name}" for alias in node.names)
    return names


def _package_of(module: str) -> str:
    """The folder a module lives in; the bare `turnlens` package (its version) belongs to everyone."""
    parts = module.split(".")
    if len(parts) == 1:
        return "kernel"
    return parts[1] if parts[1] in MAY_IMPORT else "turnlens"


MODULES = _modules()
GRAPH = {
    name: {imported for imported in _imports(path) if imported in MODULES and imported != name}
    for name, path in MODULES.items()
}


@pytest.mark.parametrize("package", sorted(MAY_IMPORT))
def test_a_package_imports_only_what_lies_upstream_of_it(package: str) -> None:
    wrong = sorted(
        f"{module} imports {imported}"
        for module, imported_set in GRAPH.items()
        if _package_of(module) == package
        for imported in imported_set
        if _package_of(imported) not in MAY_IMPORT[package] | {package}
    )
    assert not wrong, "imports against the data flow:\n" + "\n".join(wrong)


def test_no_module_imports_itself_through_others() -> None:
    """Tarjan's strongly connected components: any component of more than one module is a cycle."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    cycles: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for nxt in sorted(GRAPH[node]):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                cycles.append(sorted(component))

    for node in sorted(GRAPH):
        if node not in index:
            visit(node)
    assert not cycles, "import cycles:\n" + "\n".join(" <-> ".join(c) for c in cycles)


def test_the_graph_sees_the_imports_it_checks() -> None:
    """The checks above are only as good as the graph: it must see lazy imports inside functions."""
    assert "turnlens.queries.catalog" in GRAPH["turnlens.queries.commands"]
    assert "turnlens.queries.manifest" in GRAPH["turnlens.queries.catalog"]
    assert "turnlens.kernel.contract" in GRAPH["turnlens.instrument.tracing"]
    assert len(MODULES) > 60


def _package_data() -> list[tuple[str, str]]:
    """(folder, glob) for every package-data glob of pyproject.toml, the folder its package installs from."""
    setuptools = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["setuptools"]
    folders = setuptools["package-dir"]
    found = []
    for package, globs in setuptools["package-data"].items():
        found += [(folders[package], pattern) for pattern in globs]
    return found


def test_every_file_the_packages_read_is_installed_with_them() -> None:
    """A wheel (`pip install /path/to/turnlens`, not the editable install the tests run from) carries only the
    files package-data names: queries/turn/*.sql was missing, so the Turn page, the export and NAME_of_turn
    failed on such an install while every test passed."""
    data = _package_data()
    tracked = subprocess.run(
        ["git", "ls-files", *MAY_IMPORT, "turnlens"], cwd=REPO, capture_output=True, text=True, check=True
    ).stdout.split()
    assert any(name.startswith("queries/") for name in tracked), "git lists the packages' files"
    missing = []
    for name in tracked:
        if name.endswith((".py", ".pyx", ".pyi")):
            continue
        if not any(_matches(name, folder, pattern) for folder, pattern in data):
            missing.append(name)
    assert missing == [], "files the code reads that pyproject.toml's package-data leaves out of a wheel"


def _matches(name: str, folder: str, pattern: str) -> bool:
    """Whether the file `name` (relative to the repository) is `pattern` of the package in `folder` (a glob
    whose `*` stays within one folder, as setuptools reads it)."""
    if not name.startswith(folder + "/"):
        return False
    parts, wanted = name[len(folder) + 1 :].split("/"), pattern.split("/")
    return len(parts) == len(wanted) and all(
        fnmatch.fnmatchcase(part, glob) for part, glob in zip(parts, wanted, strict=True)
    )
