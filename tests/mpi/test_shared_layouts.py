"""Layouts too large to broadcast at open (layout/sharing.py): rank 0 keeps them, a collective
read sends each rank only the extents its selection touches (with their subfiles' identities),
and a rank reading alone reads the record itself, checked against what rank 0 read. The limit
is lowered with ``H5SUBFILE_BROADCAST_EXTENTS`` so that a few ranks' files exceed it (2 and 3
ranks in the suite)."""

from __future__ import annotations

from pathlib import Path

import h5py
import numpy as np
import pytest
from ranks import on_root, raises_on_every_rank

import h5subfile as hs


def values(first: int, n: int, salt: int) -> np.ndarray:
    return (np.arange(first, first + n, dtype=np.int64) * 7919 + salt).astype("f8")


@pytest.fixture
def fpp(comm, shared_tmp: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Path, int]:
    """A file per process of uneven blocks ("x", "y"), opened with a limit of 1 extent."""
    path = shared_tmp / "fpp.h5"
    n = 40 + 9 * comm.rank
    first = comm.exscan(n) or 0
    with hs.File(path, "w", subfiles="rank") as f:
        f.write_datasets({"x": values(first, n, 1), "y": values(first, n, 2)})
    monkeypatch.setenv("H5SUBFILE_BROADCAST_EXTENTS", "1")
    return path, comm.allreduce(n)


def held(dataset: hs.Dataset) -> bool:
    """Whether this rank holds the dataset's whole layout (not a test of the API: the node)."""
    return "layout" in dataset._info().__dict__


def test_collective_reads_are_sent_only_their_extents(comm, fpp) -> None:
    path, total = fpp
    whole = values(0, total, 1)
    with hs.File(path, "r") as f:
        x = f["x"]
        assert x._info().withheld or comm.size == 1
        part = x.read_partition()
        lo = comm.rank * (total // comm.size)
        assert part.tobytes() == whole[lo : lo + part.size].tobytes()
        for selection in (np.s_[comm.rank :: 5], np.s_[total - 3 :], np.s_[7:8], np.s_[0:0]):
            got = x.read_collective(selection)
            assert got.tobytes() == whole[selection].tobytes(), selection
        with x.collective:
            assert x[3:90].tobytes() == whole[3:90].tobytes()
        assert held(x) == (comm.rank == 0)  # no rank but 0 was sent the whole layout
        assert comm.allreduce(part.size) == total


def test_a_rank_reading_alone_reads_the_record_itself(comm, fpp) -> None:
    path, total = fpp
    with hs.File(path, "r") as f:
        y = f["y"]
        if comm.rank == comm.size - 1:
            assert y[5 : total - 5].tobytes() == values(0, total, 2)[5 : total - 5].tobytes()
            assert held(y) and len(y.layout.extents) == comm.size
        assert f.verify()["clean"]


def test_a_record_changed_after_opening_is_refused(comm, fpp) -> None:
    path, _ = fpp

    def change() -> None:
        with h5py.File(path, "r+", locking=False) as h5:
            attrs = h5["y"].attrs
            text = attrs["h5subfile.layout"]
            attrs["h5subfile.layout"] = (text.decode() if isinstance(text, bytes) else text) + " "

    with hs.File(path, "r") as f:
        on_root(comm, change)
        error = None
        if comm.rank == comm.size - 1 and comm.size > 1:
            with pytest.raises(hs.CorruptFileError, match="not the one read when the file was"):
                f["y"][0:3]
        comm.allgather(error)


def test_swapped_subfiles_are_found_through_the_identities_sent(
    comm, shared_tmp: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    if comm.size < 3:
        pytest.skip("two subfiles to swap that rank 0 does not read")
    path = shared_tmp / "even.h5"  # blocks of one size: the scan's size check sees nothing
    with hs.File(path, "w", subfiles="rank") as f:
        f.write_dataset("x", values(40 * comm.rank, 40, 3))
    monkeypatch.setenv("H5SUBFILE_BROADCAST_EXTENTS", "1")

    def swap() -> None:
        # Rank 0's subfile is left alone: only the identities sent to the others can tell.
        first, second = sorted(path.with_suffix(".subfiles").glob("*.h5"))[-2:]
        temporary = first.with_suffix(".tmp")
        first.rename(temporary)
        second.rename(first)
        temporary.rename(second)

    on_root(comm, swap)
    with hs.File(path, "r") as f:
        with raises_on_every_rank(comm, hs.SubfileMismatchError, "is not the one its master"):
            f["x"].read_partition()


def test_a_reader_opened_before_an_append_reads_on_alone(comm, fpp) -> None:
    """The file's record gains a session; the sessions the reader knew are unchanged."""
    path, total = fpp
    with hs.File(path, "r") as reader:
        with hs.File(path, "a", subfiles="rank") as writer:
            writer.write_dataset("z", values(comm.rank, 1, 4))
        if comm.rank == comm.size - 1:
            assert reader["x"][2:-2].tobytes() == values(0, total, 1)[2:-2].tobytes()
            assert "z" not in reader
