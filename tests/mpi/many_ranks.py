"""Many ranks (oversubscribed) with subfiling factor 8: VPIC-style write, read back by all ranks
with BD-CATS partitions. argv = folder."""

import sys

import numpy as np
from mpi4py import MPI

import h5subfile as hs

comm = MPI.COMM_WORLD
rank, size = comm.rank, comm.size
path = f"{sys.argv[1]}/many.h5"
n = 1000 + rank  # uneven
first = comm.exscan(n) or 0
with hs.File(path, "w", ranks_per_subfile=8) as f:
    f.write_datasets(
        {
            "x": np.arange(first, first + n, dtype="f8"),
            "id": np.arange(first, first + n, dtype="i8"),
        }
    )
    assert f.grouping.ngroups == -(-size // 8)
total = comm.allreduce(n)
with hs.File(path, "r") as f:
    part = f["x"].read_partition()
    lo = rank * (total // size)
    assert np.array_equal(part, np.arange(lo, lo + part.size, dtype="f8")), rank
    assert comm.allreduce(part.size) == total
    assert np.array_equal(f["id"][::97], np.arange(0, total, 97))
if rank == 0:
    print(f"ok {size} ranks, {total} particles")
