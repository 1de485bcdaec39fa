"""Open a file for writing, write a new step, then every rank dies with SIGKILL before close.

argv: mode ("a" or "w"), path, step number to write.
"""

import os
import signal
import sys

import numpy as np
from mpi4py import MPI

import h5subfile as hs

comm = MPI.COMM_WORLD
mode, path, step = sys.argv[1], sys.argv[2], int(sys.argv[3])
f = hs.File(path, mode, subfiles=2)
group = f.create_group(f"Timestep_{step}")
group.write_dataset("x", np.full(1000, comm.rank, "f4"))
comm.Barrier()
os.kill(os.getpid(), signal.SIGKILL)
