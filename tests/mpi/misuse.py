"""A job that misuses a file on rank 1, run under plain ``mpiexec -n N python misuse.py CASE
FOLDER`` (not ``python -m mpi4py``, which would abort the job at the first uncaught
exception): every rank must end by itself, with an error, instead of hanging.

- ``exception``: rank 1 raises ValueError inside ``with File(...)``; nothing catches it.
- ``leave``: rank 1 exits without closing the file while the others write.
"""

from __future__ import annotations

import sys
import traceback

import numpy as np
from mpi4py import MPI

import h5subfile as hs


def main(case: str, folder: str) -> None:
    comm = MPI.COMM_WORLD
    rank = comm.rank
    f = hs.File(f"{folder}/{case}.h5", "w")
    d = f.create_dataset("x", (2 * comm.size,), "i4", start=(2 * rank,), count=(2,))
    if rank == 1 and case == "leave":
        print("rank 1 leaves without closing the file", flush=True)
        sys.exit(0)
    with f:
        if rank == 1 and case == "exception":
            raise ValueError("boom on rank 1")
        d.write(np.full(2, rank, "i4"))


if __name__ == "__main__":
    try:
        main(sys.argv[1], sys.argv[2])
    except Exception:
        if sys.argv[1] != "exception":
            raise
        # Every rank prints its error, then waits for the others (the agreement round left the
        # communicator in step): the first rank to exit with an error makes mpiexec kill the
        # rest, which could cut another rank's report short.
        traceback.print_exc()
        sys.stderr.flush()
        MPI.COMM_WORLD.Barrier()
        sys.exit(1)
