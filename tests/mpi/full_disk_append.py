"""Write (argv[2] == "w") or append argv[3] times to file argv[1], each time a step T<k> of
100 000 float64 per rank, in one process per rank; rank 0 prints one JSON line per attempt:
{"ok": true} or the error's class, errno and message, which every rank must raise alike."""

import json
import sys

import numpy as np
from mpi4py import MPI

import h5subfile as hs

comm = MPI.COMM_WORLD
path, mode, attempts = sys.argv[1], sys.argv[2], int(sys.argv[3])
for _ in range(attempts):
    said: dict[str, object] = {"ok": True}
    try:
        with hs.File(path, mode, comm=comm) as f:
            f.write_datasets({f"T{len(f.keys())}/x": np.full(100_000, comm.rank, "f8")})
    except OSError as exc:
        said = {"class": type(exc).__name__, "errno": exc.errno, "message": str(exc)}
    every = comm.gather(said)
    if comm.rank == 0:
        assert all(other == said for other in every), every  # the same error on every rank
        print(json.dumps(said), flush=True)
