"""Two-phase writes keep memory bounded: each rank writes a large block through one aggregator
with a small buffer; report the growth of each rank's peak resident memory during the write.

usage: peak_memory.py PATH MIB_PER_RANK BUFFER_SIZE
"""

import json
import resource
import sys

import numpy as np
from mpi4py import MPI

import h5subfile as hs

comm = MPI.COMM_WORLD
path, mib, buffer_size = sys.argv[1], int(sys.argv[2]), sys.argv[3]
n = mib * (1 << 20) // 8
data = np.arange(comm.rank * n, (comm.rank + 1) * n, dtype="f8")
with hs.File(path, "w", subfiles=1, aggregators=1, buffer_size=buffer_size) as f:
    d = f.create_dataset("big", (comm.size * n,), "f8", start=(comm.rank * n,), count=(n,))
    comm.Barrier()
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    d.write(data)
    after = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
del data
with hs.File(path, "r") as f:
    d = f["big"]
    lo, hi = comm.rank * n, (comm.rank + 1) * n
    ok = bool(np.array_equal(d[lo:hi], np.arange(lo, hi, dtype="f8")))
growth = comm.gather(after - before)
oks = comm.gather(ok)
if comm.rank == 0:
    print(json.dumps({"growth": growth, "ok": oks}))
