"""h5subfile as a user installs it: the README's recipe, in a new environment.

The source archive and the wheel build (``python -m build``, here without build isolation so that
no index is needed: the project environment has setuptools and build); the wheel installs with
``pip install --no-deps`` into a new virtual environment; then the runtime dependencies the
README's cluster recipe lists, which must be exactly pyproject.toml's (less the ``mpich`` wheel,
which the recipe replaces by the site's MPI); and there ``h5subfile --help``, ``import
h5subfile``, a small write and read, and the README's example under ``mpiexec`` all work.

The dependencies are not downloaded again: the new environment gets the project environment's
installed copies of exactly the distributions the recipe lists, plus ``mpich`` standing in for
the site's MPI (and whatever they require), linked file by file as their RECORD lists them; pip
then finds them installed (``pip install --no-index``) and checks that they satisfy the wheel
(``pip check``). Nothing else of the project environment is visible there, so a dependency
missing from pyproject.toml fails the import or the round trip. With
``H5SUBFILE_TEST_FROM_INDEX=1`` the new environment has its own pip and installs the
dependencies from the package index instead (slower, needs the network).
"""

from __future__ import annotations

import email
import importlib.metadata
import os
import re
import shlex
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

REPO = Path(__file__).resolve().parents[1]
README = REPO / "README.md"
#: The MPI the new environment uses, as the site's MPI would on a cluster.
MPI_WHEEL = "mpich"
FROM_INDEX = os.environ.get("H5SUBFILE_TEST_FROM_INDEX") == "1"
TIMEOUT = 600  # seconds per command: the shared test machine can be heavily loaded


def run(*args: object, **kwargs: object) -> subprocess.CompletedProcess[str]:
    """Run a command; fail the test with its output unless it succeeds."""
    command = [str(a) for a in args]
    result = subprocess.run(
        command, capture_output=True, text=True, timeout=TIMEOUT, check=False, **kwargs
    )
    assert result.returncode == 0, (
        f"{shlex.join(command)} exited {result.returncode}\n{result.stdout}\n{result.stderr}"
    )
    return result


def cluster_recipe() -> list[list[str]]:
    """The ``pip install`` commands of the README's cluster recipe, as argument lists."""
    text = README.read_text()
    at = text.index("**A cluster, with the site's MPI.**")
    block = re.search(r"```sh\n(.*?)```", text[at:], re.S)
    assert block, "no sh block after the README's cluster heading"
    commands = []
    for line in block.group(1).splitlines():
        line = re.sub(r"^# or: ", "", line)  # an alternative, given as a comment
        line = re.sub(r"^(\w+=(\$\([^)]*\)|\S+)\s+)+", "", line)  # VAR=value prefixes
        words = shlex.split(line, comments=True)
        if words[:4] == ["python", "-m", "pip", "install"]:
            commands.append(words[4:])
    return commands


def requirements(words: list[str]) -> list[Requirement]:
    return [Requirement(w) for w in words if not w.startswith("-")]


def key(req: Requirement) -> tuple[str, str, str]:
    return canonicalize_name(req.name), str(req.specifier), str(req.marker or "")


def wheel_requirements(wheel: Path) -> list[Requirement]:
    """The runtime dependencies the wheel's metadata declares (pyproject.toml's)."""
    with zipfile.ZipFile(wheel) as archive:
        name = next(n for n in archive.namelist() if n.endswith(".dist-info/METADATA"))
        metadata = email.message_from_bytes(archive.read(name))
    found = [Requirement(r) for r in metadata.get_all("Requires-Dist") or []]
    return [r for r in found if "extra" not in str(r.marker)]  # runtime: no optional extras


def applies(req: Requirement) -> bool:
    return req.marker is None or req.marker.evaluate({"extra": ""})


@pytest.fixture(scope="module")
def dist(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """``python -m build`` of the checkout: the source archive, then the wheel built from it."""
    out = tmp_path_factory.mktemp("dist")
    run(sys.executable, "-m", "build", "--no-isolation", "--outdir", out, REPO)
    return out


@pytest.fixture(scope="module")
def wheel(dist: Path) -> Path:
    (wheel,) = dist.glob("h5subfile-*.whl")
    return wheel


def test_the_wheel_holds_every_module_the_license_and_the_command(dist: Path, wheel: Path) -> None:
    assert wheel.name.endswith("-py3-none-any.whl"), wheel.name  # one wheel for every platform
    (sdist,) = dist.glob("h5subfile-*.tar.gz")
    with zipfile.ZipFile(wheel) as archive:
        names = set(archive.namelist())
        entry_points = next(n for n in names if n.endswith(".dist-info/entry_points.txt"))
        assert "h5subfile = h5subfile.cli:main" in archive.read(entry_points).decode()
    modules = {p.relative_to(REPO / "src").as_posix() for p in (REPO / "src").rglob("*.py")}
    assert modules and modules <= names, sorted(modules - names)
    assert any(n.endswith(".dist-info/licenses/LICENSE") for n in names), "no LICENSE in the wheel"
    assert "BSD-3-Clause" in (REPO / "pyproject.toml").read_text()
    assert "BSD 3-Clause License" in (REPO / "LICENSE").read_text()


def test_the_readme_recipe_lists_every_runtime_dependency(wheel: Path) -> None:
    commands = cluster_recipe()
    mpi4py = [c for c in commands if "--no-binary=mpi4py" in c]
    ours = [c for c in commands if "--no-deps" in c]
    others = [c for c in commands if c not in mpi4py and c not in ours and "--upgrade" not in c]
    assert len(mpi4py) == 1 and ours and len(others) == 1, commands
    targets = [[w for w in c if not w.startswith("-")] for c in ours]  # a checkout, a wheel
    assert [len(t) for t in targets] == [1, 1] and targets[1][0].endswith(".whl"), ours
    listed = requirements(mpi4py[0]) + requirements(others[0])
    declared = [r for r in wheel_requirements(wheel) if canonicalize_name(r.name) != MPI_WHEEL]
    assert MPI_WHEEL in {canonicalize_name(r.name) for r in wheel_requirements(wheel)}
    assert sorted(map(key, listed)) == sorted(map(key, declared)), (
        "the README's cluster recipe and pyproject.toml's dependencies differ"
    )


def link_installed(names: list[str], site: Path) -> list[str]:
    """Link the project environment's installed copies of ``names`` and of everything they
    require into the environment whose site-packages is ``site``; the names linked."""
    todo, done = list(names), set()
    while todo:
        name = canonicalize_name(todo.pop())
        if name in done:
            continue
        done.add(name)
        found = importlib.metadata.distribution(name)
        todo += [r.name for r in map(Requirement, found.requires or []) if applies(r)]
        for entry in found.files or []:
            source = Path(str(found.locate_file(entry)))
            target = Path(os.path.normpath(site / entry))  # ../../../bin/x -> the env's bin/x
            if "__pycache__" in entry.parts or not source.exists() or target.exists():
                continue
            target.parent.mkdir(parents=True, exist_ok=True)
            target.symlink_to(source.resolve())
    return sorted(done)


@pytest.fixture(scope="module")
def env(wheel: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A new virtual environment: the wheel with --no-deps, then the recipe's dependencies."""
    root = tmp_path_factory.mktemp("env") / "venv"
    python = root / "bin" / "python"
    listed = [c for c in cluster_recipe() if "--no-deps" not in c and "--upgrade" not in c]
    wanted = [r for c in listed for r in requirements(c) if applies(r)] + [Requirement(MPI_WHEEL)]
    specs = [str(r) for r in wanted]
    if FROM_INDEX:
        run(sys.executable, "-m", "venv", root)
        pip = [python, "-m", "pip"]
        run(*pip, "install", "--no-deps", wheel)
        run(*pip, "install", *specs)
    else:  # the project environment's pip drives the new one, which needs none of its own
        run(sys.executable, "-m", "venv", "--without-pip", root)
        pip = [sys.executable, "-m", "pip", "--python", python]
        run(*pip, "install", "--no-deps", "--no-index", wheel)
        (site,) = root.glob("lib/python*/site-packages")
        link_installed([r.name for r in wanted], site)
        run(*pip, "install", "--no-index", *specs)
    run(*pip, "check")
    return root


def clean_environ(env: Path) -> dict[str, str]:
    """The new environment first on PATH, as if activated; nothing of the project's."""
    keep = {k: v for k, v in os.environ.items() if not k.startswith(("PYTHON", "VIRTUAL_ENV"))}
    project_bin = str(Path(sys.executable).parent)
    path = [p for p in os.environ.get("PATH", "").split(os.pathsep) if p != project_bin]
    keep["PATH"] = os.pathsep.join([str(env / "bin"), *path])
    keep["VIRTUAL_ENV"] = str(env)
    return keep


ROUND_TRIP = """
import importlib.util, sys
import numpy as np
import h5subfile
assert h5subfile.__file__.startswith(sys.prefix), h5subfile.__file__
for absent in ("pytest", "matplotlib", "hypothesis"):  # the project environment stays out
    assert importlib.util.find_spec(absent) is None, absent
with h5subfile.File("small.h5", "w", subfiles=1) as f:
    f.write_dataset("x", np.arange(1000, dtype="f8"))
    f.write_dataset("z", np.arange(1000, dtype="i4"), compression="zstd")
with h5subfile.File("small.h5", "r", verify=True) as f:
    assert (f["x"][:] == np.arange(1000)).all() and (f["z"][10:20] == np.arange(10, 20)).all()
print("round trip", h5subfile.__file__)
"""


def test_the_installed_wheel_runs_in_a_new_environment(env: Path, tmp_path: Path) -> None:
    environ = clean_environ(env)
    result = run(env / "bin" / "h5subfile", "--help", env=environ, cwd=tmp_path)
    assert "vpic" in result.stdout and "repack" in result.stdout, result.stdout
    result = run(env / "bin" / "python", "-c", ROUND_TRIP, env=environ, cwd=tmp_path)
    assert "round trip" in result.stdout
    result = run(env / "bin" / "h5subfile", "info", "small.h5", env=environ, cwd=tmp_path)
    assert "/z" in result.stdout, result.stdout


def readme_example() -> str:
    text = README.read_text()
    at = text.index("## Using it from an application")
    block = re.search(r"```python\n(.*?)```", text[at:], re.S)
    assert block
    return block.group(1)


def test_the_readme_example_runs_as_written(env: Path, tmp_path: Path) -> None:
    """The example, run as the README says (the environment's mpiexec and python): one
    conventional file on one machine; subfiles once the ranks are on two (pretended) nodes."""
    (tmp_path / "app.py").write_text(readme_example())
    environ = clean_environ(env)
    job = [env / "bin" / "mpiexec", "-n", 2, env / "bin" / "python", "-m", "mpi4py", "app.py"]
    result = run(*job, env=environ, cwd=tmp_path)
    assert "rank 1: 1000000 values of x, grid column 0 = 0.0" in result.stdout, result.stdout
    assert (tmp_path / "run.h5").exists() and not (tmp_path / "run.subfiles").exists()
    run(*job, env={**environ, "H5SUBFILE_RANKS_PER_NODE": "1"}, cwd=tmp_path)
    assert len(list((tmp_path / "run.subfiles").glob("s0-*.h5"))) == 2
