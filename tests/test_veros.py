"""A real model's output end to end: Veros (a pure-Python ocean model from PyPI) run unchanged
under ``h5subfile run`` at 2 and 4 ranks, writing its netCDF-4 diagnostics through h5netcdf
(``driver="mpio"``) and its restart through h5py's ``mpio`` driver. Its files are compared with
the same run's under parallel HDF5 (``make phdf5``, the same decomposition): the same groups,
variables, dimensions, attributes and values, bit for bit. Optional: skipped, saying why,
where Veros or the parallel-HDF5 environment is not installed (``make venv`` installs Veros
where it can)."""

from __future__ import annotations

import importlib.util
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import MPIEXEC, ROOT

PHDF5_BIN = ROOT.parent / ".venv-phdf5" / "bin"
FILES = ("acc.averages.nc", "acc.energy.nc", "acc.overturning.nc", "acc.snapshot.nc")
RESTART = "acc_restart.h5"
#: Eight days of the ACC setup (16 time steps): every diagnostic file is created, and the energy
#: and overturning files are opened again to append a step (a later write session each).
RUN = ["-s", "runlen", "691200", "-s", "restart_output_filename", RESTART]
#: Attributes that differ between two runs whatever writes them: the clock, the setup's path,
#: the library versions netCDF-4 records, and h5subfile's own records.
VARYING = ("date_created", "setup_file", "_NCProperties")

#: Everything plain h5py sees of a file, as comparable text (values bit for bit).
DESCRIBE = """
import sys, h5py, numpy as np
varying = set(sys.argv[2].split(","))
def value(v):
    if isinstance(v, h5py.Reference):
        return f.get(v).name if v else None
    if isinstance(v, np.ndarray) and v.dtype.kind == "O":
        return [value(x) for x in v.tolist()]
    if isinstance(v, np.ndarray) and v.dtype.names:
        return [[value(x) for x in row] for row in v.tolist()]
    if isinstance(v, np.ndarray):
        return (v.dtype.str, v.shape, v.tobytes().hex())
    return repr(v)
def attrs(obj):
    found = sorted((k, value(obj.attrs[k])) for k in obj.attrs
                   if k not in varying and not k.startswith("h5subfile"))
    # a scale's users in any order: HDF5 gives it no meaning (h5subfile attaches a dataset
    # again when it remakes it at close, which lists it last)
    return [(k, sorted(v) if k == "REFERENCE_LIST" else v) for k, v in found]
with h5py.File(sys.argv[1]) as f:
    out = [("/", attrs(f))]
    def visit(name, obj):
        if isinstance(obj, h5py.Dataset):
            data = obj[()]
            out.append((name, obj.shape, obj.dtype.str, value(np.asarray(data)), attrs(obj)))
        else:
            out.append((name, attrs(obj)))
    f.visititems(visit)
for row in out:
    print(row)
"""


def _veros_script(python: Path) -> Path | None:
    """The ``veros`` command of the environment of ``python``, if Veros is installed there."""
    script = python.parent / "veros"
    return script if script.exists() else None


def _run(command: list[str], cwd: Path, env: dict[str, str] | None = None) -> None:
    result = subprocess.run(command, cwd=cwd, capture_output=True, text=True, timeout=600, env=env)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]


def _describe(path: Path) -> str:
    out = subprocess.run(
        [sys.executable, "-c", DESCRIBE, str(path), ",".join(VARYING)],
        capture_output=True,
        text=True,
        check=True,
        timeout=300,
    )
    return out.stdout


@pytest.mark.skipif(
    importlib.util.find_spec("veros") is None,
    reason="Veros is not installed here (make venv installs it where PyPI serves it)",
)
@pytest.mark.skipif(
    _veros_script(PHDF5_BIN / "python") is None,
    reason="no parallel-HDF5 environment with Veros (make phdf5 builds it)",
)
@pytest.mark.parametrize("grid", [(2, 1), (2, 2)])
def test_veros_files_as_parallel_hdf5_writes_them(tmp_path: Path, grid: tuple[int, int]) -> None:
    ranks = grid[0] * grid[1]
    ours_bin = Path(sys.executable).parent
    veros_ours, veros_theirs = (
        _veros_script(ours_bin / "python"),
        _veros_script(PHDF5_BIN / "python"),
    )
    assert veros_ours is not None and veros_theirs is not None
    ours, theirs = tmp_path / "h5subfile", tmp_path / "phdf5"
    _run([str(veros_ours), "copy-setup", "acc", "--to", str(ours)], tmp_path)  # makes it
    theirs.mkdir()
    shutil.copy(ours / "acc.py", theirs / "acc.py")
    decomposition = ["-n", str(grid[0]), str(grid[1])]
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    _run(
        [
            str(PHDF5_BIN / "mpiexec"),
            "-n",
            str(ranks),
            str(PHDF5_BIN / "python"),
            str(veros_theirs),
            "run",
            "acc.py",
            *decomposition,
            *RUN,
        ],
        theirs,
        env,
    )
    _run(
        [
            str(MPIEXEC),
            "-n",
            str(ranks),
            str(ours_bin / "h5subfile"),
            "run",
            str(veros_ours),
            "run",
            "acc.py",
            *decomposition,
            *RUN,
        ],
        ours,
    )
    for name in (*FILES, RESTART):
        assert (ours / name).exists() and (theirs / name).exists(), name
        assert _describe(ours / name) == _describe(theirs / name), name
