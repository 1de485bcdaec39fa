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
