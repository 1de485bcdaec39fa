"""Write (argv[2] == "w") or append argv[3] times to file argv[1], each time a step T<k> of
argv[4] (default 100 000) float64 per rank, in one process per rank; rank 0 prints one JSON
line per attempt: {"ok": true} or the error's class, errno and message, which every rank must
raise alike. With argv[5] == "slab", each step is written as h5py programs write it
(``create_dataset``, then each rank its slab, independently): a rank whose write fails leaves
the file after an error of its own, so the ranks' errors differ, and rank 0 prints every
rank's (a list)."""

import json
import sys

import numpy as np
from mpi4py import MPI

import h5subfile as hs

comm = MPI.COMM_WORLD
path, mode, attempts = sys.argv[1], sys.argv[2], int(sys.argv[3])
elements = int(sys.argv[4]) if len(sys.argv) > 4 else 100_000
slab = len(sys.argv) > 5 and sys.argv[5] == "slab"
for _ in range(attempts):
    said: dict[str, object] = {"ok": True}
    try:
        with hs.File(path, mode, comm=comm) as f:
            name = f"T{len(f.keys())}/x"
            if slab:
                x = f.create_dataset(name, (elements * comm.size,), "f8")
                x[comm.rank * elements : (comm.rank + 1) * elements] = np.full(elements, comm.rank)
            else:
                f.write_datasets({name: np.full(elements, comm.rank, "f8")})
    except (OSError, hs.CollectiveMismatchError) as exc:  # the latter: a rank's own error
        said = {"class": type(exc).__name__, "errno": getattr(exc, "errno", None)}
        said["message"] = str(exc)
    every = comm.gather(said)
    if comm.rank == 0 and slab:
        print(json.dumps(every), flush=True)
    elif comm.rank == 0:
        assert all(other == said for other in every), every  # the same error on every rank
        print(json.dumps(said), flush=True)
