"""The package stays readable: no function longer than 80 lines, no module over 700 lines,
and the engine's modules are the ones docs/ARCHITECTURE.md names."""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[2] / "src" / "h5subfile"
ARCHITECTURE = PACKAGE.parents[1] / "docs" / "ARCHITECTURE.md"
MAX_FUNCTION_LINES = 80
MAX_MODULE_LINES = 700


def test_functions_and_modules_stay_short() -> None:
    long = []
    for path in sorted(PACKAGE.rglob("*.py")):
        text = path.read_text()
        where = path.relative_to(PACKAGE)
        if len(text.splitlines()) > MAX_MODULE_LINES:
            long.append(f"{where}: {len(text.splitlines())} lines")
        for node in ast.walk(ast.parse(text)):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                assert node.end_lineno is not None
                lines = node.end_lineno - node.lineno + 1
                if lines > MAX_FUNCTION_LINES:
                    long.append(f"{where}:{node.lineno} {node.name}() has {lines} lines")
    assert not long, long


def test_architecture_names_every_module() -> None:
    text = ARCHITECTURE.read_text()
    missing = [
        str(path.relative_to(PACKAGE))
        for folder in ("engine", "layout", "io", "mpi")
        for path in sorted((PACKAGE / folder).glob("*.py"))
        if path.name != "__init__.py" and f"`{folder}/{path.name}`" not in text
    ]
    missing += [
        path.name
        for path in sorted(PACKAGE.glob("*.py"))
        if not path.name.startswith("_") and f"`{path.name}`" not in text
    ]
    assert not missing, f"docs/ARCHITECTURE.md does not describe {missing}"
