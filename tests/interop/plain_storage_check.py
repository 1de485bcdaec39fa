"""Check the chunked and compressed files of a folder with plain h5py + hdf5plugin only."""

import glob
import sys

import h5py
import hdf5plugin  # noqa: F401 - registers the zstd, lz4, blosc, blosc2, bitshuffle filters
import numpy as np

sys.path.insert(0, sys.argv[2])
from common import COMPOUND, expected, tile_block  # noqa: E402

count = 0
for path in sorted(glob.glob(f"{sys.argv[1]}/storage_*.h5")):
    with h5py.File(path, "r") as f:
        for name, d in f["one"].items():
            assert np.array_equal(d[...], expected(d.name, d.shape, d.dtype)), (path, name)
            count += 1
        for name, dtype in (("straddle", "f8"), ("rows", "i4"), ("compound", COMPOUND)):
            d = f[name]
            assert np.array_equal(d[...], expected(d.name, d.shape, np.dtype(dtype))), path
            count += 1
        d = f["tiles"]
        want = expected(d.name, d.shape, np.dtype("u2"))
        mask = np.zeros(d.shape, bool)
        for r in range(d.shape[2] // 2):
            corner, shape = tile_block(r, d.shape[2] // 2)
            mask[tuple(slice(c, c + k) for c, k in zip(corner, shape))] = True
        assert np.array_equal(d[...], np.where(mask, want, 0)), path
        count += 1
assert count, f"no storage_*.h5 in {sys.argv[1]}"
print(f"plain h5py checked {count}")
