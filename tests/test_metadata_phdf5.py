"""The same h5py ``mpio`` program (``tests/programs/ordered_metadata.py``: ``track_order``, and an
attribute each rank sets to its own value) written with parallel HDF5 (``make phdf5``: the judge
of what a real program gets) and with h5subfile at 2 ranks: plain h5py lists both files alike,
members and attributes in the same order with the same values, but for the attribute whose
value differs between ranks (parallel HDF5 keeps one rank's, h5subfile rank 0's). Skipped, saying
why, without the parallel-HDF5 environment."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import MPIEXEC, ROOT

PHDF5_BIN = ROOT.parent / ".venv-phdf5" / "bin"
PROGRAM = ROOT / "programs" / "ordered_metadata.py"
LISTING = """
import json, sys, h5py
def attrs(obj):
    return [[a, str(obj.attrs[a])] for a in obj.attrs if not a.startswith("h5subfile")]
with h5py.File(sys.argv[1]) as f:
    out = {"/": [list(f), attrs(f)]}
    f.visititems(lambda name, obj: out.__setitem__(
        name, [list(obj) if isinstance(obj, h5py.Group) else obj[...].tolist(), attrs(obj)]))
print(json.dumps(out))
"""


def _listing(path: Path) -> dict:
    out = subprocess.run(
        [sys.executable, "-c", LISTING, str(path)], capture_output=True, text=True, check=True
    )
    return json.loads(out.stdout)


@pytest.mark.skipif(
    not (PHDF5_BIN.parent / ".installed").exists(),
    reason="no parallel-HDF5 environment (make phdf5 builds it)",
)
def test_track_order_and_stamps_list_as_parallel_hdf5_writes_them(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    theirs, ours = tmp_path / "phdf5.h5", tmp_path / "h5subfile.h5"
    command = [str(PHDF5_BIN / "mpiexec"), "-n", "2", str(PHDF5_BIN / "python"), str(PROGRAM)]
    subprocess.run([*command, str(theirs)], check=True, timeout=300, env=env)
    command = [str(MPIEXEC), "-n", "2", sys.executable, "-W", "ignore", str(PROGRAM)]
    subprocess.run([*command, str(ours), "h5subfile"], check=True, timeout=300)
    want, got = _listing(theirs), _listing(ours)
    stamp = got["/"][1].pop()
    assert stamp == ["stamp", "rank 0"]
    assert want["/"][1].pop()[1] in ("rank 0", "rank 1")  # some rank's, as parallel HDF5 keeps
    assert got == want
    assert want["/"][0] == ["zeta", "alpha", "mid", "vars", "by_name"]


#: One program, run by parallel HDF5 and under ``h5subfile run``: what it prints (File.mode,
#: what writes broadcast), its exit status, and whether the file written in a ``with`` block
#: left with ``sys.exit`` keeps its data.
JUDGE = """
import sys, h5py, numpy as np
from mpi4py import MPI
comm = MPI.COMM_WORLD
path, status = sys.argv[1], int(sys.argv[2])
f = h5py.File(path + ".b.h5", "w", driver="mpio", comm=comm)
d = f.create_dataset("b", (10,), "f8")
if comm.rank == 0:
    d[3] = np.array([7.0])
    d[0:2] = np.ones((1, 2))
mode = f.mode
f.close()
if comm.rank == 0:
    with h5py.File(path + ".b.h5", "r") as g:
        print(mode, g["b"][:4].tolist(), flush=True)
with h5py.File(path, "w", driver="mpio", comm=comm) as f:
    f.create_dataset("x", (comm.size,), "i4")[comm.rank] = 7
    sys.exit(status)
"""


@pytest.mark.skipif(
    not (PHDF5_BIN.parent / ".installed").exists(),
    reason="no parallel-HDF5 environment (make phdf5 builds it)",
)
@pytest.mark.parametrize("status", [0, 3])
def test_mode_broadcasts_and_sys_exit_as_parallel_hdf5(tmp_path: Path, status: int) -> None:
    """Parallel HDF5 is the judge: ``File.mode``, data h5py broadcasts into a selection, and
    ``sys.exit`` inside the ``with`` block (the file kept, the status the job's)."""
    program = tmp_path / "judge.py"
    program.write_text(JUDGE)
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    theirs, ours = tmp_path / "phdf5.h5", tmp_path / "h5subfile.h5"
    command = [str(PHDF5_BIN / "mpiexec"), "-n", "2", str(PHDF5_BIN / "python"), str(program)]
    want = subprocess.run(
        [*command, str(theirs), str(status)], capture_output=True, text=True, timeout=300, env=env
    )
    h5subfile = Path(sys.executable).parent / "h5subfile"
    command = [str(MPIEXEC), "-n", "2", str(h5subfile), "run", str(program)]
    got = subprocess.run(
        [*command, str(ours), str(status)], capture_output=True, text=True, timeout=300
    )
    assert (got.returncode, got.stdout) == (want.returncode, want.stdout), got.stderr
    assert want.returncode == status and "r+ [1.0, 1.0, 0.0, 7.0]" in want.stdout
    read = "import sys, h5py\nprint(h5py.File(sys.argv[1], 'r')['x'][()].tolist())"
    for path in (theirs, ours):
        kept = subprocess.run(
            [sys.executable, "-c", read, str(path)], capture_output=True, text=True
        )
        assert kept.stdout.strip() == "[7, 7]", (path, kept.stderr)


#: Links and a copy from another file, as a parallel h5py program makes them
LINKS = """
import os, sys, h5py, numpy as np
from mpi4py import MPI
comm = MPI.COMM_WORLD
path = sys.argv[1]
source = path + ".src.h5"
if comm.rank == 0:
    with h5py.File(source, "w") as s:
        g = s.create_group("grid")
        g.attrs["units"] = "m"
        g["x"] = np.arange(6.0)
        g["latest"] = h5py.SoftLink("/grid/x")
comm.Barrier()
with h5py.File(source, "r", driver="mpio", comm=comm) as src:
    with h5py.File(path, "w", driver="mpio", comm=comm) as f:
        d = f.create_dataset("data/t", (2 * comm.size,), "i8")
        d[2 * comm.rank : 2 * comm.rank + 2] = [comm.rank, 10 + comm.rank]
        f["data/latest"] = h5py.SoftLink("/data/t")
        f["relative"] = h5py.SoftLink("data/t")
        f["ext"] = h5py.ExternalLink(os.path.basename(source), "/grid")
        f["alias"] = d
        f["nowhere"] = h5py.SoftLink("/missing")
        f.copy(src["grid"], "grid_copy")
        seen = [sorted(f), type(f.get("alias", getlink=True)).__name__, "nowhere" in f,
                f.get("nowhere"), f["relative"].shape, f["ext/x"][()].tolist(),
                f["relative"].name, f["alias"].name, f["data/latest"].parent.name]
        g = f.create_group("g")
        g.attrs["k"] = 1
        e = g.create_dataset("e", (comm.size,), "f8")
        e[comm.rank] = comm.rank + 0.5
        f.move("g", "h")
        f["h/sub"] = [1, 2]
        f["keep"] = f["h/e"]
        del f["h/e"]
        f.move("grid_copy", "moved/grid")
        seen += [sorted(f), sorted(f["h"]), "g" in f, f["keep"][()].tolist(), f["h"].attrs["k"]]
        f["keep"].attrs["ref"] = f["data/t"].ref
        f.attrs["refs"] = [f["h"].ref, f["keep"].ref]
        seen += [f[f["keep"].attrs["ref"]].name, [f[r].name for r in f.attrs["refs"]], e.name]
        f["types/point"] = np.dtype([("x", "<f4"), ("y", "<i2")])
        f["types/point"].attrs["units"] = "m"
        typed = f.create_dataset("typed", (comm.size,), dtype=f["types/point"])
        typed[comm.rank] = (comm.rank, 1)
        seen += [type(f["types/point"]).__name__, typed.id.get_type().committed(),
                 isinstance(f["types/point"], h5py.Datatype), sorted(f["types"])]
        popped = f.pop("moved")
        seen += [popped.name, sorted(popped), sorted(f)]
if comm.rank == 0:
    print(seen, flush=True)
"""

#: Every link of a file as plain h5py sees it, and the values read through it
LINK_LISTING = """
import json, sys, h5py
out = {}
with h5py.File(sys.argv[1]) as f:
    def visit(name, link):
        obj = f.get(name)
        out[name] = [type(link).__name__, getattr(link, "path", ""),
                     getattr(link, "filename", ""),
                     {k: str(v) for k, v in getattr(obj, "attrs", {}).items()
                      if not k.startswith("h5subfile")},
                     obj[()].tolist() if isinstance(obj, h5py.Dataset) else None]
    f.visititems_links(visit)
print(json.dumps(out, sort_keys=True))
"""


@pytest.mark.skipif(
    not (PHDF5_BIN.parent / ".installed").exists(),
    reason="no parallel-HDF5 environment (make phdf5 builds it)",
)
def test_links_and_copy_as_parallel_hdf5(tmp_path: Path) -> None:
    """Parallel HDF5 is the judge: soft, external and hard links, a copy from another file,
    groups and datasets moved, a name deleted while a hard link keeps its dataset,
    attributes holding object references, a named type a dataset is made with, and a group
    popped, made by
    the same program, seen alike by the program and by plain h5py afterwards."""
    program = tmp_path / "links.py"
    program.write_text(LINKS)
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    (tmp_path / "phdf5").mkdir()
    (tmp_path / "ours").mkdir()
    theirs, ours = tmp_path / "phdf5" / "f.h5", tmp_path / "ours" / "f.h5"
    command = [str(PHDF5_BIN / "mpiexec"), "-n", "2", str(PHDF5_BIN / "python"), str(program)]
    want = subprocess.run(
        [*command, str(theirs)], capture_output=True, text=True, timeout=300, env=env
    )
    assert want.returncode == 0, want.stderr
    h5subfile = Path(sys.executable).parent / "h5subfile"
    command = [str(MPIEXEC), "-n", "2", str(h5subfile), "run", str(program)]
    got = subprocess.run([*command, str(ours)], capture_output=True, text=True, timeout=300)
    assert (got.returncode, got.stdout) == (want.returncode, want.stdout), got.stderr
    listed = [
        subprocess.run(
            [sys.executable, "-c", LINK_LISTING, str(path)],
            capture_output=True,
            text=True,
            check=True,
        ).stdout
        for path in (theirs, ours)
    ]
    assert json.loads(listed[1]) == json.loads(listed[0])
    assert json.loads(listed[0])["alias"][4] == [0, 10, 1, 11]
