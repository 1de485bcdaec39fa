"""How tests/data/format3.tar.gz was made: h5subfile at commit bec83d0 (layout format 3: session
ids, dtypes, digests, checksums; every dataset with declared blocks), run as
``mpiexec -n 2 python -m mpi4py tests/data/format3_write.py format3.h5`` with that commit's
src/ on PYTHONPATH. Kept so the fixture can be made again."""

import sys

import numpy as np
from mpi4py import MPI

import h5subfile as hs

comm = MPI.COMM_WORLD
with hs.File(sys.argv[1], "w", subfiles=2) as f:
    f.attrs["made_by"] = "h5subfile at commit bec83d0 (layout format 3)"
    f.write_dataset("x", np.arange(8, dtype="i4") + 8 * comm.rank)
    f.write_dataset("z", np.arange(16, dtype="f8") + 16 * comm.rank, compression="gzip")
    grid = f.create_dataset("grid", (4, 6), "i2", start=(0, 3 * comm.rank), count=(4, 3))
    grid.write(np.arange(12, dtype="i2").reshape(4, 3) + 100 * comm.rank)
