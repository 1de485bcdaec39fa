"""How tests/data/format2.tar.gz was made: h5subfile at commit f522254 (layout format 2: no
session ids, no checksums, subfile names without the id), run as
``mpiexec -n 2 python -m mpi4py tests/data/format2_write.py format2.h5`` with that commit's
src/ on PYTHONPATH. Kept so the old-format fixture can be made again."""

import sys

import numpy as np
from mpi4py import MPI

import h5subfile as hs

comm = MPI.COMM_WORLD
with hs.File(sys.argv[1], "w", subfiles=2) as f:
    f.attrs["made_by"] = "h5subfile at commit f522254 (layout format 2)"
    f.write_dataset("x", np.arange(8, dtype="i4") + 8 * comm.rank)
    f.write_dataset("z", np.arange(16, dtype="f8") + 16 * comm.rank, compression="gzip")
