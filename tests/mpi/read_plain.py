"""Read a plain HDF5 file (written by h5py, not h5subfile) with this job's rank count and check
it: contiguous datasets (read directly), chunked/compressed, compact, scalar and
variable-length ones (read through h5py). argv = path."""

import sys

import numpy as np
from mpi4py import MPI

import h5subfile as hs

comm = MPI.COMM_WORLD
with hs.File(sys.argv[1], "r") as f:
    assert f.sessions == [] and not f.problems
    x = f["Timestep_0/x"]
    assert x.layout is not None and x.storage == "contiguous (plain HDF5)"
    n = x.shape[0]
    lo = comm.rank * (n // comm.size)
    part = x.read_partition()
    assert np.array_equal(part, np.arange(lo, lo + part.size, dtype="f4")), comm.rank
    chunked = f["chunked"]
    assert chunked.layout is None and chunked.storage == "read through h5py"
    assert np.array_equal(chunked[3:7, ::2], np.arange(200).reshape(20, 10)[3:7, ::2])
    assert np.array_equal(chunked[[1, 5]], np.arange(200).reshape(20, 10)[[1, 5]])
    assert np.array_equal(f["compact"][...], np.arange(5, dtype="i2"))
    assert f["scalar"][()] == 42.5
    assert [s.decode() if isinstance(s, bytes) else s for s in f["strings"][...]] == ["a", "bc"]
    assert f.attrs["creator"] == "plain h5py"
if comm.rank == 0:
    print("ok")
