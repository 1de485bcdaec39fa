"""What the multi-rank round-trip tests write and check: datasets whose every value is a known
function of (name, shape, dtype), written with many decompositions, so that any reader can verify
them; and a file written by plain h5py."""

from __future__ import annotations

import hashlib
import math

import numpy as np

COMPOUND = np.dtype([("a", "<i4"), ("b", "<f8"), ("c", "S3")])
DTYPES = {
    "i1": "i1",
    "i2": "i2",
    "i4": "i4",
    "i8": "i8",
    "u1": "u1",
    "u2": "u2",
    "u4": "u4",
    "u8": "u8",
    "f2": "f2",
    "f4": "f4",
    "f8": "f8",
    "be_f8": ">f8",
    "g": "g",
    "c8": "c8",
    "c16": "c16",
    "bool": "?",
    "S7": "S7",
    "compound": COMPOUND,
}

# writer-count -> groupings: (file name, File keyword arguments, extra environment)
GROUPINGS = {
    "single": dict(subfiles=1),
    "two": dict(subfiles=2),
    "rank": dict(subfiles="rank"),
    "node": dict(subfiles="node"),  # with H5SUBFILE_RANKS_PER_NODE=2 set by the test
    "k3": dict(ranks_per_subfile=3),
}


def groupings_for(writers: int) -> dict[str, dict]:
    return {k: v for k, v in GROUPINGS.items() if not (k == "two" and writers < 2)}


def expected(name: str, shape: tuple[int, ...], dtype: np.dtype) -> np.ndarray:
    """The full content of dataset ``name`` (deterministic, different for every name)."""
    dtype = np.dtype(dtype)
    seed = int(hashlib.sha1(name.encode()).hexdigest()[:8], 16)
    n = math.prod(shape)
    base = (np.arange(n, dtype=np.int64) * 7919 + seed) % 1_000_003
    if dtype.fields is not None:
        out = np.zeros(n, dtype=dtype)
        out["a"] = base - 500_000
        out["b"] = base / 7.0
        out["c"] = np.char.mod("%03d", base % 1000).astype("S3")
        return out.reshape(shape)
    if dtype.kind == "b":
        return (base % 3 == 0).reshape(shape)
    if dtype.kind == "S":
        return np.char.mod("v%06d", base).astype(dtype).reshape(shape)
    if dtype.kind == "c":
        return (base + 1j * (base % 97)).astype(dtype).reshape(shape)
    if dtype.kind == "f":
        return ((base % 60000) / 3.0).astype(dtype).reshape(shape)
    span = 1 << (8 * dtype.itemsize)
    values = base % span if dtype.itemsize < 8 else base * 2_654_435_761
    if dtype.kind == "i" and dtype.itemsize < 8:
        values = values - span // 2
    return values.astype(dtype).reshape(shape)


def prefix_length(rank: int) -> int:
    """Uneven 1-D lengths, with rank 1 empty."""
    return 0 if rank == 1 else 3 + 5 * rank


def rows_block(rank: int, size: int, rows: int) -> tuple[tuple[int, int], tuple[int, int]]:
    """Uneven row blocks of a (rows, 5) array."""
    cuts = [rows * r * r // (size * size) for r in range(size + 1)]
    return (cuts[rank], 0), (cuts[rank + 1] - cuts[rank], 5)


def tile_block(rank: int, size: int) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """A 3-D array (4, 6, 2*size) cut along axis 2 and axis 1: blocks that do not coalesce."""
    return (0, 3 * (rank % 2), 2 * rank), (4, 3, 2)


def expected_tiles(name: str, shape: tuple[int, ...], dtype: np.dtype, writers: int) -> np.ndarray:
    """A tiles dataset: each writer's tile holds ``expected`` values, the rest is fill (zeros)."""
    want = np.zeros(shape, dtype)
    full = expected(name, shape, dtype)
    for rank in range(writers):
        start, count = tile_block(rank, writers)
        box = tuple(slice(s, s + c) for s, c in zip(start, count))
        want[box] = full[box]
    return want


def same(a: np.ndarray, b: np.ndarray) -> bool:
    """Bit-for-bit equality (also for NaN and -0.0)."""
    a, b = np.ascontiguousarray(a), np.ascontiguousarray(b)
    if a.dtype != b.dtype or a.shape != b.shape:
        return False
    if a.dtype.kind == "f" and a.dtype.itemsize > 8:  # x86 long double: 6 bytes of padding
        return bool(np.array_equal(a, b, equal_nan=True))
    return a.tobytes() == b.tobytes()


def write_plain(path: str) -> None:
    """A file written by plain h5py (not h5subfile), laid out like h5bench's VPIC-IO, with
    chunked/compressed, compact, scalar and variable-length datasets too."""
    import h5py

    with h5py.File(path, "w") as f:
        f.attrs["creator"] = "plain h5py"
        for step in range(2):
            g = f.create_group(f"Timestep_{step}")
            for name in ("x", "y", "z", "px", "py", "pz", "id_1", "id_2"):
                dtype = "i4" if name == "id_1" else "f4"
                g.create_dataset(name, data=np.arange(1001, dtype=dtype))
        f.create_dataset(
            "chunked",
            data=np.arange(200).reshape(20, 10),
            chunks=(4, 5),
            compression="gzip",
            shuffle=True,
        )
        dcpl = h5py.h5p.create(h5py.h5p.DATASET_CREATE)
        dcpl.set_layout(h5py.h5d.COMPACT)
        space = h5py.h5s.create_simple((5,))
        h5py.h5d.create(f.id, b"compact", h5py.h5t.STD_I16LE, space, dcpl=dcpl)
        f["compact"][...] = np.arange(5, dtype="i2")
        f["scalar"] = 42.5
        f["strings"] = np.array(["a", "bc"], dtype=h5py.string_dtype())
