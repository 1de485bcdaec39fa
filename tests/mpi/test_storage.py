"""Chunked and compressed datasets, two-phase aggregation and alignment: write with this job's
rank count (4 writers in the suite: every filter, chunk shapes aligned to the blocks and
straddling them, partial edge chunks, N-D tiles), then read back bit for bit, independently and
collectively, with other rank counts (1, 3 and 5 readers in the suite). The files live in
``--mpi-data``/storage.
"""

from __future__ import annotations

from pathlib import Path

import hdf5plugin
import numpy as np
import pytest
from common import COMPOUND, expected, tile_block

import h5subfile as hs
from h5subfile.layout.selection import partition

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
GROUPINGS = ("1", "2", "rank")  # one file (chunks in the master), 2 subfiles, file per process
#: Every aggregator count: 1-4 with one subfile of 4 ranks, 1-2 with 2 subfiles of 2 ranks; small
#: buffers (several rounds), alignment on.
AGGREGATED = [
    (grouping, count) for grouping, n in (("1", 4), ("2", 2)) for count in range(1, n + 1)
]
ALIGNMENT = 4096


def aggregated_name(grouping: str, count: int) -> str:
    return f"aggregated-{grouping}-{count}"


@pytest.fixture(scope="module")
def storage(subfolder) -> Path:
    return subfolder("storage")


def length(r: int, size: int) -> int:
    """Uneven 1-D lengths (rank 1 empty when there are more than 2 ranks)."""
    return 0 if (r == 1 and size > 2) else 1000 + 37 * r


def rows(r: int) -> int:
    return 11 + 3 * r


def write(comm, folder: Path, grouping: str, plan: dict) -> None:
    rank, size = comm.rank, comm.size
    kwargs = dict(subfiles=int(grouping) if grouping.isdigit() else grouping, **plan)
    with hs.File(folder / f"storage_{grouping}.h5", "w", **kwargs) as f:
        start = sum(length(r, size) for r in range(rank))
        mine = length(rank, size)
        n = sum(length(r, size) for r in range(size))
        for name, storage in FILTERS.items():
            dtype = "f4" if name != "lz4" else "i8"
            full = expected(f"/one/{name}", (n,), np.dtype(dtype))
            f.require_group("one").write_dataset(name, full[start : start + mine], **storage)
        # Straddling chunks: 64 does not divide the ranks' offsets; 5 x 3 chunks of a 2-D array
        # leave partial chunks at the edges.
        full = expected("/straddle", (n,), np.dtype("f8"))
        f.write_dataset("straddle", full[start : start + mine], chunks=(64,), compression="gzip")
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
        block = tuple(slice(c, c + k) for c, k in zip(corner, count))
        f.write_dataset("tiles", full[block], start=corner, chunks=(3, 2, 3), compression="blosc")
        # Contiguous data written through the same plan (aggregated when the plan says so),
        # several datasets at once, and a collective partial write.
        arrays = {
            f"c{i}": expected(f"/contig/c{i}", (n,), np.dtype("f4"))[start : start + mine]
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
        # Read back in the same session (chunks written by other ranks' leaders): each rank
        # holds only its own extent of the layout, so whole reads are collective (rank 0, which
        # holds every extent, reads alone too); every rank reads its own part alone.
        want = expected("/straddle", (n,), np.dtype("f8"))
        own = f["straddle"][start : start + mine]
        assert np.array_equal(own, want[start : start + mine]), "same-session read of own part"
        if f["straddle"]._session.catalog.nodes["/straddle"].local_view and rank != 0:
            with pytest.raises(hs.FileModeError, match="reaches beyond"):
                f["straddle"][...]
        with f["straddle"].collective:
            got = f["straddle"][...]
        assert np.array_equal(got, want), "same-session read of straddle"
        assert np.array_equal(f["straddle"][...], want), "after a collective read, any read"


def read(comm, path: Path, plan: dict) -> None:
    rank, size = comm.rank, comm.size
    with hs.File(path, "r", **plan) as f:
        for name in FILTERS:
            d = f["one"][name]
            want = expected(d.name, d.shape, d.dtype)
            assert np.array_equal(d[...], want), d.name
            lo, hi = partition(d.shape[0], size, rank)
            assert np.array_equal(d.read_partition(), want[lo:hi]), d.name
            assert np.array_equal(d[5::7], want[5::7]), d.name
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
            assert got.dtype == want.dtype and np.array_equal(got, want), name
            with d.collective:
                part = d[rank % d.shape[0] :]
            assert np.array_equal(part, want[rank % d.shape[0] :]), (name, "collective")
        for i in range(3):
            d = f[f"contig/c{i}"]
            want = expected(d.name, d.shape, d.dtype)
            with d.collective:
                got = d[rank:]
            assert np.array_equal(got, want[rank:]), d.name
        d = f["pieces"]
        assert np.array_equal(d[...], expected("/pieces", d.shape, d.dtype))


@pytest.mark.parametrize("grouping", GROUPINGS)
def test_write(comm, storage: Path, grouping: str) -> None:
    write(comm, storage, grouping, {})


@pytest.mark.parametrize("grouping, count", AGGREGATED, ids=lambda v: str(v))
def test_write_aggregated(comm, subfolder, grouping: str, count: int) -> None:
    if count > comm.size // int(grouping):
        pytest.skip(f"{count} aggregators need {count * int(grouping)} ranks")
    folder = subfolder(f"storage/{aggregated_name(grouping, count)}")
    plan = {"aggregators": count, "buffer_size": 4096, "alignment": ALIGNMENT}
    write(comm, folder, grouping, plan)


@pytest.mark.parametrize("grouping", GROUPINGS)
def test_every_filter_and_chunk_shape_reads_back(comm, storage: Path, need, grouping: str) -> None:
    read(comm, need(storage / f"storage_{grouping}.h5", "written by test_write"), {})


@pytest.mark.parametrize("grouping", GROUPINGS)
def test_two_phase_reads(comm, storage: Path, need, grouping: str) -> None:
    if comm.size < 2:
        pytest.skip("2 read aggregators need 2 ranks")
    plan = {"aggregators": 2, "buffer_size": 4096}
    read(comm, need(storage / f"storage_{grouping}.h5", "written by test_write"), plan)


@pytest.mark.parametrize("grouping, count", AGGREGATED, ids=lambda v: str(v))
def test_every_aggregator_count_writes_the_same_bytes(
    comm, storage: Path, need, grouping: str, count: int
) -> None:
    path = storage / aggregated_name(grouping, count) / f"storage_{grouping}.h5"
    read(
        comm,
        need(path, "written by test_write_aggregated"),
        {"aggregators": 1, "buffer_size": 8192},
    )
