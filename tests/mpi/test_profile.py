"""Profiled sessions (docs/PROFILING.md): ``File(..., profile=DIR)`` writes the job's profile
at close; its counters hold every byte the session's RawFile calls moved, plus HDF5's own I/O
(through the log driver); a file every rank opened has a shared record; profiling changes no
value written. Any rank count (2 and 3 in the suite)."""

from __future__ import annotations

import json
import time
from pathlib import Path

import numpy as np
from mpi4py import MPI

import h5subfile as hs
from h5subfile.profiler.counters import COUNTERS, FCOUNTERS


def _write(path: Path, rank: int, profile: Path | None) -> dict[str, float]:
    data = np.arange(1000, dtype="f8") + 1000 * rank  # the VPIC pattern: rank r after r-1
    with hs.File(path, "w", subfiles=1, profile=profile) as f:
        f.write_dataset("x", data)
        f.write_dataset("y", np.full((rank + 1) * 100, rank, dtype="i4"))
        f.flush()  # small writes are combined: written by the next collective call at the latest
        return f.stats.as_dict()


def test_profiled_write_counts_every_rank_s_bytes(comm: MPI.Intracomm, shared_tmp: Path) -> None:
    rank, size = comm.rank, comm.size
    folder = shared_tmp / "profile"
    _write(shared_tmp / "plain.h5", rank, None)
    stats = _write(shared_tmp / "run.h5", rank, folder)
    doc = json.loads((folder / "run.h5.write.json").read_text())
    assert doc["format"] == "h5subfile-profile" and doc["nprocs"] == size
    mine = doc["ranks"][rank]
    assert mine["rank"] == rank and mine["unparsed"] == 0
    # every RawFile byte is counted; HDF5's own writes add to the ranks that created files
    assert mine["bytes_written"] >= stats["bytes_written"] == 8000 + 4 * 100 * (rank + 1)
    assert mine["writes"] >= stats["writes"] > 0
    writes = comm.allgather(stats["bytes_written"])
    shared = [r for r in doc["records"] if r["rank"] == -1]
    assert shared, "the file every rank wrote has no shared record"
    record = max(shared, key=lambda r: r["counters"]["POSIX_BYTES_WRITTEN"])
    assert record["counters"]["POSIX_BYTES_WRITTEN"] >= sum(writes)
    assert record["counters"]["POSIX_OPENS"] >= size
    assert list(record["counters"]) == list(COUNTERS)
    assert list(record["fcounters"]) == list(FCOUNTERS)
    assert 0 <= record["counters"]["POSIX_FASTEST_RANK"] < size
    # every collective call (open excepted) is one agreement round; waiting is timed
    phases = mine["phases"]
    calls = 2 + 1  # two write_dataset calls and the close
    assert phases["agree"]["count"] >= calls and phases["agree"]["seconds"] > 0, phases
    text = (folder / "run.h5.write.txt").read_text()
    assert "\nPOSIX\t-1\t" in text and "#<module>\t<rank>\t<record id>" in text
    with hs.File(shared_tmp / "plain.h5", "r") as plain, hs.File(shared_tmp / "run.h5", "r") as run:
        for name in ("x", "y"):  # profiling changed no value
            assert np.array_equal(plain[name][...], run[name][...])


def test_profiled_read_is_written_at_a_collective_close(
    comm: MPI.Intracomm, shared_tmp: Path
) -> None:
    folder = shared_tmp / "profile"
    _write(shared_tmp / "run.h5", comm.rank, None)
    with hs.File(shared_tmp / "run.h5", "r", profile=folder) as f:
        x = f["x"][...]
        read = f.stats.bytes_read
    assert x.shape == (1000 * comm.size,)
    doc = json.loads((folder / "run.h5.read.json").read_text())
    mine = doc["ranks"][comm.rank]
    assert mine["bytes_read"] >= read > 0
    assert doc["totals"]["bytes_read"] >= sum(comm.allgather(read))
    assert doc["totals"]["bytes_written"] == 0


def test_waiting_for_a_late_rank_is_the_wait_phase(comm: MPI.Intracomm, shared_tmp: Path) -> None:
    """Rank 1 arrives 0.3 s late at a write: every other rank's profile shows that time as
    waiting (in the polled agreement round), rank 1's does not."""
    folder = shared_tmp / "late"
    with hs.File(shared_tmp / "late.h5", "w", profile=folder) as f:
        if comm.rank == 1:
            time.sleep(0.3)
        f.write_dataset("x", np.arange(10, dtype="i4"))
    ranks = json.loads((folder / "late.h5.write.json").read_text())["ranks"]
    waited = [r["phases"].get("wait", {"seconds": 0.0})["seconds"] for r in ranks]
    for rank, seconds in enumerate(waited):
        if rank != 1:
            assert seconds >= 0.25, waited
    assert waited[1] < 0.25, waited
