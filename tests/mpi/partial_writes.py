"""dset[box] = data (independent pieces of a rank's block), read_direct and create_datasets.

Prints JSON per rank: what was raised where, and whether the file reads back right."""

import json
import sys

import numpy as np
from mpi4py import MPI

import h5subfile as hs

comm = MPI.COMM_WORLD
rank, size = comm.rank, comm.size
folder = sys.argv[1]
report = {}


def outcome(fn):
    try:
        fn()
        return ["ok", ""]
    except Exception as exc:  # noqa: BLE001 - reported
        return [type(exc).__name__, str(exc)]


with hs.File(f"{folder}/pieces.h5", "w", subfiles=2) as f:
    grid, line = f.create_datasets(
        {
            "grid": dict(shape=(4 * size, 6), dtype="i4", start=(4 * rank, 0), count=(4, 6)),
            "line": dict(shape=(10 * size,), dtype="f8", start=(10 * rank,), count=(10,)),
        }
    )
    full = np.arange(4 * size * 6, dtype="i4").reshape(4 * size, 6)
    for row in (3, 0, 2, 1):  # pieces in any order
        grid[4 * rank + row, :] = full[4 * rank + row]
    line[10 * rank : 10 * rank + 4] = np.arange(4.0)  # only part of the block
    other_row = (4 * rank + 4) % (4 * size)  # the first row of the next rank's block

    def outside_block():
        grid[other_row, :] = full[other_row]

    def strided_write():
        grid[4 * rank : 4 * rank + 4 : 2, :] = full[:2]

    def wrong_shape():
        line[10 * rank : 10 * rank + 3] = np.zeros(4)

    for name, fn in (
        ("outside_block", outside_block),
        ("strided_write", strided_write),
        ("wrong_shape", wrong_shape),
    ):
        report[name] = outcome(fn)
    try:
        f.close()
        report["close"] = ["ok", ""]
    except Exception as exc:  # noqa: BLE001 - reported
        report["close"] = [type(exc).__name__, str(exc)]

with hs.File(f"{folder}/pieces.h5", "r") as f:
    report["grid_ok"] = bool(np.array_equal(f["grid"][...], full))
    buffer = np.empty((2, 6), "i4")
    f["grid"].read_direct(buffer, np.s_[1:3, :])
    report["read_direct_ok"] = bool(np.array_equal(buffer, full[1:3]))
    column = np.empty(4 * size, "i4")
    f["grid"].read_direct(column, np.s_[:, 5])  # not a contiguous box: still right
    report["read_direct_column_ok"] = bool(np.array_equal(column, full[:, 5]))
    report["line"] = outcome(lambda: f["line"][...])
reports = comm.gather(report)
if rank == 0:
    print(json.dumps(reports))
