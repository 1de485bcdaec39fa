"""Write argv[2] steps to file argv[1], committing each (argv[3]: "every" opens the file with
commit_every_step=True, "explicit" calls File.commit() after each step), pausing argv[4]
seconds after each; argv[5:] are plan fields as name=value. Step s's dataset x holds
s * 1000 + rank on each rank's 100 elements; rank 0 prints "wrote s" once the call returns."""

import sys
import time

import numpy as np
from mpi4py import MPI

import h5subfile as hs

path, steps, how, pause = sys.argv[1], int(sys.argv[2]), sys.argv[3], float(sys.argv[4])
plan = dict(field.split("=", 1) for field in sys.argv[5:])
comm = MPI.COMM_WORLD
with hs.File(path, "a", commit_every_step=(how == "every"), **plan) as f:
    for step in range(steps):
        group = f.create_group(f"Timestep_{step}")
        group.write_datasets({"x": np.full(100, step * 1000 + comm.rank, "f8")})
        if how == "explicit":
            f.commit()
        if comm.rank == 0:
            print(f"wrote {step}", flush=True)
        time.sleep(pause)
