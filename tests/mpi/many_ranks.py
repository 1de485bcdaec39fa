"""Many ranks, cheaply: a plain script (no pytest on every rank), run by tests/test_scale.py.

``write FOLDER``: every rank writes a few uneven, tiny blocks of two datasets into
``FOLDER/fpp.h5`` (file per process) and ``FOLDER/k16.h5`` (16 ranks per subfile, with a 2-D
dataset declared by start/count too). ``read FOLDER WRITERS``: any other rank count reads both back (each rank
its BD-CATS share, rank 0 everything and a strided selection) and compares bit for bit. Every
value is a known function of its global index, so no rank needs another's data to check it.
A failed check raises on that rank, and ``python -m mpi4py`` aborts the job with an error.
"""

import time

STARTED = time.time()  # before the imports, which dominate the start of a many-rank job

import sys  # noqa: E402
from pathlib import Path  # noqa: E402

import numpy as np  # noqa: E402
from mpi4py import MPI  # noqa: E402

import h5subfile as hs  # noqa: E402

PLANS = {"fpp.h5": dict(subfiles="rank"), "k16.h5": dict(ranks_per_subfile=16)}
GRIDDED = ("k16.h5",)  # only one file: file per process at many ranks costs most per dataset
COLUMNS = 3  # of the 2-D dataset: rank r's block is rows [r*2, r*2+2) (two rows per rank)


def count(rank: int) -> int:
    return 2 + rank % 5  # uneven: 2..6 values per rank


def words(first: int, n: int) -> np.ndarray:
    """Global indices [first, first+n) hashed: every 8-byte word differs, so a value in the
    wrong place cannot match."""
    return np.arange(first, first + n, dtype=np.uint64) * np.uint64(0x9E3779B97F4A7C15)


def grid(rows: slice) -> np.ndarray:
    index = np.arange(rows.start * COLUMNS, rows.stop * COLUMNS, dtype=np.int64)
    return (index * 7 + 1).astype("i4").reshape(-1, COLUMNS)


def write(folder: Path) -> dict[str, float]:
    """Collective: write both files; the seconds each took (max over ranks, on rank 0)."""
    comm = MPI.COMM_WORLD
    n, first = count(comm.rank), sum(count(r) for r in range(comm.rank))
    seconds = {}
    for name, plan in PLANS.items():
        comm.Barrier()
        started = time.perf_counter()
        with hs.File(folder / name, "w", **plan) as f:
            step = f.create_group("Timestep_0")
            step.write_datasets({"u": words(first, n), "f": words(first, n).view("f8")})
            if name in GRIDDED:
                g = f.create_dataset(
                    "grid", (2 * comm.size, COLUMNS), "i4", start=(2 * comm.rank, 0), count=(2, 3)
                )
                g.write(grid(slice(2 * comm.rank, 2 * comm.rank + 2)))
            f.attrs["writers"] = comm.size
            groups = f.grouping.ngroups
        seconds[name] = comm.reduce(time.perf_counter() - started, op=MPI.MAX) or 0.0
        expected = comm.size if plan.get("subfiles") == "rank" else -(-comm.size // 16)
        assert groups == expected, (name, groups, expected)
    return seconds


def read(folder: Path, writers: int) -> None:
    comm = MPI.COMM_WORLD
    total = sum(count(r) for r in range(writers))
    for name in PLANS:
        with hs.File(folder / name, "r") as f:
            assert int(f.attrs["writers"]) == writers
            u, x = f["Timestep_0/u"], f["Timestep_0/f"]
            assert u.shape == x.shape == (total,)
            part = u.read_partition()
            lo = comm.rank * (total // comm.size)
            assert np.array_equal(part, words(lo, part.size)), (name, comm.rank)
            shares = comm.allgather(part.size)
            assert sum(shares) == total
            if comm.rank == 0:
                assert np.array_equal(x[...].view("u8"), words(0, total)), name
                assert np.array_equal(u[3::97], words(0, total)[3::97]), name
            if name not in GRIDDED:
                continue
            g = f["grid"]
            assert g.shape == (2 * writers, COLUMNS)
            if comm.rank == 0:
                assert np.array_equal(g[...], grid(slice(0, 2 * writers))), name
            rows = slice(comm.rank, 2 * writers, comm.size)  # every reader a strided set of rows
            assert np.array_equal(g[rows], grid(slice(0, 2 * writers))[rows]), (name, comm.rank)


if __name__ == "__main__":
    world = MPI.COMM_WORLD
    imported = world.reduce(time.time() - STARTED, op=MPI.MAX)
    seconds = {}
    if sys.argv[1] == "write":
        seconds = write(Path(sys.argv[2]))
    else:
        read(Path(sys.argv[2]), int(sys.argv[3]))
    world.Barrier()
    if world.rank == 0:  # "ok P", then where the time went (for the test's log)
        print("ok", world.size)
        print(
            f"start and imports {imported:.1f} s", *(f"{k} {v:.1f} s" for k, v in seconds.items())
        )
