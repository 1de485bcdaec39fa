"""The benchmark's MPI-IO backend opens its file with the hints from --hint and from
IOR_HINT__MPI__ variables: MPI_File_get_info reports them on every rank."""

from __future__ import annotations

from pathlib import Path

import pytest

from h5subfile.bench.backends import MPIIOBackend
from h5subfile.bench.options import BenchOptions, parse_hints


def test_mpiio_hints_reach_the_file(
    comm, shared_tmp: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("IOR_HINT__MPI__romio_ds_write", "disable")
    hints = parse_hints(["cb_buffer_size=8388608", "romio_cb_write=enable"])
    options = BenchOptions(api="mpiio", test_file=str(shared_tmp / "h.dat"), hints=hints)
    backend = MPIIOBackend(options, comm)
    backend.open(True, comm.rank)
    effective = backend.effective_hints()
    backend.close()
    assert effective["cb_buffer_size"] == "8388608"
    assert effective["romio_cb_write"] == "enable"
    assert effective["romio_ds_write"] == "disable"
