"""Check every file of a folder with plain h5py only (h5subfile is never imported)."""

import glob
import sys

import h5py
import numpy as np

sys.path.insert(0, sys.argv[2])
from common import DTYPES, expected, expected_tiles, same  # noqa: E402

count = 0
for path in sorted(glob.glob(f"{sys.argv[1]}/*.h5")):
    with h5py.File(path, "r") as f:
        writers = int(f.attrs["writers"])
        for key, dt in DTYPES.items():
            for kind in ("prefix", "rows"):
                d = f[f"{kind}/{key}"]
                assert same(d[...], expected(d.name, d.shape, np.dtype(dt))), (path, d.name)
                count += 1
        for key in ("f4", "compound"):
            d = f[f"tiles/{key}"]
            want = expected_tiles(d.name, d.shape, d.dtype, writers)
            assert same(d[...], want), (path, d.name)
            count += 1
        d = f["five/i2"]
        assert same(d[...], expected(d.name, d.shape, d.dtype)), path
        assert f["empty/zero"].shape == (0, 4)
        for name in (k for k in f if k.startswith("append")):
            assert same(f[name]["x"][...], expected(f"/{name}/x", f[name]["x"].shape, "f8"))
            count += 1
assert "h5subfile" not in sys.modules
assert count, f"no *.h5 in {sys.argv[1]}"
print(f"plain h5py checked {count} datasets")
