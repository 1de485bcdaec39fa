"""Round trips: write one file per grouping with this job's rank count (1-4 writers in the suite),
append from another rank count with both commit strategies, and read every file back bit for bit
(1-5 readers in the suite). The files live in ``--mpi-data``/matrix, so that each job reads what
the others wrote.

Written: every dtype, 1-D prefix-sum blocks (uneven, one empty), 2-D row blocks, 3-D tiles that do
not coalesce, 5-D corner blocks, zero-size and never-written datasets, attributes. Read: full
reads, BD-CATS partitions, strided, integer, list and mask selections.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from common import (
    DTYPES,
    GROUPINGS,
    expected,
    expected_tiles,
    groupings_for,
    prefix_length,
    rows_block,
    same,
    tile_block,
)

import h5subfile as hs
from h5subfile.layout.selection import partition

#: A restarted job on another rank count appends a group: (job size, writer counts of the files
#: it appends to, grouping, H5SUBFILE_MASTER_COPY_LIMIT).
APPENDS = {
    "replace": (3, (2, 4), "2", None),  # the atomic commit (copy + rename)
    "in-place": (2, (1, 3), "rank", "0"),  # used for masters that hold a lot of raw data
}
FILES = [f"w{writers}_{label}" for writers in (1, 2, 3, 4) for label in groupings_for(writers)]


@pytest.fixture(scope="module")
def matrix(subfolder) -> Path:
    return subfolder("matrix")


@pytest.mark.parametrize("label", GROUPINGS)
def test_write(comm, matrix: Path, label: str, monkeypatch: pytest.MonkeyPatch) -> None:
    if label not in groupings_for(comm.size):
        pytest.skip(f"{label}: needs more ranks")
    monkeypatch.setenv("H5SUBFILE_RANKS_PER_NODE", "2")  # "node": fake nodes of 2 ranks
    rank, size = comm.rank, comm.size
    with hs.File(matrix / f"w{size}_{label}.h5", "w", **GROUPINGS[label]) as f:
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


@pytest.mark.parametrize("commit", APPENDS)
def test_append_from_another_rank_count(
    comm, matrix: Path, need, commit: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    ranks, writers, grouping, copy_limit = APPENDS[commit]
    if comm.size != ranks:
        pytest.skip(f"the {commit} append runs on {ranks} ranks")
    if copy_limit is not None:
        monkeypatch.setenv("H5SUBFILE_MASTER_COPY_LIMIT", copy_limit)
    targets = [
        need(matrix / f"w{w}_{label}.h5", f"written by the {w}-rank job")
        for w in writers
        for label in groupings_for(w)
    ]
    rank, size = comm.rank, comm.size
    kwargs = {"subfiles": int(grouping) if grouping.isdigit() else grouping}
    for path in targets:
        with hs.File(path, "a", **kwargs) as f:
            name = f"append{len(f.sessions)}"
            total = sum(prefix_length(r) for r in range(size))
            first = sum(prefix_length(r) for r in range(rank))
            full = expected(f"/{name}/x", (total,), "f8")
            g = f.create_group(name)
            g.attrs["appenders"] = size
            g.write_dataset("x", full[first : first + prefix_length(rank)])
            grid = expected(f"/{name}/grid", (size, 3), "u2")
            g.write_dataset("grid", grid[rank : rank + 1], start=(rank, 0))


def check(got, want, what: str) -> None:
    assert same(np.asarray(got), np.asarray(want)), f"{what}: got {got!r}, expected {want!r}"


@pytest.mark.parametrize("name", FILES)
def test_read_back_bit_for_bit(comm, matrix: Path, need, name: str) -> None:
    path = need(matrix / f"{name}.h5", "written by the jobs of the suite")
    with hs.File(path, "r") as f:
        writers = int(f.attrs["writers"])
        check(f.attrs["text"], "hello", "attrs text")
        check(f.attrs["vector"], np.arange(3.0), "attrs vector")
        check(f.attrs["int16"], np.int16(-5), "attrs int16")
        check(f.attrs["records"], np.zeros(2, DTYPES["compound"]), "attrs compound")
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
                assert d.dtype == np.dtype(dt), (d.name, d.dtype, dt)
                check(d[...], full, f"{d.name} full")
                lo, hi = partition(d.shape[0], comm.size, comm.rank)
                check(d.read_partition(), full[lo:hi], f"{d.name} partition")
                check(d[::3], full[::3], f"{d.name} [::3]")
                check(d[-1], full[-1], f"{d.name} [-1]")
                picks = [d.shape[0] - 1, 0, 2, 2]
                check(d[picks], full[picks], f"{d.name} list")
                if kind == "rows":
                    check(d[1:, 2], full[1:, 2], f"{d.name} column")
                    check(d[:, [4, 0]], full[:, [4, 0]], f"{d.name} column list")
                    mask = np.arange(5) % 2 == 0
                    check(d[2, mask], full[2, mask], f"{d.name} mask")
        for key in ("f4", "compound"):
            d = f[f"tiles/{key}"]
            want = expected_tiles(d.name, d.shape, d.dtype, writers)
            check(d[...], want, d.name)
            check(d[1, :, ::2], want[1, :, ::2], f"{d.name} strided")
            check(d[..., 1:3], want[..., 1:3], f"{d.name} ellipsis")
        d = f["five/i2"]
        full = expected(d.name, d.shape, d.dtype)
        check(d[...], full, "five")
        check(d[..., 0], full[..., 0], "five ellipsis")
        check(f["empty/zero"][...], np.zeros((0, 4)), "empty/zero")
        check(f["empty/unwritten"][...], np.zeros((3, 3), "i4"), "empty/unwritten")
        for group in (k for k in f.keys() if k.startswith("append")):
            g = f[group]
            n = int(g.attrs["appenders"])
            check(g["x"][...], expected(f"/{group}/x", g["x"].shape, "f8"), f"{group}/x")
            check(g["grid"][...], expected(f"/{group}/grid", (n, 3), "u2"), f"{group}/grid")
        assert not f.problems, f.problems
