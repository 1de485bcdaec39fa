"""dset[box] = data (independent pieces of a rank's block), read_direct and create_datasets: the
API the benchmark relies on. Any rank count from 2 (2, 3 and 4 in the suite)."""

from __future__ import annotations

import contextlib
import warnings
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pytest
from mpi4py import MPI
from ranks import on_root, raises_on_every_rank

import h5subfile as hs

pytestmark = pytest.mark.skipif(MPI.COMM_WORLD.size < 2, reason="2 subfiles need 2 ranks")


@dataclass
class Pieces:
    path: Path
    f: hs.File
    grid: hs.Dataset = field(repr=False)  # their repr raises once the file is closed
    line: hs.Dataset = field(repr=False)
    full: np.ndarray = field(repr=False)


@pytest.fixture(scope="module")
def pieces(comm, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Pieces]:
    rank, size = comm.rank, comm.size
    path = Path(on_root(comm, lambda: str(tmp_path_factory.mktemp("pieces") / "pieces.h5")))
    f = hs.File(path, "w", subfiles=2)
    grid, line = f.create_datasets(
        {
            "grid": dict(shape=(4 * size, 6), dtype="i4", start=(4 * rank, 0), count=(4, 6)),
            "line": dict(shape=(10 * size,), dtype="f8", start=(10 * rank,), count=(10,)),
        }
    )
    full = np.arange(4 * size * 6, dtype="i4").reshape(4 * size, 6)
    for row in (3, 0, 2, 1):  # pieces in any order
        grid[4 * rank + row, :] = full[4 * rank + row]
    line[10 * rank : 10 * rank + 4] = np.arange(4.0)  # only part of the block
    yield Pieces(path, f, grid, line, full)
    with contextlib.suppress(hs.IncompleteFileError):
        f.close()  # collective; does nothing once test_close_publishes_then_names_the_gaps ran


def test_write_outside_the_block_is_refused(comm, pieces: Pieces) -> None:
    other_row = (4 * comm.rank + 4) % (4 * comm.size)  # the first row of the next rank's block
    with pytest.raises(hs.SelectionError) as info:
        pieces.grid[other_row, :] = pieces.full[other_row]
    assert f"rank {comm.rank}" in str(info.value)
    assert "is not inside its block" in str(info.value)


def test_strided_write_is_refused(comm, pieces: Pieces) -> None:
    with pytest.raises(hs.SelectionError):
        pieces.grid[4 * comm.rank : 4 * comm.rank + 4 : 2, :] = pieces.full[:2]


def test_mis_shaped_piece_is_refused(comm, pieces: Pieces) -> None:
    with pytest.raises(hs.DataShapeError):
        pieces.line[10 * comm.rank : 10 * comm.rank + 3] = np.zeros(4)


def test_close_publishes_then_names_the_gaps(comm, pieces: Pieces) -> None:
    # every rank wrote only 4 of its 10 line elements
    ranks = f"rank{'s' if comm.size > 1 else ''} {', '.join(map(str, range(comm.size)))}"
    with raises_on_every_rank(comm, hs.IncompleteFileError, f"/line ({ranks})") as info:
        pieces.f.close()
    assert "/grid" not in str(info.value)


@pytest.fixture
def published(pieces: Pieces) -> Iterator[hs.File]:
    with warnings.catch_warnings():  # rank 0 warns that /line is incomplete
        warnings.filterwarnings("ignore", ".*was not completely written", RuntimeWarning)
        f = hs.File(pieces.path, "r")
    with f:
        yield f


def test_pieces_read_back(published: hs.File, pieces: Pieces) -> None:
    assert np.array_equal(published["grid"][...], pieces.full)


def test_read_direct(comm, published: hs.File, pieces: Pieces) -> None:
    buffer = np.empty((2, 6), "i4")
    published["grid"].read_direct(buffer, np.s_[1:3, :])
    assert np.array_equal(buffer, pieces.full[1:3])
    column = np.empty(4 * comm.size, "i4")
    published["grid"].read_direct(column, np.s_[:, 5])  # not a contiguous box: still right
    assert np.array_equal(column, pieces.full[:, 5])


def test_incomplete_dataset_refuses_to_be_read(comm, published: hs.File) -> None:
    with raises_on_every_rank(comm, hs.IncompleteFileError):
        published["line"][...]


def test_every_write_path_converts_alike(comm, shared_tmp) -> None:
    """One validation serves write(), dset[box] = x (independent and collective) and
    write_dataset: safe casts and Python values are converted on every path, lossy casts
    refused on every path (write() and dset[box] = x used to disagree)."""
    rank = comm.rank
    with hs.File(shared_tmp / "convert.h5", "w", subfiles=2) as f:
        names = ("whole", "pieces", "collective", "values")
        made = f.create_datasets(
            {
                n: dict(shape=(4 * comm.size,), dtype="i8", start=(4 * rank,), count=(4,))
                for n in names
            }
        )
        whole, pieces, collective, values = made
        mine = np.arange(4 * rank, 4 * rank + 4, dtype="i4")  # int32 into int64: safe
        whole.write(mine)
        pieces[4 * rank : 4 * rank + 2] = mine[:2]
        pieces[4 * rank + 2 : 4 * rank + 4] = mine[2:]
        with collective.collective:
            collective[4 * rank : 4 * rank + 4] = mine
        values[4 * rank : 4 * rank + 2] = [4 * rank, 4 * rank + 1]  # a list: the dataset's dtype
        values[4 * rank + 2 : 4 * rank + 4] = 7  # a scalar fills the selection
        lossy = np.zeros(4, "f8")
        with pytest.raises(hs.DataShapeError, match="float64.*int64.*astype"):
            pieces[4 * rank : 4 * rank + 4] = lossy
        with pytest.raises(hs.DataShapeError, match="float64.*int64.*astype"):
            pieces[4 * rank] = np.float64(1.5)  # a numpy scalar follows the rule for arrays
        with raises_on_every_rank(comm, hs.DataShapeError, "float64", "astype('int64')"):
            whole.write(lossy)
        with raises_on_every_rank(comm, hs.DataShapeError, "float64", "astype('int64')"):
            with collective.collective:
                collective[4 * rank : 4 * rank + 4] = lossy
    with hs.File(shared_tmp / "convert.h5", "r") as f:
        want = np.arange(4 * comm.size, dtype="i8")
        for name in ("whole", "pieces", "collective"):
            assert f[name].dtype == np.dtype("i8")
            assert np.array_equal(f[name][...], want), name
        got = f["values"][...].reshape(comm.size, 4)
        assert np.array_equal(got[:, :2], want.reshape(comm.size, 4)[:, :2])
        assert (got[:, 2:] == 7).all()
