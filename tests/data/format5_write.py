"""How tests/data/format5.tar.gz was made: h5subfile at commit e9c0b8d (layout format 5: one VDS
mapping per piece of a learned layout), run as
``mpiexec -n 4 python -m mpi4py tests/data/format5_write.py format5.h5`` with that commit's
src/ on PYTHONPATH. Kept so the fixture can be made again."""

import sys

import numpy as np
from mpi4py import MPI

import h5subfile as hs

comm = MPI.COMM_WORLD
rank = comm.rank
with hs.File(sys.argv[1], "w", subfiles=2) as f:
    f.attrs["made_by"] = "h5subfile at commit e9c0b8d (layout format 5)"
    slabs = f.create_dataset("slabs", (16,), "i4")
    slabs[4 * rank : 4 * rank + 4] = np.arange(4 * rank, 4 * rank + 4)
    rows = f.create_dataset("rows", (8, 3), "f8")
    rows[rank::4] = np.arange(6.0).reshape(2, 3) + 10 * rank
