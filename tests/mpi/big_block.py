"""One rank writes and reads back a block larger than 2 GiB (Linux moves at most ~2 GiB per
system call): argv = folder, bytes."""

import sys

import numpy as np
from mpi4py import MPI

import h5subfile as hs

folder, nbytes = sys.argv[1], int(sys.argv[2])
n = nbytes // 8
data = np.arange(n, dtype=np.uint64)
data *= np.uint64(0x9E3779B97F4A7C15)  # every 8-byte word differs: offset errors cannot hide
with hs.File(f"{folder}/big.h5", "w", comm=MPI.COMM_SELF) as f:
    f.write_dataset("block", data)
    written = f.stats.bytes_written
assert written == data.nbytes
with hs.File(f"{folder}/big.h5", "r", comm=MPI.COMM_SELF) as f:
    back = f["block"][...]
    assert back.shape == data.shape and np.array_equal(back, data)
    tail = f["block"][n - 3 :]
    assert np.array_equal(tail, data[n - 3 :])
print(f"ok {data.nbytes} bytes")
