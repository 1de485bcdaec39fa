"""Compare two HDF5 files with plain h5py + hdf5plugin only (h5subfile is never imported):
the same groups, datasets (dtype, shape, every byte) and attributes (value and type), the
attributes h5subfile keeps for itself aside. ``--conventional``: no dataset of the second
file is virtual. Usage: repack_check.py A B [--conventional]"""

import sys

import h5py
import hdf5plugin  # noqa: F401 - registers the zstd, lz4, blosc... filters
import numpy as np


def objects(f):
    found = {"/": f}
    f.visititems(lambda name, obj: found.setdefault("/" + name, obj) and None)
    return found


def attributes(obj):
    return {k: obj.attrs[k] for k in obj.attrs if not k.startswith("h5subfile")}


def same(a, b):
    a, b = np.asarray(a), np.asarray(b)
    if a.dtype != b.dtype or a.shape != b.shape:
        return False
    if a.dtype.kind == "O":
        return a.tolist() == b.tolist()
    return a.tobytes() == b.tobytes()


first, second = sys.argv[1], sys.argv[2]
with h5py.File(first, "r") as a, h5py.File(second, "r") as b:
    left, right = objects(a), objects(b)
    assert left.keys() == right.keys(), sorted(left.keys() ^ right.keys())
    datasets = 0
    for path, obj in left.items():
        other = right[path]
        assert type(obj) is type(other), path
        want, got = attributes(obj), attributes(other)
        assert want.keys() == got.keys(), (path, sorted(want.keys() ^ got.keys()))
        for name, value in want.items():
            assert same(value, got[name]), (path, name, value, got[name])
        if isinstance(obj, h5py.Dataset):
            assert same(obj[()], other[()]), path
            if "--conventional" in sys.argv:
                assert not other.is_virtual, f"{path} is virtual in {second}"
            datasets += 1
assert "h5subfile" not in sys.modules
print(f"same: {len(left)} objects, {datasets} datasets")
