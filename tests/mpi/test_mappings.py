"""The master's VDS mappings for every way a program writes a dataset (docs/FORMAT.md,
*Mappings by write pattern*): written by 4 ranks in 2 subfiles (ranks 0-1 and 2-3), each
dataset has the number of mappings FORMAT.md gives, counted by plain h5py in a separate
process, which also reads every value back bit for bit; h5subfile verifies and reads the file
with every rank count of the suite."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from ranks import plain_h5py

import h5subfile as hs

WRITERS, SUBFILES = 4, 2
NAME = "mappings/patterns.h5"
#: Each pattern's mappings at 4 ranks in 2 subfiles: one per subfile, the pieces of its two
#: ranks merged, except the time series: one per subfile for each of its 4 segments (rows
#: [0, 1), [1, 2), [2, 4) and [4, 8) of the capacity, doubled as it grew to 5 rows).
MAPPINGS = {
    "declared": 2,
    "slabs": 2,
    "tiles": 2,
    "rows_at_once": 2,
    "rows_one_by_one": 2,
    "columns": 2,
    "series": 8,
    "compressed": 2,
}

COUNT = """
import sys, json, h5py
with h5py.File(sys.argv[1], "r") as f:
    print(json.dumps([json.loads(f.attrs["h5subfile"])["format"],
                      {name: [len(f[name].virtual_sources()), f[name][...].tobytes().hex()]
                       for name in f}]))
"""


def expected(name: str) -> np.ndarray:
    """What ``name`` holds once the 4 writers are done: each element says who wrote it."""
    if name in ("declared", "slabs", "compressed"):
        return np.arange(16 * WRITERS, dtype="f8") + 1000 * (np.arange(16 * WRITERS) // 16)
    if name == "tiles":
        rows, cols = np.indices((16, 16))
        return (rows // 8 * 2 + cols // 8) * 1000.0 + rows * 16 + cols
    if name in ("rows_at_once", "rows_one_by_one"):
        return np.repeat(np.arange(8 * WRITERS) % WRITERS * 1000.0, 3).reshape(-1, 3) + np.arange(3)
    if name == "columns":
        return np.tile(np.arange(4 * WRITERS) % WRITERS * 1000.0, (4, 1)) + np.arange(4)[:, None]
    assert name == "series"
    return np.arange(5)[:, None] * 10.0 + np.arange(4 * WRITERS) // 4 * 1000


def write(f: hs.File, rank: int) -> None:
    """Every pattern, as rank ``rank`` of the 4 writes it."""
    mine = slice(16 * rank, 16 * rank + 16)
    f.create_dataset("declared", (16 * WRITERS,), "f8", block=(mine,))[mine] = expected("declared")[
        mine
    ]
    f.create_dataset("slabs", (16 * WRITERS,), "f8")[mine] = expected("slabs")[mine]
    i, j = divmod(rank, 2)
    tile = (slice(8 * i, 8 * i + 8), slice(8 * j, 8 * j + 8))
    f.create_dataset("tiles", (16, 16), "f8")[tile] = expected("tiles")[tile]
    rows = f.create_dataset("rows_at_once", (8 * WRITERS, 3), "f8")
    rows[rank::WRITERS] = expected("rows_at_once")[rank::WRITERS]
    rows = f.create_dataset("rows_one_by_one", (8 * WRITERS, 3), "f8")
    for k in range(rank, 8 * WRITERS, WRITERS):
        rows[k] = expected("rows_one_by_one")[k]
    columns = f.create_dataset("columns", (4, 4 * WRITERS), "f8")
    columns[:, rank::WRITERS] = expected("columns")[:, rank::WRITERS]
    series = f.create_dataset("series", (0, 4 * WRITERS), "f8", maxshape=(None, 4 * WRITERS))
    for step in range(5):
        series.resize(step + 1, axis=0)
        series[step, 4 * rank : 4 * rank + 4] = expected("series")[step, 4 * rank : 4 * rank + 4]
    compressed = f.create_dataset(
        "compressed", (16 * WRITERS,), "f8", chunks=(16,), compression="gzip"
    )
    with compressed.collective:
        compressed[mine] = expected("compressed")[mine]


def test_write(comm, subfolder) -> None:
    if comm.size != WRITERS:
        pytest.skip(f"written by {WRITERS} ranks")
    path = subfolder("mappings") / "patterns.h5"
    with hs.File(path, "w", subfiles=SUBFILES) as f:
        write(f, comm.rank)
    form, found = json.loads(plain_h5py(comm, COUNT, str(path)))
    assert form == 6  # merged mappings: a reader of format 5 would refuse them as damaged
    assert {name: count for name, (count, _) in found.items()} == MAPPINGS
    for name, (_, values) in found.items():
        assert values == expected(name).tobytes().hex(), name
    with hs.File(path, "r", verify=True) as f:
        assert not f.problems


def test_read_back(comm, data_dir: Path, need) -> None:
    """At every rank count: verified, and each rank's share of every dataset, and the whole of
    it, as written (each piece checked as it is read)."""
    path = need(data_dir / NAME, "written by test_write at 4 ranks")
    with hs.File(path, "r", verify=True) as f:
        assert not f.problems
        for name in MAPPINGS:
            want = expected(name)
            part = slice(
                comm.rank * len(want) // comm.size, (comm.rank + 1) * len(want) // comm.size
            )
            np.testing.assert_array_equal(f[name][part], want[part], err_msg=name)
            np.testing.assert_array_equal(f[name][...], want, err_msg=name)  # slabs placed whole
