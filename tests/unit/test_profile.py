"""The profiler's counters against Darshan's definitions on crafted operations
(docs/PROFILING.md): size buckets at their edges, consecutive against sequential, alignment,
timers without overlap, the bounded trace, phases, the reduction across ranks and the outputs."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from h5subfile.profiler.counters import (
    BUCKET_LIMITS,
    COUNTERS,
    FCOUNTERS,
    SIZE_BUCKETS,
    Phases,
    PosixRecord,
    Profile,
    Trace,
    replay_hdf5_log,
    size_bucket,
)
from h5subfile.profiler.reduction import (
    format_text,
    from_json,
    mount_of,
    parse_mounts,
    record_id,
    reduce_profiles,
    to_json,
)

KiB, MiB, GiB = 1 << 10, 1 << 20, 1 << 30


def counters(rec: PosixRecord) -> dict[str, int]:
    return dict(zip(COUNTERS, rec.counters))


def fcounters(rec: PosixRecord) -> dict[str, float]:
    return dict(zip(FCOUNTERS, rec.fcounters))


def opened(path: str = "/f", alignment: int = 0, origin: float = 0.0) -> PosixRecord:
    rec = PosixRecord(path, origin=origin)
    rec.record_open(origin, origin, alignment)
    return rec


# --- size buckets ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("length", "bucket"),
    [
        (0, "0_100"),
        (100, "0_100"),
        (101, "100_1K"),
        (KiB, "100_1K"),
        (KiB + 1, "1K_10K"),
        (10 * KiB, "1K_10K"),
        (10 * KiB + 1, "10K_100K"),
        (100 * KiB, "10K_100K"),
        (100 * KiB + 1, "100K_1M"),
        (MiB, "100K_1M"),
        (MiB + 1, "1M_4M"),
        (4 * MiB, "1M_4M"),
        (4 * MiB + 1, "4M_10M"),
        (10 * MiB, "4M_10M"),
        (10 * MiB + 1, "10M_100M"),
        (100 * MiB, "10M_100M"),
        (100 * MiB + 1, "100M_1G"),
        (GiB, "100M_1G"),
        (GiB + 1, "1G_PLUS"),
        (5 * GiB, "1G_PLUS"),
    ],
)
def test_size_buckets_have_inclusive_upper_bounds(length: int, bucket: str) -> None:
    assert SIZE_BUCKETS[size_bucket(length)] == bucket
    rec = opened()
    rec.record_write(0, length, 0.0, 0.0)
    rec.record_read(0, length, 0.0, 0.0)
    c = counters(rec)
    assert c[f"POSIX_SIZE_WRITE_{bucket}"] == 1
    assert c[f"POSIX_SIZE_READ_{bucket}"] == 1
    assert sum(c[f"POSIX_SIZE_WRITE_{b}"] for b in SIZE_BUCKETS) == 1


def test_every_bucket_edge() -> None:
    for i, limit in enumerate(BUCKET_LIMITS):
        assert size_bucket(limit) == i
        assert size_bucket(limit + 1) == i + 1


# --- consecutive and sequential -------------------------------------------------------------


def test_consecutive_and_sequential_writes_on_a_crafted_sequence() -> None:
    rec = opened()
    # (offset, length): first at 0 (neither: the last byte starts at 0), adjacent (both),
    # a hole (sequential only), backwards (neither), beyond the backwards one (sequential)
    for offset, length in [(0, 10), (10, 10), (30, 10), (5, 5), (40, 1)]:
        rec.record_write(offset, length, 0.0, 0.0)
    c = counters(rec)
    assert (c["POSIX_CONSEC_WRITES"], c["POSIX_SEQ_WRITES"]) == (1, 3)
    assert c["POSIX_WRITES"] == 5
    assert c["POSIX_BYTES_WRITTEN"] == 36
    assert c["POSIX_MAX_BYTE_WRITTEN"] == 40
    assert (c["POSIX_CONSEC_READS"], c["POSIX_SEQ_READS"], c["POSIX_READS"]) == (0, 0, 0)


def test_front_to_back_in_n_calls_has_n_minus_one_consecutive() -> None:
    rec = opened()
    for i in range(8):
        rec.record_read(i * 4096, 4096, 0.0, 0.0)
    c = counters(rec)
    assert (c["POSIX_CONSEC_READS"], c["POSIX_SEQ_READS"]) == (7, 7)
    assert c["POSIX_MAX_BYTE_READ"] == 8 * 4096 - 1


def test_first_access_at_offset_one_is_both_and_open_resets() -> None:
    rec = opened()
    rec.record_write(1, 10, 0.0, 0.0)
    assert (counters(rec)["POSIX_CONSEC_WRITES"], counters(rec)["POSIX_SEQ_WRITES"]) == (1, 1)
    rec.record_write(11, 10, 0.0, 0.0)  # adjacent: both again
    rec.record_open(0.0, 0.0)  # a new open resets the last byte to 0
    rec.record_write(21, 10, 0.0, 0.0)  # beyond 0 but not adjacent to it
    c = counters(rec)
    assert (c["POSIX_CONSEC_WRITES"], c["POSIX_SEQ_WRITES"], c["POSIX_OPENS"]) == (2, 3, 2)


def test_reads_and_writes_keep_their_own_last_byte_and_count_switches() -> None:
    rec = opened()
    rec.record_write(0, 100, 0.0, 0.0)
    rec.record_read(0, 50, 0.0, 0.0)  # reads start from 0: neither
    rec.record_write(100, 100, 0.0, 0.0)  # adjacent to the last write, not to the read
    rec.record_read(50, 50, 0.0, 0.0)  # adjacent to the last read
    c = counters(rec)
    assert (c["POSIX_CONSEC_WRITES"], c["POSIX_CONSEC_READS"]) == (1, 1)
    assert c["POSIX_RW_SWITCHES"] == 3


@given(st.lists(st.tuples(st.integers(0, 1 << 40), st.integers(0, 3 << 30)), max_size=40))
def test_invariants_on_any_writes(ops: list[tuple[int, int]]) -> None:
    rec = opened()
    for offset, length in ops:
        rec.record_write(offset, length, 0.0, 0.0)
    c = counters(rec)
    assert sum(c[f"POSIX_SIZE_WRITE_{b}"] for b in SIZE_BUCKETS) == c["POSIX_WRITES"] == len(ops)
    assert c["POSIX_CONSEC_WRITES"] <= c["POSIX_SEQ_WRITES"] <= len(ops)
    assert c["POSIX_BYTES_WRITTEN"] == sum(length for _, length in ops)
    assert c["POSIX_MAX_BYTE_WRITTEN"] == max([0] + [o + n - 1 for o, n in ops])


# --- alignment ------------------------------------------------------------------------------


def test_file_alignment_counts_offsets_not_multiple_of_the_block_size() -> None:
    rec = opened(alignment=4096)
    for offset in (0, 4096, 100, 8192 + 1):
        rec.record_write(offset, 10, 0.0, 0.0)
    rec.record_read(4095, 1, 0.0, 0.0)
    c = counters(rec)
    assert c["POSIX_FILE_ALIGNMENT"] == 4096
    assert c["POSIX_FILE_NOT_ALIGNED"] == 3


def test_unknown_file_alignment_counts_nothing() -> None:
    rec = opened(alignment=0)
    rec.record_write(3, 10, 0.0, 0.0)
    assert counters(rec)["POSIX_FILE_NOT_ALIGNED"] == 0


def test_memory_alignment_of_buffers() -> None:
    profile = Profile(clock=lambda: 0.0)
    buffer = np.zeros(256, dtype=np.uint8)
    assert buffer.ctypes.data % 8 == 0
    whole = memoryview(buffer)
    assert profile.aligned(whole[0:16], whole[64:128])
    assert not profile.aligned(whole[0:16], whole[3:20])  # one unaligned buffer is enough
    rec = profile.record("/f")
    rec.record_open(0.0, 0.0)
    rec.record_write(0, 16, 0.0, 0.0, aligned=profile.aligned(whole[1:17]))
    rec.record_write(16, 16, 0.0, 0.0, aligned=profile.aligned(whole[16:32]))
    c = counters(rec)
    assert (c["POSIX_MEM_NOT_ALIGNED"], c["POSIX_MEM_ALIGNMENT"]) == (1, 8)


# --- times ----------------------------------------------------------------------------------


def test_timers_do_not_count_overlap_and_fsync_is_write_time() -> None:
    rec = opened(origin=100.0)
    rec.record_write(0, 10, 101.0, 102.0)
    rec.record_write(10, 3 * MiB, 101.5, 104.0)  # overlaps the first: adds 102 -> 104 only
    rec.record_fsync(104.0, 104.5)
    rec.record_read(0, 10, 105.0, 105.25)
    rec.record_close(106.0, 106.5)
    f, c = fcounters(rec), counters(rec)
    assert f["POSIX_F_WRITE_TIME"] == pytest.approx(1.0 + 2.0 + 0.5)
    assert f["POSIX_F_READ_TIME"] == pytest.approx(0.25)
    assert f["POSIX_F_META_TIME"] == pytest.approx(0.5)  # the open took no time
    assert (f["POSIX_F_WRITE_START_TIMESTAMP"], f["POSIX_F_WRITE_END_TIMESTAMP"]) == (1.0, 4.0)
    assert (f["POSIX_F_CLOSE_START_TIMESTAMP"], f["POSIX_F_CLOSE_END_TIMESTAMP"]) == (6.0, 6.5)
    assert f["POSIX_F_MAX_WRITE_TIME"] == pytest.approx(2.5)
    assert c["POSIX_MAX_WRITE_TIME_SIZE"] == 3 * MiB
    assert c["POSIX_FSYNCS"] == 1
    assert c["POSIX_MMAPS"] == -1


# --- trace ----------------------------------------------------------------------------------


@pytest.mark.parametrize(("keep", "kept"), [("first", [0, 1, 2]), ("last", [2, 3, 4])])
def test_trace_is_bounded_and_counts_what_it_dropped(keep: str, kept: list[int]) -> None:
    profile = Profile(clock=lambda: 10.0, trace_limit=3, keep=keep)
    rec = profile.record("/f")
    rec.record_open(10.0, 10.0)
    for i in range(5):
        rec.record_write(i * 100, 100, 10.0 + i, 10.5 + i)
    assert profile.trace is not None
    assert profile.trace.dropped == 2
    assert [entry[2] // 100 for entry in profile.trace.records] == kept
    entry = profile.trace.records[0]
    assert entry == ("/f", "write", kept[0] * 100, 100, float(kept[0]), kept[0] + 0.5)
    assert profile.as_dict()["trace"]["dropped"] == 2


def test_trace_arguments_are_checked() -> None:
    with pytest.raises(ValueError, match="keep"):
        Trace(3, keep="middle")
    with pytest.raises(ValueError, match="limit"):
        Trace(-1)
    assert Profile(clock=lambda: 0.0).trace is None  # no trace unless asked


# --- phases ---------------------------------------------------------------------------------


def test_phases_are_inclusive_and_timed_once_when_reentered() -> None:
    now = [0.0]
    phases = Phases(clock=lambda: now[0])
    with phases.timed("transfer"):
        now[0] += 1.0
        with phases.timed("exchange"):
            now[0] += 2.0
        with phases.timed("transfer"):  # re-entered: part of the outer interval
            now[0] += 4.0
    assert phases.as_dict() == {
        "transfer": {"seconds": 7.0, "count": 1},
        "exchange": {"seconds": 2.0, "count": 1},
    }
    with pytest.raises(ValueError, match="unknown phase"):
        phases.add("lunch", 1.0)


# --- HDF5's log driver ----------------------------------------------------------------------

HDF5_LOG = """\
Open took: (0.000089 s)
Stat took: (0.000057 s)
         0-        47 (        48 bytes) (H5FD_MEM_DEFAULT) Written (0.000070s @ 30355.158663)
      2048-     10047 (      8000 bytes) (H5FD_MEM_DRAW) Written (0.000070s @ 30355.159563)
         0-         7 (         8 bytes) (H5FD_MEM_SUPER) Read (0.000055s @ 30355.160887)
Close took: (0.000049 s)
Total number of read operations: 1
Total number of write operations: 2
something HDF5 may print one day
"""


def test_hdf5_log_lines_become_operations() -> None:
    rec = opened(alignment=4096, origin=30355.0)
    unparsed = replay_hdf5_log(rec, HDF5_LOG)
    c, f = counters(rec), fcounters(rec)
    assert unparsed == 1
    assert (c["POSIX_WRITES"], c["POSIX_BYTES_WRITTEN"], c["POSIX_READS"]) == (2, 8048, 1)
    assert c["POSIX_STATS"] == 1
    assert c["POSIX_SIZE_WRITE_0_100"] == 1 and c["POSIX_SIZE_WRITE_1K_10K"] == 1
    assert c["POSIX_SEQ_WRITES"] == 1 and c["POSIX_CONSEC_WRITES"] == 0
    assert c["POSIX_MAX_BYTE_WRITTEN"] == 10047
    assert f["POSIX_F_WRITE_START_TIMESTAMP"] == pytest.approx(0.158663)
    assert f["POSIX_F_WRITE_TIME"] == pytest.approx(0.000140)


# --- across ranks ---------------------------------------------------------------------------


def rank_profile(rank: int, seconds: float, nbytes: int, own: bool = False) -> dict:
    profile = Profile(rank=rank, clock=lambda: 0.0, origin=0.0, trace_limit=8)
    shared = profile.record("/run/master.h5")
    shared.record_open(0.1, 0.1, 4096)
    shared.record_write(rank * nbytes, nbytes, 1.0 + rank, 1.0 + rank + seconds)
    if own:
        mine = profile.record(f"/run/sub/{rank}.h5")
        mine.record_open(0.2, 0.2)
        mine.record_read(0, 10, 3.0, 3.5)
    with profile.phases.timed("transfer"):
        pass
    return profile.as_dict()


def test_reduction_of_a_file_every_rank_opened() -> None:
    profiles = [rank_profile(0, 2.0, 100), rank_profile(1, 1.0, 300, own=True)]
    profiles.append(rank_profile(2, 1.0, 200))  # as fast as rank 1: the lower rank wins
    doc = reduce_profiles(profiles[::-1], start=5.0, run_time=9.0)
    master = record_id("/run/master.h5")
    shared = [r for r in doc["records"] if r["rank"] == -1]
    assert [r["id"] for r in shared] == [master]  # the subfile only rank 1 opened: no -1
    c, f = shared[0]["counters"], shared[0]["fcounters"]
    assert (c["POSIX_OPENS"], c["POSIX_WRITES"], c["POSIX_BYTES_WRITTEN"]) == (3, 3, 600)
    assert c["POSIX_MAX_BYTE_WRITTEN"] == 2 * 200 + 200 - 1
    assert (c["POSIX_FASTEST_RANK"], c["POSIX_FASTEST_RANK_BYTES"]) == (1, 300)
    assert (c["POSIX_SLOWEST_RANK"], c["POSIX_SLOWEST_RANK_BYTES"]) == (0, 100)
    assert c["POSIX_FILE_ALIGNMENT"] == 4096  # copied, not summed
    assert (f["POSIX_F_FASTEST_RANK_TIME"], f["POSIX_F_SLOWEST_RANK_TIME"]) == (1.0, 2.0)
    assert f["POSIX_F_VARIANCE_RANK_TIME"] == pytest.approx(2 / 9)
    assert f["POSIX_F_VARIANCE_RANK_BYTES"] == pytest.approx(20000 / 3)
    assert f["POSIX_F_WRITE_START_TIMESTAMP"] == 1.0
    assert f["POSIX_F_WRITE_END_TIMESTAMP"] == 4.0
    assert f["POSIX_F_WRITE_TIME"] == pytest.approx(4.0)
    assert f["POSIX_F_MAX_WRITE_TIME"] == 2.0 and c["POSIX_MAX_WRITE_TIME_SIZE"] == 100
    per_rank = [(r["id"], r["rank"]) for r in doc["records"] if r["rank"] >= 0]
    assert per_rank == [(master, 0), (master, 1), (master, 2), (record_id("/run/sub/1.h5"), 1)]
    totals = doc["totals"]
    assert (totals["bytes_written"], totals["bytes_read"]) == (600, 10)
    assert (totals["fastest_rank"], totals["slowest_rank"]) == (2, 0)
    assert (totals["least_bytes_rank"], totals["most_bytes_rank"]) == (0, 1)
    assert [row["rank"] for row in doc["ranks"]] == [0, 1, 2]
    assert doc["ranks"][1]["trace"]["records"][0][0] == master  # paths become ids


def test_single_rank_files_are_shared_when_the_job_has_one_rank() -> None:
    doc = reduce_profiles([rank_profile(0, 1.0, 10)])
    assert [r["rank"] for r in doc["records"]] == [-1, 0]
    doc = reduce_profiles([rank_profile(0, 1.0, 10)], nprocs=2)  # the other rank: no I/O
    assert [r["rank"] for r in doc["records"]] == [0]


# --- outputs --------------------------------------------------------------------------------


def test_json_round_trip_and_version_check() -> None:
    doc = reduce_profiles([rank_profile(0, 1.0, 10), rank_profile(1, 2.0, 10)])
    assert from_json(to_json(doc)) == doc
    with pytest.raises(ValueError, match="not an h5subfile profile"):
        from_json('{"format": "other"}')
    with pytest.raises(ValueError, match="version"):
        from_json(to_json({**doc, "version": 99}))


def test_text_dump_is_darshan_parser_like() -> None:
    mounts = parse_mounts("rootfs / ext4 rw 0 0\nrun /run tmpfs rw 0 0\n")
    doc = reduce_profiles([rank_profile(0, 1.0, 10), rank_profile(1, 2.0, 20)], mounts=mounts)
    text = format_text(doc)
    master = record_id("/run/master.h5")
    assert "#<module>\t<rank>\t<record id>\t<counter>\t<value>\t<file name>" in text
    assert f"POSIX\t-1\t{master}\tPOSIX_BYTES_WRITTEN\t30\t/run/master.h5\t/run\ttmpfs\n" in text
    assert (
        f"POSIX\t1\t{master}\tPOSIX_F_WRITE_TIME\t2.000000\t/run/master.h5\t/run\ttmpfs\n" in text
    )
    rows = [line for line in text.splitlines() if line.startswith("POSIX\t")]
    assert len(rows) == 3 * (len(COUNTERS) + len(FCOUNTERS))
    assert all(row.count("\t") == 7 for row in rows)
    dxt = [line.split() for line in text.splitlines() if line.startswith(" X_POSIX")]
    assert dxt[1][:6] == ["X_POSIX", "1", "write", "0", "20", "20"]
    assert "# DXT, rank: 1, limit: 8, keep: first, dropped: 0" in text
    assert "PHASE\t0\ttransfer\t0.000000\t1" in text


def test_records_name_the_module_they_count() -> None:
    """POSIX unless said otherwise; the label leads every text row and DXT row of the file."""
    profiles = [rank_profile(0, 1.0, 10), rank_profile(1, 2.0, 20)]
    assert {r["module"] for r in reduce_profiles(profiles)["records"]} == {"POSIX"}
    doc = reduce_profiles(profiles, module="MPIIO-AS-POSIX")
    assert {r["module"] for r in doc["records"]} == {"MPIIO-AS-POSIX"}
    lines = format_text(from_json(to_json(doc))).splitlines()
    assert sum(line.startswith("MPIIO-AS-POSIX\t") for line in lines) == 3 * (
        len(COUNTERS) + len(FCOUNTERS)
    )
    assert not any(line.startswith(("POSIX\t", " X_POSIX ")) for line in lines)
    assert sum(line.startswith(" X_MPIIO-AS-POSIX ") for line in lines) == 2


def test_mounts() -> None:
    mounts = parse_mounts("a / ext4 rw 0 0\nb /scratch lustre rw 0 0\nc /my\\040disk xfs rw 0 0\n")
    assert mount_of("/scratch/run/x.h5", mounts) == ("/scratch", "lustre")
    assert mount_of("/scratchy/x.h5", mounts) == ("/", "ext4")
    assert mount_of("/my disk/x.h5", mounts) == ("/my disk", "xfs")
    assert mount_of("/x", []) == ("-", "-")


def test_report_prints_a_profile_or_names_what_is_wrong(tmp_path: Path) -> None:
    from h5subfile.cli.report import profile_files, render
    from h5subfile.errors import CorruptFileError, MissingFileError

    doc = reduce_profiles([rank_profile(0, 1.0, 10), rank_profile(1, 2.0, 20)])
    (tmp_path / "run.h5.write.json").write_text(to_json(doc))
    (tmp_path / "bad.json").write_text('{"format": "other"}')
    assert profile_files(str(tmp_path)) == [
        str(tmp_path / n) for n in ("bad.json", "run.h5.write.json")
    ]
    assert render(str(tmp_path / "run.h5.write.json")) == format_text(doc)
    with pytest.raises(CorruptFileError, match="bad.json is not a readable h5subfile profile"):
        render(str(tmp_path / "bad.json"))
    with pytest.raises(MissingFileError, match="does not exist"):
        profile_files(str(tmp_path / "none.json"))
    (tmp_path / "empty").mkdir()
    with pytest.raises(MissingFileError, match="holds no profile"):
        profile_files(str(tmp_path / "empty"))


def test_absorbing_another_record_of_the_same_file() -> None:
    raw, hdf5 = opened(alignment=4096, origin=0.0), opened(origin=0.0)
    raw.record_write(4096, 100, 5.0, 6.0)
    raw.record_write(4096, 10, 5.5, 5.6)  # inside the previous one: adds no time
    hdf5.record_write(0, MiB, 1.0, 3.0)
    hdf5.record_read(0, 48, 0.5, 0.75)
    raw.absorb(hdf5)
    c, f = counters(raw), fcounters(raw)
    assert (c["POSIX_OPENS"], c["POSIX_WRITES"], c["POSIX_READS"]) == (2, 3, 1)
    assert c["POSIX_BYTES_WRITTEN"] == 110 + MiB
    assert c["POSIX_MAX_BYTE_WRITTEN"] == MiB - 1
    assert c["POSIX_SIZE_WRITE_100K_1M"] == 1 and c["POSIX_SIZE_WRITE_0_100"] == 2
    assert c["POSIX_FILE_ALIGNMENT"] == 4096 and c["POSIX_MMAPS"] == -1
    assert f["POSIX_F_WRITE_TIME"] == pytest.approx(3.0)
    assert f["POSIX_F_READ_TIME"] == pytest.approx(0.25)
    # the end stamp is the end of the last write (5.6), not the latest end (6.0), as Darshan
    assert (f["POSIX_F_WRITE_START_TIMESTAMP"], f["POSIX_F_WRITE_END_TIMESTAMP"]) == (1.0, 5.6)
    assert f["POSIX_F_READ_START_TIMESTAMP"] == 0.5
    assert (f["POSIX_F_MAX_WRITE_TIME"], c["POSIX_MAX_WRITE_TIME_SIZE"]) == (2.0, MiB)


def test_two_streams_of_one_file_are_sequenced_in_time_order() -> None:
    """RawFile's and HDF5's operations on one file, merged by time as Darshan sees them: a
    small write at the start after a large one further on is neither consecutive nor
    sequential, whichever stream made it; an open resets the last bytes."""
    raw = PosixRecord("/f", origin=0.0)
    raw.keep_events()
    raw.record_open(1.0, 1.0)
    raw.record_write(2048, 8000, 2.0, 2.1)  # the data
    hdf5 = PosixRecord("/f", origin=0.0)
    hdf5.keep_events()
    hdf5.record_open(0.5, 0.5)
    hdf5.record_write(0, 48, 0.6, 0.6)  # superblock, before the data
    hdf5.record_write(48, 100, 3.0, 3.1)  # metadata at close, after the data
    hdf5.record_read(0, 8, 3.2, 3.3)
    apart = [raw.counters[:], hdf5.counters[:]]
    raw.absorb(hdf5)
    c = dict(zip(COUNTERS, raw.counters))
    # in time order: open 0.5, write 0-47, open 1.0 (reset), write 2048.., write 48.., read 0
    assert (c["POSIX_SEQ_WRITES"], c["POSIX_CONSEC_WRITES"]) == (1, 0)
    assert c["POSIX_RW_SWITCHES"] == 1 and c["POSIX_WRITES"] == 3 and c["POSIX_READS"] == 1
    # counted apart (a stream not kept), the metadata write at 48 follows 0-47: consecutive
    raw2 = PosixRecord("/f", origin=0.0)
    raw2.counters = apart[0]
    hdf5_again = PosixRecord("/f", origin=0.0)
    hdf5_again.record_open(0.5, 0.5)
    hdf5_again.record_write(0, 48, 0.6, 0.6)
    hdf5_again.record_write(48, 100, 3.0, 3.1)
    raw2.absorb(hdf5_again)
    assert dict(zip(COUNTERS, raw2.counters))["POSIX_CONSEC_WRITES"] == 1


@pytest.mark.parametrize("nprocs", [1, 2, 3, 4])
def test_reduction_of_one_to_four_ranks(nprocs: int) -> None:
    """Every rank writes its own bytes of the shared master: the job's totals and the shared
    record add them up, and the slowest rank is the one with the most time."""
    profiles = [rank_profile(r, 1.0 + r, 100 * (r + 1)) for r in range(nprocs)]
    doc = reduce_profiles(profiles)
    written = sum(100 * (r + 1) for r in range(nprocs))
    assert doc["nprocs"] == nprocs and doc["totals"]["bytes_written"] == written
    assert [row["rank"] for row in doc["ranks"]] == list(range(nprocs))
    shared = [r for r in doc["records"] if r["rank"] == -1]
    assert [r["counters"]["POSIX_BYTES_WRITTEN"] for r in shared] == [written]
    assert shared[0]["counters"]["POSIX_SLOWEST_RANK"] == nprocs - 1
    assert shared[0]["counters"]["POSIX_FASTEST_RANK"] == 0
