"""Parallel h5py programs as their users write them (h5py's mpio driver, global shapes,
hyperslab writes), one file each, and what numpy says every file must hold.

    mpiexec -n N python h5py_mpio.py OUT            # with a parallel h5py
    mpiexec -n N h5subfile run h5py_mpio.py OUT     # unmodified, served by h5subfile
    python h5py_mpio.py --check OUT N               # plain h5py: each file, bit for bit

The programs: h5py's documentation example; the collective I/O example (rows split over the
ranks, written once collectively and once independently, and once compressed); one dataset per rank written in row
slabs, with scalar metadata written by the root (a CFD code's writer); a 2-D domain split into
uneven tiles; round-robin rows, element by element; a time series grown step by step; a rank
writing its part twice; a fill value; every rank reading the others' data after a flush;
every rank reading back at once what it wrote (strided rows, a dataset made from data=), with
fill values where nobody wrote (a compressed dataset's partly written chunks, a scalar).
"""

from __future__ import annotations

import os
import sys

import h5py
import numpy as np


def values(shape: tuple[int, ...], seed: int, dtype: str = "f8") -> np.ndarray:
    """Deterministic content of a dataset (every rank computes the same)."""
    n = int(np.prod(shape))
    return ((np.arange(n, dtype=np.int64) * 7919 + seed) % 100_003).astype(dtype).reshape(shape)


def split(n: int, parts: int, index: int) -> tuple[int, int]:
    """Uneven split of n into parts: the first n % parts get one more."""
    base, extra = divmod(n, parts)
    start = index * base + min(index, extra)
    return start, start + base + (1 if index < extra else 0)


def documentation_example(path: str, comm) -> None:
    rank = comm.rank
    f = h5py.File(path, "w", driver="mpio", comm=comm)
    dset = f.create_dataset("test", (comm.size,), dtype="i")
    dset[rank] = rank
    f.close()


def collective_io(path: str, comm) -> None:
    length_x, length_y = 10 * comm.size + 3, 6
    full = values((length_x, length_y), 1)
    start, end = split(length_x, comm.size, comm.rank)
    with h5py.File(path, "w", driver="mpio", comm=comm) as f:
        f.atomic = False
        dset = f.create_dataset("collective", (length_x, length_y), dtype="f8")
        with dset.collective:
            dset[start:end, :] = full[start:end]
        other = f.create_dataset("independent", (length_x, length_y), dtype="f8")
        other[start:end, :] = full[start:end]
        packed = f.create_dataset(
            "compressed", (length_x, length_y), dtype="f8", chunks=(5, length_y), compression="gzip"
        )
        with packed.collective:  # filters need collective writes in parallel HDF5
            packed[start:end, :] = full[start:end]


def per_rank_datasets(path: str, comm) -> None:
    with h5py.File(path, "w", driver="mpio", comm=comm) as f:
        for r in range(comm.size):
            f.create_dataset(f"rank_{r:04d}", (5 + 3 * r, 4), dtype="f4")
        f.create_dataset("nprocs", (), dtype="i8")
        f.create_dataset("time", (1,), dtype="f8")
        mine = f[f"rank_{comm.rank:04d}"]
        data = values(mine.shape, 100 + comm.rank, "f4")
        for row in range(0, mine.shape[0], 2):  # row slabs of at most 2 rows
            mine[row : row + 2] = data[row : row + 2]
        if comm.rank == 0:
            f["nprocs"].write_direct(np.array(comm.size, dtype="i8"))
            f["time"].write_direct(np.array([0.25]), np.s_[0:1], np.s_[0:1])
        f.attrs["code"] = "cfd"


def tiles(path: str, comm) -> None:
    ny, nx = 17, 13
    py = 2 if comm.size % 2 == 0 else 1
    px = comm.size // py
    full = values((ny, nx), 2, "i4")
    y0, y1 = split(ny, py, comm.rank // px)
    x0, x1 = split(nx, px, comm.rank % px)
    with h5py.File(path, "w", driver="mpio", comm=comm) as f:
        dset = f.create_dataset("field", (ny, nx), dtype="i4")
        with dset.collective:
            dset[y0:y1, x0:x1] = full[y0:y1, x0:x1]
        dset.attrs["tiles"] = (py, px)


def round_robin(path: str, comm) -> None:
    d1, d2 = 8, 5
    with h5py.File(path, "w", driver="mpio", comm=comm) as f:
        dset = f.create_dataset("dset", (d1, d2), dtype="i")
        dset.attrs["Units"] = "Images per second"
        for i in range(comm.rank, d1, comm.size):
            for j in range(d2):
                dset[i, j] = i * d2 + j + 1
        rows = f.create_dataset("rows", (4 * comm.size + 1, 3), dtype="f8")
        full = values(rows.shape, 3)
        for i in range(comm.rank, rows.shape[0], comm.size):
            rows[i, :] = full[i]


def time_series(path: str, comm) -> None:
    n, steps = 4, 7
    with h5py.File(path, "w", driver="mpio", comm=comm) as f:
        series = f.create_dataset(
            "series",
            (0, n * comm.size),
            maxshape=(None, n * comm.size),
            dtype="f4",
            chunks=(1, n * comm.size),
        )
        for t in range(steps):
            series.resize(t + 1, axis=0)
            series[t, comm.rank * n : (comm.rank + 1) * n] = t * 1000 + comm.rank * n + np.arange(n)
        f.create_dataset("steps", data=np.arange(steps))


def overwrite(path: str, comm) -> None:
    with h5py.File(path, "w", driver="mpio", comm=comm) as f:
        dset = f.create_dataset("x", (6 * comm.size,), dtype="i8")
        mine = slice(6 * comm.rank, 6 * comm.rank + 6)
        dset[mine] = -1
        dset[mine] = np.arange(6) + 10 * comm.rank
        dset[6 * comm.rank + 2] = 99


def fill_value(path: str, comm) -> None:
    with h5py.File(path, "w", driver="mpio", comm=comm) as f:
        dset = f.create_dataset("sparse", (3 * comm.size,), dtype="i4", fillvalue=-5)
        dset[3 * comm.rank] = comm.rank


def read_after_flush(path: str, comm) -> None:
    with h5py.File(path, "w", driver="mpio", comm=comm) as f:
        dset = f.create_dataset("shared", (comm.size, 3), dtype="f8")
        full = values(dset.shape, 4)
        dset[comm.rank] = full[comm.rank]
        f.flush()
        comm.Barrier()
        assert np.array_equal(dset[...], full), "a rank read other ranks' data wrong"


def reading_back(path: str, comm) -> None:
    rank, size = comm.rank, comm.size
    with h5py.File(path, "w", driver="mpio", comm=comm) as f:
        rows = f.create_dataset("strided", (3 * size, 2), dtype="i4")
        mine = values((3, 2), 10 + rank, "i4")
        rows[rank::size] = mine
        assert np.array_equal(rows[rank::size], mine), "a rank read its strided rows wrong"
        table = f.create_dataset("table", (2, 3), data=np.arange(6))  # fills the shape
        assert np.array_equal(table[...], np.arange(6).reshape(2, 3)), "data= read back wrong"
        packed = f.create_dataset(
            "packed", (4 * size + 2,), dtype="i4", chunks=(4,), compression="gzip", fillvalue=-7
        )
        with packed.collective:  # each rank 3 elements of its chunk; the rest never written
            packed[4 * rank : 4 * rank + 3] = values((3,), 20 + rank, "i4")
        f.create_dataset("unset", (), dtype="f8", fillvalue=5.0)


PROGRAMS = (
    documentation_example,
    collective_io,
    per_rank_datasets,
    tiles,
    round_robin,
    time_series,
    overwrite,
    fill_value,
    read_after_flush,
    reading_back,
)


def expected(size: int) -> dict[str, dict[str, np.ndarray]]:
    """What numpy says each file holds, by file and dataset, for ``size`` ranks."""
    ny, nx = 17, 13
    series = np.zeros((7, 4 * size), "f4")
    for t in range(7):
        series[t] = t * 1000 + np.arange(4 * size)
    over = np.concatenate([np.arange(6) + 10 * r for r in range(size)]).astype("i8")
    over[6 * np.arange(size) + 2] = 99
    sparse = np.full(3 * size, -5, "i4")
    sparse[3 * np.arange(size)] = np.arange(size)
    strided = np.zeros((3 * size, 2), "i4")
    packed = np.full(4 * size + 2, -7, "i4")
    for r in range(size):
        strided[r::size] = values((3, 2), 10 + r, "i4")
        packed[4 * r : 4 * r + 3] = values((3,), 20 + r, "i4")
    return {
        "documentation_example": {"test": np.arange(size, dtype="i4")},
        "collective_io": {
            "collective": values((10 * size + 3, 6), 1),
            "independent": values((10 * size + 3, 6), 1),
            "compressed": values((10 * size + 3, 6), 1),
        },
        "per_rank_datasets": {
            **{f"rank_{r:04d}": values((5 + 3 * r, 4), 100 + r, "f4") for r in range(size)},
            "nprocs": np.array(size, "i8"),
            "time": np.array([0.25]),
        },
        "tiles": {"field": values((ny, nx), 2, "i4")},
        "round_robin": {
            "dset": (np.arange(40, dtype="i4") + 1).reshape(8, 5),
            "rows": values((4 * size + 1, 3), 3),
        },
        "time_series": {"series": series, "steps": np.arange(7)},
        "overwrite": {"x": over},
        "fill_value": {"sparse": sparse},
        "read_after_flush": {"shared": values((size, 3), 4)},
        "reading_back": {
            "strided": strided,
            "table": np.arange(6).reshape(2, 3),
            "packed": packed,
            "unset": np.array(5.0),
        },
    }


def check(folder: str, size: int) -> None:
    """Every file, every dataset, bit for bit (shape, dtype, bytes), with plain h5py."""
    for name, datasets in expected(size).items():
        with h5py.File(os.path.join(folder, f"{name}.h5"), "r") as f:
            assert sorted(k for k in f if isinstance(f[k], h5py.Dataset)) == sorted(datasets), (
                name,
                list(f),
            )
            for key, want in datasets.items():
                got = f[key][()]
                assert got.shape == want.shape and got.dtype == want.dtype, (
                    name,
                    key,
                    got.dtype,
                    want.dtype,
                )
                assert got.tobytes() == want.tobytes(), (name, key, got, want)
    print(f"checked {len(expected(size))} files")


def main(argv: list[str]) -> None:
    if argv[1] == "--check":
        check(argv[2], int(argv[3]))
        return
    from mpi4py import MPI

    comm = MPI.COMM_WORLD
    folder = argv[1]
    for program in PROGRAMS:
        program(os.path.join(folder, f"{program.__name__}.h5"), comm)


if __name__ == "__main__":
    main(sys.argv)
