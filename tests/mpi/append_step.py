"""Append step argv[2] to file argv[1] (as a restarted job would: require_group, so an unfinished
step left by a crash is rewritten): dataset x holds 0.0 from rank 0, 1.0 from rank 1."""

import sys

import numpy as np
from mpi4py import MPI

import h5subfile as hs

comm = MPI.COMM_WORLD
with hs.File(sys.argv[1], "a", subfiles=2) as f:
    f.require_group(f"Timestep_{sys.argv[2]}").write_dataset("x", np.full(1000, comm.rank, "f4"))
