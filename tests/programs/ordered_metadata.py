"""An h5py ``mpio`` program writing groups, datasets and attributes with ``track_order``, and
a time stamp that differs on every rank: run by tests/test_metadata_phdf5.py with parallel
HDF5 (``make phdf5``) and with h5subfile (the one line changed), whose files must list the
same. Arguments: the file, then ``h5subfile`` to write it with h5subfile."""

import sys

import h5py
import numpy as np
from mpi4py import MPI

comm = MPI.COMM_WORLD
opener = h5py.File
if sys.argv[2:] == ["h5subfile"]:
    import h5subfile

    opener = h5subfile.File
with opener(sys.argv[1], "w", driver="mpio", comm=comm, track_order=True) as f:
    for name in ("zeta", "alpha", "mid"):
        f.create_group(name)
    f.attrs["title"] = "run"
    f.attrs["Conventions"] = "CF-1.8"
    g = f.create_group("vars", track_order=True)
    x = g.create_dataset("x", (4 * comm.size,), "f8", track_order=True)
    x.attrs["units"] = "m"
    x.attrs["_FillValue"] = -1.0
    x.attrs["axis"] = "X"
    x[4 * comm.rank : 4 * comm.rank + 4] = np.arange(4.0) + 10 * comm.rank
    g.create_dataset("a", data=np.arange(3, dtype="i4"))
    by_name = f.create_group("by_name", track_order=False)
    by_name.create_group("b")
    by_name.create_group("a")
    by_name.attrs["y"] = 1
    by_name.attrs["x"] = 2
    f.attrs["stamp"] = f"rank {comm.rank}"  # different on every rank
