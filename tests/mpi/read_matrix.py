"""Read every file in a folder with this job's rank count and check every value bit for bit:
full reads, BD-CATS partitions, strided, integer, list and mask selections."""

import glob
import sys

import numpy as np
from common import DTYPES, expected, expected_tiles, same
from mpi4py import MPI

import h5subfile as hs
from h5subfile.layout.selection import partition

comm = MPI.COMM_WORLD
rank, size = comm.rank, comm.size
checked = 0


def check(got, want, what):
    global checked
    if not same(np.asarray(got), np.asarray(want)):
        raise AssertionError(f"rank {rank}: {what}: got {got!r}, expected {want!r}")
    checked += 1


for path in sorted(glob.glob(f"{sys.argv[1]}/*.h5")):
    with hs.File(path, "r") as f:
        writers = int(f.attrs["writers"])
        check(f.attrs["text"], "hello", f"{path} attrs text")
        check(f.attrs["vector"], np.arange(3.0), f"{path} attrs vector")
        check(f.attrs["int16"], np.int16(-5), f"{path} attrs int16")
        check(f.attrs["records"], np.zeros(2, DTYPES["compound"]), f"{path} attrs compound")
        assert f.attrs["bytes"] == "raw" and "h5subfile" not in f.attrs  # as h5py reads it
        assert f["prefix/f8"].attrs["units"] == "m"
        assert [k for k in f.keys() if not k.startswith("append")] == [
            "empty",
            "five",
            "prefix",
            "rows",
            "tiles",
        ], list(f.keys())
        for key, dt in DTYPES.items():
            for kind in ("prefix", "rows"):
                d = f[f"{kind}/{key}"]
                full = expected(d.name, d.shape, np.dtype(dt))
                assert d.dtype == np.dtype(dt), (path, d.name, d.dtype, dt)
                check(d[...], full, f"{path}:{d.name} full")
                lo, hi = partition(d.shape[0], size, rank)
                check(d.read_partition(), full[lo:hi], f"{path}:{d.name} partition")
                check(d[::3], full[::3], f"{path}:{d.name} [::3]")
                check(d[-1], full[-1], f"{path}:{d.name} [-1]")
                picks = [d.shape[0] - 1, 0, 2, 2]
                check(d[picks], full[picks], f"{path}:{d.name} list")
                if kind == "rows":
                    check(d[1:, 2], full[1:, 2], f"{path}:{d.name} column")
                    check(d[:, [4, 0]], full[:, [4, 0]], f"{path}:{d.name} column list")
                    mask = np.arange(5) % 2 == 0
                    check(d[2, mask], full[2, mask], f"{path}:{d.name} mask")
        for key in ("f4", "compound"):
            d = f[f"tiles/{key}"]
            want = expected_tiles(d.name, d.shape, d.dtype, writers)
            check(d[...], want, f"{path}:{d.name}")
            check(d[1, :, ::2], want[1, :, ::2], f"{path}:{d.name} strided")
            check(d[..., 1:3], want[..., 1:3], f"{path}:{d.name} ellipsis")
        d = f["five/i2"]
        full = expected(d.name, d.shape, d.dtype)
        check(d[...], full, f"{path}:five")
        check(d[..., 0], full[..., 0], f"{path}:five ellipsis")
        check(f["empty/zero"][...], np.zeros((0, 4)), f"{path}:empty/zero")
        check(f["empty/unwritten"][...], np.zeros((3, 3), "i4"), f"{path}:empty/unwritten")
        for name in (k for k in f.keys() if k.startswith("append")):
            g = f[name]
            n = int(g.attrs["appenders"])
            check(g["x"][...], expected(f"/{name}/x", g["x"].shape, "f8"), f"{path}:{name}/x")
            check(g["grid"][...], expected(f"/{name}/grid", (n, 3), "u2"), f"{path}:{name}/grid")
        assert not f.problems, f.problems

total = comm.allreduce(checked)
if rank == 0:
    print(f"checked {total} selections")
