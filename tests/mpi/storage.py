"""Chunked and compressed datasets, two-phase aggregation and alignment: write with this job's
rank count (every filter, chunk shapes aligned to the blocks and straddling them, partial edge
chunks, N-D tiles), then read back bit for bit, independently and collectively.

usage: storage.py write DIR GROUPING [PLAN-JSON]   |   storage.py read DIR
"""

import glob
import json
import os
import sys

import hdf5plugin
import numpy as np
from common import COMPOUND, expected, tile_block
from mpi4py import MPI

import h5subfile as hs
from h5subfile.layout.selection import partition

comm = MPI.COMM_WORLD
rank, size = comm.rank, comm.size
FILTERS = {
    "gzip": dict(compression="gzip", compression_opts=6, shuffle=True),
    "lzf": dict(compression="lzf"),
    "zstd": dict(compression="zstd:5"),
    "lz4": dict(compression="lz4"),
    "blosc": dict(compression="blosc", compression_opts=dict(cname="zstd", clevel=3)),
    "blosc2": dict(compression="blosc2"),
    "bitshuffle": dict(compression="bitshuffle"),
    "zstd_object": dict(compression=hdf5plugin.Zstd(clevel=2)),
    "fletcher32_only": dict(chunks=True, fletcher32=True),
    "chunked_only": dict(chunks=(7,)),
}


def length(r: int) -> int:
    """Uneven 1-D lengths (rank 1 empty when there are more than 2 ranks)."""
    return 0 if (r == 1 and size > 2) else 1000 + 37 * r


def rows(r: int) -> int:
    return 11 + 3 * r


def write(folder: str, grouping: str, plan: dict) -> None:
    kwargs = dict(subfiles=int(grouping) if grouping.isdigit() else grouping, **plan)
    with hs.File(os.path.join(folder, f"storage_{grouping}.h5"), "w", **kwargs) as f:
        start = sum(length(r) for r in range(rank))
        for name, storage in FILTERS.items():
            dtype = "f4" if name != "lz4" else "i8"
            n = sum(length(r) for r in range(size))
            full = expected(f"/one/{name}", (n,), np.dtype(dtype))
            f.require_group("one").write_dataset(
                name, full[start : start + length(rank)], **storage
            )
        # Straddling chunks: 64 does not divide the ranks' offsets; 5 x 3 chunks of a 2-D array
        # leave partial chunks at the edges.
        n = sum(length(r) for r in range(size))
        full = expected("/straddle", (n,), np.dtype("f8"))
        f.write_dataset(
            "straddle", full[start : start + length(rank)], chunks=(64,), compression="gzip"
        )
        total = sum(rows(r) for r in range(size))
        full = expected("/rows", (total, 7), np.dtype("i4"))
        lo = sum(rows(r) for r in range(rank))
        f.write_dataset("rows", full[lo : lo + rows(rank)], chunks=(5, 3), compression="zstd")
        full = expected("/compound", (total, 7), COMPOUND)
        f.write_dataset("compound", full[lo : lo + rows(rank)], compression="gzip")
        # N-D tiles (blocks that do not coalesce), chunks straddling tiles.
        corner, count = tile_block(rank, size)
        shape = (4, 6, 2 * size)
        full = expected("/tiles", shape, np.dtype("u2"))
        block = tuple(slice(c, c + n) for c, n in zip(corner, count))
        f.write_dataset("tiles", full[block], start=corner, chunks=(3, 2, 3), compression="blosc")
        # Contiguous data written through the same plan (aggregated when the plan says so),
        # several datasets at once, and a collective partial write.
        arrays = {
            f"c{i}": expected(f"/contig/c{i}", (n,), np.dtype("f4"))[start : start + length(rank)]
            for i in range(3)
        }
        f.require_group("contig").write_datasets(arrays, compression=False)
        full = expected("/pieces", (size * 100,), np.dtype("i4"))
        d = f.create_dataset(
            "pieces", (size * 100,), "i4", start=(rank * 100,), count=(100,), compression=False
        )
        with d.collective:
            d[rank * 100 : rank * 100 + 60] = full[rank * 100 : rank * 100 + 60]
            d[rank * 100 + 60 : rank * 100 + 100] = full[rank * 100 + 60 : rank * 100 + 100]
        # Read back in the same session (chunks written by other ranks' leaders).
        got = f["straddle"][...]
        want = expected("/straddle", (n,), np.dtype("f8"))
        assert np.array_equal(got, want), "same-session read of straddle"
        if rank == 0:
            print(json.dumps({"plan": f.plan.to_dict()}))


def read(folder: str, plan: dict) -> None:
    checked = 0
    for path in sorted(glob.glob(os.path.join(folder, "storage_*.h5"))):
        with hs.File(path, "r", **plan) as f:
            for name in FILTERS:
                d = f["one"][name]
                want = expected(d.name, d.shape, d.dtype)
                assert np.array_equal(d[...], want), (path, d.name)
                lo, hi = partition(d.shape[0], size, rank)
                assert np.array_equal(d.read_partition(), want[lo:hi]), (path, d.name)
                assert np.array_equal(d[5::7], want[5::7]), (path, d.name)
                checked += 3
            for name, dtype in (
                ("straddle", "f8"),
                ("rows", "i4"),
                ("compound", COMPOUND),
                ("tiles", "u2"),
            ):
                d = f[name]
                want = expected(d.name, d.shape, np.dtype(dtype))
                if name == "tiles":
                    mask = np.zeros(d.shape, bool)
                    for r in range(d.shape[2] // 2):
                        corner, count = tile_block(r, d.shape[2] // 2)
                        mask[tuple(slice(c, c + k) for c, k in zip(corner, count))] = True
                    want = np.where(mask, want, 0).astype(want.dtype)
                got = d[...]
                assert got.dtype == want.dtype and np.array_equal(got, want), (path, name)
                with d.collective:
                    part = d[rank % d.shape[0] :]
                assert np.array_equal(part, want[rank % d.shape[0] :]), (path, name, "collective")
                checked += 2
            for i in range(3):
                d = f[f"contig/c{i}"]
                want = expected(d.name, d.shape, d.dtype)
                with d.collective:
                    got = d[rank:]
                assert np.array_equal(got, want[rank:]), (path, d.name)
                checked += 1
            d = f["pieces"]
            assert np.array_equal(d[...], expected("/pieces", d.shape, d.dtype)), path
    total = comm.allreduce(checked)
    if rank == 0:
        print(f"checked {total}")


if __name__ == "__main__":
    plan = json.loads(sys.argv[4]) if len(sys.argv) > 4 else {}
    if sys.argv[1] == "write":
        write(sys.argv[2], sys.argv[3], plan)
    else:
        read(sys.argv[2], json.loads(sys.argv[3]) if len(sys.argv) > 3 else {})
