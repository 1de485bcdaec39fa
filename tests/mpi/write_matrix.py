"""Write one file per grouping with this job's rank count: every dtype, 1-D prefix-sum blocks
(uneven, one empty), 2-D row blocks, 3-D tiles that do not coalesce, 5-D corner blocks,
zero-size and never-written datasets, attributes."""

import sys

import numpy as np
from common import DTYPES, expected, groupings_for, prefix_length, rows_block, tile_block
from mpi4py import MPI

import h5subfile as hs

comm = MPI.COMM_WORLD
rank, size = comm.rank, comm.size
outdir = sys.argv[1]

for label, kwargs in groupings_for(size).items():
    with hs.File(f"{outdir}/w{size}_{label}.h5", "w", **kwargs) as f:
        f.attrs["writers"] = size
        f.attrs["text"] = "hello"
        f.attrs["vector"] = np.arange(3.0)
        f.attrs["int16"] = np.int16(-5)
        f.attrs["bytes"] = b"raw"
        f.attrs["records"] = np.zeros(2, DTYPES["compound"])
        total = sum(prefix_length(r) for r in range(size))
        first = sum(prefix_length(r) for r in range(rank))
        mine = slice(first, first + prefix_length(rank))
        data = {key: expected(f"/prefix/{key}", (total,), dt)[mine] for key, dt in DTYPES.items()}
        group = f.create_group("prefix")
        group.write_datasets(data)
        group["f8"].attrs["units"] = "m"
        rows = 3 * size + 1
        for key, dt in DTYPES.items():
            start, count = rows_block(rank, size, rows)
            d = f.create_dataset(f"rows/{key}", (rows, 5), dt, start=start, count=count)
            d.write(expected(d.name, (rows, 5), dt)[start[0] : start[0] + count[0]])
        for key in ("f4", "compound"):
            start, count = tile_block(rank, size)
            box = tuple(slice(s, s + c) for s, c in zip(start, count))
            shape = (4, 6, 2 * size)
            d = f.create_dataset(f"tiles/{key}", shape, DTYPES[key], block=box)
            d.write(expected(d.name, shape, DTYPES[key])[box])
        shape5 = (2 * size, 2, 3, 1, 2)
        f.write_dataset(
            "five/i2",
            expected("/five/i2", shape5, "i2")[2 * rank : 2 * rank + 2],
            start=(2 * rank, 0, 0, 0, 0),
        )
        f.create_dataset("empty/zero", (0, 4), "f8").write(None)
        f.create_dataset("empty/unwritten", (3, 3), "i4")
