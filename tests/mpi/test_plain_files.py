"""Files written by anything else (here plain h5py, laid out like h5bench's VPIC-IO) are read
with any rank count (1 and 3 in the suite): contiguous datasets directly, chunked/compressed,
compact, scalar and variable-length ones through h5py."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from common import write_plain
from ranks import on_root

import h5subfile as hs


@pytest.fixture(scope="module")
def plain(comm, tmp_path_factory: pytest.TempPathFactory) -> Path:
    def make() -> str:
        path = tmp_path_factory.mktemp("plain") / "h5bench_like.h5"
        write_plain(str(path))
        return str(path)

    return Path(on_root(comm, make))


def test_plain_file_reads_with_this_rank_count(comm, plain: Path) -> None:
    with hs.File(plain, "r") as f:
        assert f.sessions == [] and not f.problems
        x = f["Timestep_0/x"]
        assert x.layout is not None and x.storage == "contiguous (plain HDF5)"
        n = x.shape[0]
        lo = comm.rank * (n // comm.size)
        part = x.read_partition()
        assert np.array_equal(part, np.arange(lo, lo + part.size, dtype="f4"))
        chunked = f["chunked"]
        assert chunked.layout is None and chunked.storage == "read through h5py"
        assert np.array_equal(chunked[3:7, ::2], np.arange(200).reshape(20, 10)[3:7, ::2])
        assert np.array_equal(chunked[[1, 5]], np.arange(200).reshape(20, 10)[[1, 5]])
        assert np.array_equal(f["compact"][...], np.arange(5, dtype="i2"))
        assert f["scalar"][()] == 42.5
        strings = [s.decode() if isinstance(s, bytes) else s for s in f["strings"][...]]
        assert strings == ["a", "bc"]
        assert f.attrs["creator"] == "plain h5py"
