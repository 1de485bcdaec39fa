"""Exclusive writers inside one job (io/claim.py): a file open for writing cannot be opened for
writing again (FileBusyError on every rank) and the first session carries on and closes intact;
a reader opens and reads it meanwhile; the claim lasts exactly as long as the session (released
at close, after agreed errors, after abandon). Separate jobs racing: tests/test_claims.py."""

from __future__ import annotations

import os
import warnings
from pathlib import Path

import numpy as np
import pytest
from mpi4py import MPI
from ranks import on_root, raises_on_every_rank, same_on_every_rank

import h5subfile as hs


def block(comm: MPI.Comm, value: int) -> np.ndarray:
    return np.full(100, value * 100 + comm.rank, "i8")


def whole(comm: MPI.Comm, value: int) -> np.ndarray:
    return np.repeat(value * 100 + np.arange(comm.size, dtype="i8"), 100)


def claimed(comm: MPI.Comm, path: Path) -> bool:
    """Collective: whether the claim file beside ``path`` exists (looked at on rank 0)."""
    return same_on_every_rank(comm, on_root(comm, lambda: Path(f"{path}.lock").exists()))


def base_file(comm: MPI.Comm, folder: Path) -> Path:
    path = folder / "run.h5"
    with hs.File(path, "w", subfiles=2) as f:
        f.write_dataset("a", block(comm, 1))
    return path


@pytest.mark.parametrize(
    "outer, inner", [("a", "a"), ("w", "w"), ("a", "w"), ("w", "r+"), ("a", "w-")]
)
def test_nested_write_open_is_busy_and_the_first_session_closes_intact(
    comm: MPI.Comm, shared_tmp: Path, outer: str, inner: str
) -> None:
    path = base_file(comm, shared_tmp)
    with hs.File(path, outer, subfiles=2) as f:
        f.write_dataset("b", block(comm, 2))
        assert claimed(comm, path)
        with raises_on_every_rank(comm, hs.FileBusyError, "already open for writing", str(path)):
            hs.File(path, inner, subfiles=2)
        f.write_dataset("c", block(comm, 3))
        uuid = f.sessions[-1]["uuid"]
    assert not claimed(comm, path)
    with hs.File(path, "r") as f:
        assert f.problems == []
        assert [s["uuid"] for s in f.sessions][-1] == uuid
        expected = {"b": 2, "c": 3} if outer == "w" else {"a": 1, "b": 2, "c": 3}
        assert sorted(f.keys()) == sorted(expected)
        for name, value in expected.items():
            np.testing.assert_array_equal(f[name][...], whole(comm, value))


def test_reader_reads_the_committed_file_while_a_writer_holds_it(
    comm: MPI.Comm, shared_tmp: Path
) -> None:
    path = base_file(comm, shared_tmp)
    with hs.File(path, "a", subfiles=2) as writer:
        writer.write_dataset("b", block(comm, 2))
        with warnings.catch_warnings():
            warnings.simplefilter("error")  # a writer at work is not a problem of the file
            with hs.File(path, "r") as reader:
                assert reader.problems == []
                assert list(reader.keys()) == ["a"]
                np.testing.assert_array_equal(reader["a"][...], whole(comm, 1))
        # and a reader that stays open does not stop the writer from closing
        reader = hs.File(path, "r")
        writer.write_dataset("c", block(comm, 3))
    np.testing.assert_array_equal(reader["a"][...], whole(comm, 1))
    reader.close()
    with hs.File(path, "r") as f:
        assert sorted(f.keys()) == ["a", "b", "c"]


def test_a_first_write_in_progress_is_named_to_readers(comm: MPI.Comm, shared_tmp: Path) -> None:
    path = shared_tmp / "new.h5"
    owner = f"pid {comm.bcast(os.getpid())}"  # rank 0 holds the claim
    with hs.File(path, "w", subfiles=2) as writer:
        writer.write_dataset("a", block(comm, 1))
        with raises_on_every_rank(comm, hs.IncompleteFileError, "for the first time", owner):
            hs.File(path, "r")
    with hs.File(path, "r") as f:
        np.testing.assert_array_equal(f["a"][...], whole(comm, 1))


def test_claim_is_released_after_errors(comm: MPI.Comm, shared_tmp: Path) -> None:
    path = base_file(comm, shared_tmp)
    # an error agreed on every rank inside the session: the session closes, publishing
    with raises_on_every_rank(comm, hs.BlockError, "outside the shape"):
        with hs.File(path, "a", subfiles=2) as f:
            f.write_dataset("b", block(comm, 2))
            assert claimed(comm, path)
            f.create_dataset("bad", (10,), "f4", start=(5 + comm.rank,), count=(10,))
    assert not claimed(comm, path)
    # an open that fails after claiming (mode w- on an existing file)
    with raises_on_every_rank(comm, hs.FileExistsH5SubfileError, "exists"):
        hs.File(path, "w-")
    assert not claimed(comm, path)
    # the same error of the user's code on every rank: the file closes as h5py's __exit__
    # closes it, keeping what was written completely
    with pytest.raises(ZeroDivisionError):
        with hs.File(path, "a", subfiles=2) as f:
            f.write_dataset("kept", block(comm, 4))
            1 / 0  # noqa: B018
    assert not claimed(comm, path)
    # different errors on the ranks, not agreed: every rank abandons the session
    with pytest.raises(ValueError, match=f"rank {comm.rank} stops"):
        with hs.File(path, "a", subfiles=2) as f:
            f.write_dataset("lost", block(comm, 5))
            raise ValueError(f"rank {comm.rank} stops")
    assert not claimed(comm, path)
    with hs.File(path, "a", subfiles=2) as f:  # the next writer goes ahead
        f.write_dataset("c", block(comm, 3))
    with hs.File(path, "r") as f:
        assert sorted(f.keys()) == ["a", "b", "c", "kept"]
        np.testing.assert_array_equal(f["c"][...], whole(comm, 3))
