"""Sizes and rank counts the paper's prototype could not handle: a > 2 GiB region written and read
by one rank (Linux moves at most ~2 GiB per system call), and many ranks (32, oversubscribed, in
the suite) with subfiling factor 8. Files go to ``--mpi-data``, where the suite checks them with
plain h5py."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from mpi4py import MPI

import h5subfile as hs

BIG = int(2.1 * 2**30)


def test_one_rank_writes_and_reads_more_than_2_gib(comm, data_dir: Path) -> None:
    if comm.size != 1:
        pytest.skip("one rank's block: run on 1 rank")
    n = BIG // 8
    data = np.arange(n, dtype=np.uint64)
    data *= np.uint64(0x9E3779B97F4A7C15)  # every 8-byte word differs: offset errors cannot hide
    with hs.File(data_dir / "big.h5", "w", comm=MPI.COMM_SELF) as f:
        f.write_dataset("block", data)
        written = f.stats.bytes_written
    assert written == data.nbytes
    with hs.File(data_dir / "big.h5", "r", comm=MPI.COMM_SELF) as f:
        back = f["block"][...]
        assert back.shape == data.shape and np.array_equal(back, data)
        tail = f["block"][n - 3 :]
        assert np.array_equal(tail, data[n - 3 :])


def test_many_ranks_with_subfiling_factor_8(comm, data_dir: Path) -> None:
    rank, size = comm.rank, comm.size
    path = data_dir / "many.h5"
    n = 1000 + rank  # uneven
    first = comm.exscan(n) or 0
    with hs.File(path, "w", ranks_per_subfile=8) as f:
        f.write_datasets(
            {
                "x": np.arange(first, first + n, dtype="f8"),
                "id": np.arange(first, first + n, dtype="i8"),
            }
        )
        assert f.grouping.ngroups == -(-size // 8)
    total = comm.allreduce(n)
    with hs.File(path, "r") as f:
        part = f["x"].read_partition()
        strided = f["id"][::97]
    assert comm.allreduce(part.size) == total  # collectives first: then any rank may fail alone
    lo = rank * (total // size)
    assert np.array_equal(part, np.arange(lo, lo + part.size, dtype="f8"))
    assert np.array_equal(strided, np.arange(0, total, 97))
