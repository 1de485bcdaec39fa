"""The package stays readable: no function longer than 80 lines, no module over 700 lines,
and docs/ARCHITECTURE.md, the map of the code, gives every module a row with a one-line role."""

from __future__ import annotations

import ast
import re
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[2] / "src" / "h5subfile"
ARCHITECTURE = PACKAGE.parents[1] / "docs" / "ARCHITECTURE.md"
MAX_FUNCTION_LINES = 80
MAX_MODULE_LINES = 700
#: The longest role a module's row of docs/ARCHITECTURE.md may give: one line, one sentence.
MAX_ROLE_CHARS = 200
#: A row of the map's module table: | `io/posix.py` | role |
MODULE_ROW = re.compile(r"^\| `(?P<name>[^`]+)` \| (?P<role>[^|]*?) \|$")


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


def module_names() -> list[str]:
    """Every module of the package as the map names it: ``io/posix.py``, ``plan.py``; a
    subpackage's ``__init__.py`` as its folder, ``io/``."""
    names = []
    for path in sorted(PACKAGE.rglob("*.py")):
        where = path.relative_to(PACKAGE)
        if len(where.parts) > 1 and where.name == "__init__.py":
            names.append(f"{where.parent.as_posix()}/")
        else:
            names.append(where.as_posix())
    return names


def module_rows(text: str) -> dict[str, list[str]]:
    """The roles the map's rows give each name (a row: the name alone in the first cell)."""
    rows: dict[str, list[str]] = {}
    for line in text.splitlines():
        row = MODULE_ROW.match(line)
        if row:
            rows.setdefault(row["name"], []).append(row["role"])
    return rows


def role_problem(role: str) -> str | None:
    """Why a role is not one line of one sentence, or None."""
    if not role:
        return "no role"
    if len(role) > MAX_ROLE_CHARS:
        return f"a role of {len(role)} characters (at most {MAX_ROLE_CHARS}: one line)"
    if "<br" in role.lower():
        return "a line break in its role"
    if not role.endswith("."):
        return "a role that does not end as a sentence"
    if re.search(r"[.!?] +[A-Z][a-z]", role.replace("e.g. ", "")):
        return "a role of more than one sentence"
    return None


def test_architecture_names_every_module() -> None:
    rows = module_rows(ARCHITECTURE.read_text())
    names = module_names()
    problems = []
    for name in names:
        roles = rows.get(name, [])
        if len(roles) != 1:
            problems.append(f"{name}: {len(roles)} rows (one wanted)")
        elif (problem := role_problem(roles[0])) is not None:
            problems.append(f"{name}: {problem}")
    looks_like_module = [n for n in rows if n.endswith((".py", "/"))]
    problems += [
        f"{n}: a row for a module that does not exist" for n in looks_like_module if n not in names
    ]
    assert not problems, f"docs/ARCHITECTURE.md's module table: {problems}"


def test_role_problems_are_found() -> None:
    """The check above refuses what it should: a missing role, a long one, two sentences."""
    assert role_problem("The one layer every byte passes through.") is None
    assert role_problem("") is not None
    assert role_problem("x" * MAX_ROLE_CHARS + ".") is not None
    assert role_problem("Writes. Then reads.") is not None
    assert role_problem("Writes<br>reads.") is not None
    assert module_rows("| `io/posix.py` | Positioned I/O. |\n| `io/` | Files. |") == {
        "io/posix.py": ["Positioned I/O."],
        "io/": ["Files."],
    }
