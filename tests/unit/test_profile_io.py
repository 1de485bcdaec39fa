"""RawFile's system calls recorded in a profile (docs/PROFILING.md): one operation per call,
with its offset and the bytes it returned; nothing recorded, and nothing changed, when off."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from h5subfile.errors import FileBusyError
from h5subfile.io.posix import IOStats, RawFile, block_size
from h5subfile.layout.names import claim_path
from h5subfile.profiler.counters import COUNTERS, Profile


def written(path: Path, stats: IOStats, transfer_size: int | None = None) -> None:
    """Three pieces (two neighbours, one after a hole) written, read back, synced."""
    data = np.arange(3 * 4096, dtype=np.uint8)
    view = memoryview(data)
    raw = RawFile(str(path), writable=True, stats=stats, create=True, transfer_size=transfer_size)
    raw.write_pieces([(0, view[:4096]), (4096, view[4096:8192]), (12288, view[8192:])])
    back = np.empty(4096, dtype=np.uint8)
    raw.pread_into(memoryview(back), 4096)
    raw.sync()
    raw.close()
    assert np.array_equal(back, data[4096:8192])


def test_raw_file_calls_are_recorded_as_darshan_counts_them(tmp_path: Path) -> None:
    stats = IOStats(profile=Profile(trace_limit=100))
    written(tmp_path / "f", stats, transfer_size=2048)  # 8 KiB in calls of at most 2 KiB
    assert stats.profile is not None
    rec = stats.profile.records[str(tmp_path / "f")]
    c = dict(zip(COUNTERS, rec.counters))
    assert c["POSIX_OPENS"] == 1
    assert c["POSIX_WRITES"] == stats.writes == 6  # 2 KiB each: 4 for the neighbours, 2 after
    assert c["POSIX_BYTES_WRITTEN"] == stats.bytes_written == 3 * 4096
    assert c["POSIX_CONSEC_WRITES"] == 4  # the first at 0 is neither; the one after the hole
    assert c["POSIX_SEQ_WRITES"] == 5  # is sequential only
    assert c["POSIX_SIZE_WRITE_1K_10K"] == 6
    assert c["POSIX_MAX_BYTE_WRITTEN"] == 4 * 4096 - 1
    assert (c["POSIX_READS"], c["POSIX_BYTES_READ"]) == (2, 4096)
    assert c["POSIX_FSYNCS"] == 1
    assert c["POSIX_FILE_ALIGNMENT"] == block_size(str(tmp_path / "f")) > 0
    assert c["POSIX_FILE_NOT_ALIGNED"] == (0 if c["POSIX_FILE_ALIGNMENT"] <= 2048 else 4)
    assert c["POSIX_MEM_NOT_ALIGNED"] == 0
    assert c["POSIX_RW_SWITCHES"] == 1
    trace = stats.profile.trace
    assert trace is not None and trace.dropped == 0
    assert [(e[1], e[2], e[3]) for e in trace.records][:2] == [
        ("write", 0, 2048),
        ("write", 2048, 2048),
    ]


def test_nothing_is_recorded_when_off(tmp_path: Path) -> None:
    stats = IOStats()
    written(tmp_path / "f", stats)
    assert stats.profile is None
    assert "profile" not in stats.as_dict()
    assert (stats.writes, stats.bytes_written) == (2, 3 * 4096)


SCRIPT = """
import sys
import numpy as np
from h5subfile.io.posix import IOStats, RawFile
from h5subfile.profiler.counters import COUNTERS, Profile
stats = IOStats(profile=Profile())
data = memoryview(np.arange(10000, dtype=np.uint8))
raw = RawFile(sys.argv[1], writable=True, stats=stats, create=True, transfer_size=3000)
raw.write_pieces([(0, data[:5000]), (7000, data[5000:])])
raw.pread_into(memoryview(np.empty(100, dtype=np.uint8)), 50)
raw.close()
c = dict(zip(COUNTERS, stats.profile.records[sys.argv[1]].counters))
print(c["POSIX_WRITES"], c["POSIX_BYTES_WRITTEN"], c["POSIX_READS"], c["POSIX_BYTES_READ"])
"""


@pytest.mark.skipif(shutil.which("strace") is None, reason="strace is not installed")
def test_counters_equal_the_system_calls_strace_sees(tmp_path: Path) -> None:
    target = str(tmp_path / "f")
    log = tmp_path / "trace"
    run = subprocess.run(
        ["strace", "-f", "-qq", "-e", "trace=pwritev,pwritev2,preadv,preadv2", "-o", str(log)]
        + [sys.executable, "-c", SCRIPT, target],
        capture_output=True,
        text=True,
        env=dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path)),
        check=True,
    )
    counted = [int(v) for v in run.stdout.split()]
    lines = [line for line in log.read_text().splitlines() if "pwritev" in line or "preadv" in line]
    writes = [int(line.rsplit("=", 1)[1]) for line in lines if "pwritev" in line]
    reads = [int(line.rsplit("=", 1)[1]) for line in lines if "preadv" in line]
    assert counted == [len(writes), sum(writes), len(reads), sum(reads)]
    assert counted == [4, 10000, 1, 100]


def test_hdf5_io_counted_through_the_log_driver_leaves_the_file_unchanged(tmp_path: Path) -> None:
    from h5subfile.io.h5 import collect_hdf5_logs, create_file

    data = np.arange(5000, dtype=np.float64)
    # HDF5 stamps the root group with the second it was made: both files in the same second.
    for _ in range(5):
        started = int(time.time())
        for name, profile in (("plain.h5", None), ("logged.h5", Profile())):
            with create_file(str(tmp_path / name), profile=profile) as h5:
                h5.create_dataset("x", data=data)
                h5.attrs["a"] = 1
        if int(time.time()) == started:
            break
        collect_hdf5_logs(profile)
    plain, logged = (tmp_path / "plain.h5").read_bytes(), (tmp_path / "logged.h5").read_bytes()
    assert plain == logged  # the same operations and the same file: only a log beside it
    assert profile is not None and len(profile.hdf5_logs) == 1
    log = profile.hdf5_logs[0][1]
    collect_hdf5_logs(profile)
    assert not os.path.exists(log) and profile.hdf5_logs == []
    c = dict(zip(COUNTERS, profile.records[str(tmp_path / "logged.h5")].counters))
    assert profile.unparsed == 0
    assert (c["POSIX_OPENS"], c["POSIX_STATS"]) == (1, 2)  # the driver's fstat, HDF5's lstat
    assert c["POSIX_WRITES"] >= 3  # superblock, raw data, metadata at close
    assert c["POSIX_MAX_BYTE_WRITTEN"] == len(logged) - 1
    assert c["POSIX_BYTES_WRITTEN"] >= len(logged) - 2048  # the metadata block's free space
    assert c["POSIX_SIZE_WRITE_10K_100K"] == 1  # the 40000 bytes of "x", in one write


def test_engine_phases_are_timed_only_in_profiled_sessions() -> None:
    from types import SimpleNamespace

    from h5subfile.engine.profiling import add_measured_phases, phase

    @phase("transfer")
    def work(session: SimpleNamespace, value: int) -> int:
        return value + 1

    plain = SimpleNamespace(stats=IOStats())
    assert work(plain, 1) == 2  # not profiled: nothing to time, nothing kept
    profiled = SimpleNamespace(stats=IOStats(profile=Profile(), exchange_seconds=0.5))
    profiled.stats.syncs, profiled.stats.sync_seconds = 3, 0.25
    assert work(profiled, 2) == 3 and work(profiled, 3) == 4
    from mpi4py import MPI

    add_measured_phases(profiled.stats.profile, profiled.stats, MPI.COMM_SELF, (0.0, 0))
    phases = profiled.stats.profile.phases.as_dict()
    assert phases["transfer"]["count"] == 2
    assert phases["exchange"] == {"seconds": 0.5, "count": 1}
    assert phases["fsync"] == {"seconds": 0.25, "count": 3}
    assert "compress" not in phases
    assert "wait" not in phases  # one process: no polled round ever waited


def test_fsync_by_name_is_recorded(tmp_path: Path) -> None:
    from h5subfile.io.posix import fsync_path

    (tmp_path / "f").write_bytes(b"x")
    profile = Profile()
    fsync_path(str(tmp_path / "f"), profile)
    fsync_path(str(tmp_path / "f"))  # not profiled: not recorded
    c = dict(zip(COUNTERS, profile.records[str(tmp_path / "f")].counters))
    assert (c["POSIX_OPENS"], c["POSIX_FSYNCS"], c["POSIX_WRITES"]) == (1, 1, 0)


def test_claim_file_and_probes_are_recorded(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The claim file's system calls (made under a unique name, then linked into place) and
    the open-time probes of subfiles are counted like RawFile's."""
    from h5subfile.io import claim
    from h5subfile.io.posix import probe_file

    # its record synced as on a file system other hosts read (on a local one it is not)
    monkeypatch.setattr(claim, "record_synced", lambda folder, mounts=None: True)
    profile = Profile()
    master = str(tmp_path / "run.h5")
    held = claim.take(master, "0123abcd" * 4, "w", profile)
    held.release()
    (made,) = [p for p in profile.records if "run.h5.lock" in p]
    c = dict(zip(COUNTERS, profile.records[made].counters))
    written = len(held.owner.to_bytes())
    assert (c["POSIX_OPENS"], c["POSIX_WRITES"], c["POSIX_FSYNCS"]) == (1, 1, 1)
    assert c["POSIX_BYTES_WRITTEN"] == written and c["POSIX_READS"] == 0
    # a writer finding a claim file reads it: its open, stat and read are counted
    Path(claim_path(master)).write_bytes(b"not a claim")
    second = Profile()
    with pytest.raises(FileBusyError, match="holds no complete record"):
        claim.take(master, "22222222" * 4, "w", second)
    looked = dict(zip(COUNTERS, second.records[claim_path(master)].counters))
    assert (looked["POSIX_OPENS"], looked["POSIX_STATS"], looked["POSIX_READS"]) == (1, 1, 1)
    assert looked["POSIX_BYTES_READ"] == len(b"not a claim")
    (tmp_path / "sub.h5").write_bytes(b"12345")
    probes = Profile()
    assert probe_file(str(tmp_path / "sub.h5"), probes) == (5, None)
    assert probe_file(str(tmp_path / "missing.h5"), probes)[0] is None  # a failed open: no record
    p = dict(zip(COUNTERS, probes.records[str(tmp_path / "sub.h5")].counters))
    assert (p["POSIX_OPENS"], p["POSIX_STATS"], p["POSIX_READS"]) == (1, 1, 0)
    assert list(probes.records) == [str(tmp_path / "sub.h5")]


def test_what_darshan_also_counts_for_hdf5_files_and_the_commit(tmp_path: Path) -> None:
    """As Darshan counted them on the same run: HDF5's open adds a stat of its own (an lstat of
    the path outside its driver), a file HDF5 creates has mode 0o666, one made by FileCalls
    with O_CREAT its own mode, and the master's rename is a rename source and target."""
    from h5subfile.io.h5 import HDF5_CREATE_MODE, collect_hdf5_logs, create_file
    from h5subfile.io.posix import FileCalls
    from h5subfile.profiler.reduction import record_id

    profile = Profile()
    path = str(tmp_path / "made.h5")
    create_file(path, 0, 0, profile).close()
    collect_hdf5_logs(profile)
    c = dict(zip(COUNTERS, profile.records[path].counters))
    assert c["POSIX_MODE"] == HDF5_CREATE_MODE and c["POSIX_STATS"] == 2  # fstat and lstat
    calls = FileCalls(profile)
    fd = calls.open(str(tmp_path / "own"), os.O_CREAT | os.O_WRONLY, 0o640)
    calls.close(fd)
    assert (
        dict(zip(COUNTERS, profile.records[str(tmp_path / "own")].counters))["POSIX_MODE"] == 0o640
    )
    source, target = profile.record(path), profile.record(str(tmp_path / "final.h5"))
    source.record_rename_to(target, int(record_id(path), 16))
    s, t = (dict(zip(COUNTERS, r.counters)) for r in (source, target))
    assert s["POSIX_RENAME_SOURCES"] == 1 and t["POSIX_RENAME_TARGETS"] == 1
    assert t["POSIX_RENAMED_FROM"] == int(record_id(path), 16)


def test_small_datasets_leave_the_same_file_with_or_without_the_log_driver(
    tmp_path: Path,
) -> None:
    """The layout of a subfile (an early-allocated 128-byte identity, then small datasets, in
    64 KiB metadata blocks, 4 KiB aligned): byte for byte the same through the log driver.
    With HDF5's small-data aggregation on, the profiled file ended 1920 bytes longer (the log
    driver keeps the unused end of the last small-data block).

    The root group's header holds the second it was created in, so two files made across a
    second boundary differ there: the pair is made again (at most three times) until both
    fall in one second; a difference of layout shows in every pair."""
    from h5subfile.io.h5 import META_BLOCK_SIZE, _hdf5_library, collect_hdf5_logs, create_file

    if _hdf5_library() is None:
        pytest.skip("HDF5's library is not reachable here (no /proc/self/maps)")
    for _ in range(3):
        profile = Profile()
        for name, prof in (("plain.h5", None), ("logged.h5", profile)):
            with create_file(str(tmp_path / name), 4096, META_BLOCK_SIZE, prof) as h5:
                h5.create_dataset("identity", data=np.zeros(128, np.uint8))
                for i in range(16):
                    h5.create_dataset(f"x{i}", data=np.full(1024, i, np.float32))
        collect_hdf5_logs(profile)
        if (tmp_path / "plain.h5").read_bytes() == (tmp_path / "logged.h5").read_bytes():
            break
    assert (tmp_path / "plain.h5").read_bytes() == (tmp_path / "logged.h5").read_bytes()
