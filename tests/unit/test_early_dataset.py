"""``io/h5.create_early_dataset``: a dataset whose storage HDF5 found among space freed
earlier in the session is filled at once (zeros, or its fill value), and the bytes the ranks
then write directly at its offset are what every reader gets after the file closes. (HDF5
kept such a fill in its sieve buffer and wrote it out at close, over the data: plain h5py
read zeros where the ranks had written.)"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest

from conftest import run_python
from h5subfile.io.h5 import create_file
from h5subfile.io.objects import Groups, create_early_dataset

READ = """
import sys, h5py
with h5py.File(sys.argv[1], "r") as f:
    print(f["b"][...].tobytes().hex())
"""
MINUS_ONE = np.float64(-1.0).tobytes()


def _pwrite(path: Path, data: bytes, offset: int) -> None:
    """Write as a rank writes: directly, at a dataset's offset."""
    fd = os.open(path, os.O_WRONLY)
    try:
        os.pwrite(fd, data, offset)
    finally:
        os.close(fd)


def _with_freed_space(path: Path) -> Groups:
    """A new file where a dataset of 800 bytes, written with 0xAB bytes, was unlinked between
    two others: its storage is free for the next dataset of that size."""
    groups = Groups(create_file(str(path)), keep_made=True)  # as the master's
    _pwrite(path, b"\xab" * 800, create_early_dataset(groups, "/a", (100,), np.dtype("<f8")))
    create_early_dataset(groups, "/c", (100,), np.dtype("<f8"))
    groups.forget("/a")  # its identifier closed, so that HDF5 frees its storage
    del groups.h5["a"]
    return groups


def _new_in_freed_space(groups: Groups, fill: bytes | None) -> int:
    end = groups.h5.id.get_filesize()
    offset = create_early_dataset(groups, "/b", (100,), np.dtype("<f8"), fill)
    assert offset < end, "HDF5 did not reuse the freed space: the test tests nothing"
    return offset


@pytest.mark.parametrize("fill", [None, MINUS_ONE], ids=["zeros", "fill-value"])
def test_data_written_directly_survives_the_fill(tmp_path: Path, fill: bytes | None) -> None:
    path = tmp_path / "m.h5"
    groups = _with_freed_space(path)
    offset = _new_in_freed_space(groups, fill)
    data = np.arange(100, dtype="<f8") + 0.5
    _pwrite(path, data.tobytes(), offset)
    groups.h5.close()
    assert run_python(READ, str(path)).stdout.strip() == data.tobytes().hex()


@pytest.mark.parametrize("fill", [None, MINUS_ONE], ids=["zeros", "fill-value"])
def test_what_nobody_writes_reads_as_the_fill(tmp_path: Path, fill: bytes | None) -> None:
    """Not the bytes the freed space held before."""
    path = tmp_path / "m.h5"
    groups = _with_freed_space(path)
    _new_in_freed_space(groups, fill)
    groups.h5.close()
    want = np.full(100, -1.0 if fill else 0.0)
    assert run_python(READ, str(path)).stdout.strip() == want.tobytes().hex()
