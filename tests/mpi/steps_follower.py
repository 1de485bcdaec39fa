"""Follow file argv[1] (timeout argv[2] seconds) and check each step bit for bit against what
steps_writer.py wrote; rank 0 prints "step NAME" per step, then "end" or "error CLASS: msg"."""

import sys

import numpy as np
from mpi4py import MPI

import h5subfile as hs

comm = MPI.COMM_WORLD
try:
    for group in hs.follow(sys.argv[1], comm, timeout=float(sys.argv[2])):
        step = int(group.name.rsplit("_", 1)[1])
        x = group["x"].read_collective(slice(None))
        writers = x.size // 100
        expected = np.repeat(step * 1000 + np.arange(writers, dtype="f8"), 100)
        assert x.tobytes() == expected.tobytes(), (group.name, x[:3], expected[:3])
        if comm.rank == 0:
            print(f"step {group.name}", flush=True)
except hs.H5SubfileError as exc:
    if comm.rank == 0:
        print(f"error {type(exc).__name__}: {exc}", flush=True)
else:
    if comm.rank == 0:
        print("end", flush=True)
