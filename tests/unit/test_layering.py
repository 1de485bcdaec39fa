"""Higher layers import lower ones, never the reverse; only mpi/ (and the facades above it)
imports mpi4py; only io/ imports h5py among the lower layers."""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[2] / "src" / "h5subfile"
# cli > tune > kernels | bench | repack > following | dropin > files > engine > io > profiler > mpi | layout > plan > errors | units |
# progress (STYLE.md, docs/ARCHITECTURE.md)
RANK: dict[str, float] = {
    "errors": 0,
    "units": 0,
    "_version": 0,
    "progress": 0,
    "plan": 1,
    "layout": 2,
    "mpi": 2,
    "profiler": 2.5,
    "io": 3,
    "engine": 4,
    "files": 5,
    "following": 6,
    "dropin": 6,
    "repack": 7,
    "kernels": 7,
    "bench": 7,
    "tune": 8,
    "cli": 9,
    "__init__": 10,
    "__main__": 10,
}


def layer(path: Path) -> str:
    parts = path.relative_to(PACKAGE).with_suffix("").parts
    return parts[0]


def imports(path: Path) -> list[tuple[str, int]]:
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom):
            module = node.module or ""
            if node.level:
                base = path.relative_to(PACKAGE).parent.parts
                base = base[: len(base) - (node.level - 1)] if node.level > 1 else base
                target = (list(base) + module.split("."))[0] if (base or module) else ""
                if not target:
                    target = module.split(".")[0] or (node.names[0].name if node.names else "")
                found.append((target, node.lineno))
            else:
                found.append((module.split(".")[0], node.lineno))
        elif isinstance(node, ast.Import):
            found.extend((alias.name.split(".")[0], node.lineno) for alias in node.names)
    return found


def test_layers_only_import_downwards() -> None:
    problems = []
    for path in PACKAGE.rglob("*.py"):
        own = layer(path)
        for target, line in imports(path):
            if target in RANK and target != own and RANK[target] >= RANK[own] and own != "__init__":
                problems.append(f"{path.relative_to(PACKAGE)}:{line} imports {target}")
    assert not problems, problems


def test_mpi4py_and_h5py_stay_in_their_layers() -> None:
    for path in PACKAGE.rglob("*.py"):
        own = layer(path)
        names = {t for t, _ in imports(path)}
        if own in ("layout", "io", "errors", "units", "plan"):
            assert "mpi4py" not in names, path
        if own in ("layout", "mpi", "errors", "units", "plan"):
            assert "h5py" not in names, path


BENCHMARKS = PACKAGE.parents[1] / "benchmarks"


def _module_of(path: Path) -> str:
    """``h5subfile.io.posix`` for src/h5subfile/io/posix.py (a package: its ``__init__``)."""
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _package_edges(modules: dict[str, Path]) -> dict[str, set[str]]:
    """Each module of h5subfile and the modules of h5subfile it imports, anywhere in it (at the
    top, inside a function or under ``if TYPE_CHECKING:``): ``from . import x`` names module
    ``x`` when there is one, else the package."""
    edges: dict[str, set[str]] = {name: set() for name in modules}
    for name, path in modules.items():
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        for node in ast.walk(ast.parse(path.read_text())):
            targets: list[str] = []
            if isinstance(node, ast.ImportFrom):
                if node.level:
                    base = package.split(".")
                    base = base[: len(base) - (node.level - 1)] if node.level > 1 else base
                    stem = ".".join([*base, *([node.module] if node.module else [])])
                else:
                    stem = node.module or ""
                targets = [f"{stem}.{alias.name}" for alias in node.names] + [stem]
            elif isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            for target in targets:
                if target in modules and target != name:
                    edges[name].add(target)
                    break
    return edges


def _benchmark_edges() -> dict[str, set[str]]:
    """Each script of benchmarks/ and the scripts it imports (they import each other by name)."""
    scripts = {path.stem: path for path in BENCHMARKS.glob("*.py")}
    edges: dict[str, set[str]] = {name: set() for name in scripts}
    for name, path in scripts.items():
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                found = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and not node.level:
                found = [node.module or ""]
            else:
                continue
            edges[name].update(f for f in found if f in scripts and f != name)
    return edges


def _cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one file (Tarjan's algorithm)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        for target in edges[node]:
            if target not in index:
                visit(target)
                low[node] = min(low[node], low[target])
            elif target in stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(edges):
        if node not in index:
            visit(node)
    return found


def test_no_file_imports_a_file_that_imports_it_back() -> None:
    """No cycle of imports between files, in the package or among the benchmark scripts,
    whether the import is at the top, inside a function or for type checking only."""
    modules = {_module_of(path): path for path in PACKAGE.rglob("*.py")}
    assert not _cycles(_package_edges(modules))
    assert not _cycles(_benchmark_edges())


def test_the_cycle_finder_finds_cycles() -> None:
    edges = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}, "e": set()}
    assert _cycles(edges) == [["a", "b", "c"]]
