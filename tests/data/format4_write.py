"""How tests/data/format4.tar.gz was made: h5subfile at commit cb7227e (layout format 4: layouts
learned from the writes, maxshape), run as
``mpiexec -n 2 python -m mpi4py tests/data/format4_write.py format4.h5`` with that commit's
src/ on PYTHONPATH. Kept so the fixture can be made again."""

import sys

import numpy as np
from mpi4py import MPI

import h5subfile as hs

comm = MPI.COMM_WORLD
rank = comm.rank
with hs.File(sys.argv[1], "w", subfiles=2) as f:
    f.attrs["made_by"] = "h5subfile at commit cb7227e (layout format 4)"
    series = f.create_dataset("series", (2, 4), "f8", maxshape=(None, 4), fillvalue=-1.0)
    series[:, 2 * rank : 2 * rank + 2] = np.arange(4.0).reshape(2, 2) + 10 * rank
    f.create_dataset("axis", (4,), "i4")[2 * rank : 2 * rank + 2] = [2 * rank, 2 * rank + 1]
