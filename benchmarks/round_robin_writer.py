"""A parallel h5py program as its users write it (``driver="mpio"``): 4 datasets of 2048 x 2048
doubles (32 MiB each), rank r of P writing rows r, r + P, ... of each in one call. Rank 0
prints the write's time, from the open to the end of the close, as JSON
(``{"observed_seconds": ...}``). Run under ``h5subfile run --subfiles 2`` by
write_patterns.py (its ``rows_h5py_2`` command), or with parallel h5py itself."""

from __future__ import annotations

import json
import sys

import h5py
import numpy as np
from mpi4py import MPI

N = 2048

comm = MPI.COMM_WORLD
rank, size = comm.rank, comm.size
rows = [np.arange(N * N, dtype="f8").reshape(N, N)[rank::size] + k for k in range(4)]
comm.Barrier()
began = MPI.Wtime()
with h5py.File(sys.argv[1], "w", driver="mpio", comm=comm) as f:
    for k, mine in enumerate(rows):
        f.create_dataset(f"d{k}", (N, N), "f8")[rank::size] = mine
comm.Barrier()
if rank == 0:
    print(json.dumps({"observed_seconds": MPI.Wtime() - began}))
