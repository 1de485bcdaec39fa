"""The report's findings and tables on crafted job profiles (docs/PROFILING.md, *Report*): each
finding appears exactly when its condition holds (at its threshold and not just below it),
every other check stays quiet, and the tables and series add up to the counters."""

from __future__ import annotations

from typing import Any

import pytest

from h5subfile.plan import PLAN_FIELDS
from h5subfile.profiler import findings as pf
from h5subfile.profiler.counters import SIZE_BUCKETS, PosixRecord, Trace
from h5subfile.profiler.reduction import reduce_profiles

KiB, MiB = 1 << 10, 1 << 20
SUB = "/job/run.subfiles/s0-0000-{:05d}.h5"
MASTER = "/job/run.h5"


def writes(n: int, length: int, seconds: float = 1e-6, offset: int = 0, step: int = 0):
    """``n`` writes of ``length`` bytes, each ``seconds`` long, at ``offset`` + i * ``step``
    (``step`` 0: one after the other)."""
    step = step or length
    return [
        (offset + i * step, length, 1.0 + i * seconds, 1.0 + (i + 1) * seconds) for i in range(n)
    ]


def record(path: str, ops=(), reads=(), alignment: int = 4096, trace: Trace | None = None):
    rec = PosixRecord(path, trace=trace)
    rec.record_open(0.5, 0.5, alignment)
    for offset, length, start, end in ops:
        rec.record_write(offset, length, start, end)
    for offset, length, start, end in reads:
        rec.record_read(offset, length, start, end)
    return {"path": path, **rec.as_dict()}


def rank(
    number: int, records: list[dict[str, Any]], phases=None, trace: Trace | None = None
) -> dict[str, Any]:
    return {
        "rank": number,
        "records": records,
        "phases": phases or {},
        "trace": trace.as_dict() if trace is not None else None,
        "unparsed": 0,
    }


def job(*ranks: dict[str, Any], run_time: float = 100.0) -> dict[str, Any]:
    return reduce_profiles(list(ranks), run_time=run_time)


def same_on_two_ranks(ops, **kwargs) -> dict[str, Any]:
    """Two ranks doing the same ``ops``, each in its own subfile."""
    return job(*(rank(r, [record(SUB.format(r), ops, **kwargs)]) for r in range(2)))


def keys(doc: dict[str, Any]) -> set[str]:
    return {found.key for found in pf.findings(doc)}


def test_a_balanced_job_of_large_aligned_writes_has_no_finding() -> None:
    assert keys(same_on_two_ranks(writes(10, 4 * MiB))) == set()


# --- small accesses ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("small", "large", "found"),
    [
        (500, 0, True),  # 1000 small writes in all, every write small
        (499, 0, False),  # 998 small writes: too few to matter
        (500, 4500, True),  # 1000 small writes, exactly 10 %
        (500, 4501, False),  # 1000, just under 10 %
    ],
)
def test_small_writes_at_their_thresholds(small: int, large: int, found: bool) -> None:
    ops = writes(small, 1 * MiB) + writes(large, 2 * MiB, offset=1 << 40)
    doc = same_on_two_ranks(ops)
    assert sum(pf.size_histogram(doc)["write"]) == 2 * (small + large)
    assert keys(doc) == ({"small_writes"} if found else set())


def test_small_reads_name_the_collective_reads() -> None:
    doc = job(*(rank(r, [record(SUB.format(r), reads=writes(500, 64 * KiB))]) for r in range(2)))
    (found,) = pf.findings(doc)
    assert found.key == "small_reads"
    assert "1000 of 1000 reads (100 %)" in found.evidence and "10K-100K" in found.evidence
    assert "read_collective" in found.advice and "transfer_size" in found.fields


# --- alignment ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("ops", "off", "found"),
    [(100, 10, True), (100, 9, False), (99, 99, False)],
    ids=["10 % of 100", "9 %", "too few"],
)
def test_unaligned_accesses_at_their_thresholds(ops: int, off: int, found: bool) -> None:
    aligned = writes(ops - off, 4 * KiB)
    unaligned = writes(off, 4 * KiB, offset=(1 << 30) + 1)
    doc = job(rank(0, [record(SUB.format(0), aligned + unaligned)]))
    assert keys(doc) == ({"unaligned"} if found else set())
    if found:
        (item,) = pf.findings(doc)
        assert f"{off} of {ops} operations" in item.evidence and "4096 bytes" in item.evidence


# --- metadata on one rank -----------------------------------------------------------------------


@pytest.mark.parametrize(("other", "found"), [(10, True), (11, False)])
def test_metadata_on_one_rank_at_four_times_the_others(other: int, found: bool) -> None:
    """Rank 0: one open and 39 HDF5-sized writes (40 metadata operations); rank 1: one open
    and ``other`` - 1. Reported when rank 0 makes half the total and four times rank 1's."""
    zero = rank(0, [record(MASTER, writes(39, 96))])
    one = rank(1, [record(SUB.format(1), writes(other - 1, 900))])
    doc = job(zero, one)
    assert [row["metadata_ops"] for row in pf.per_rank(doc)] == [40, other]
    assert keys(doc) == ({"metadata_rank"} if found else set())
    if found:
        (item,) = pf.findings(doc)
        assert item.title == "Rank 0 does most of the metadata I/O"
        assert "40 of the job's 50" in item.evidence


def test_metadata_is_not_reported_below_its_minimum_or_when_shared() -> None:
    few = job(rank(0, [record(MASTER, writes(47, 96))]), rank(1, [record(SUB.format(1))]))
    assert sum(row["metadata_ops"] for row in pf.per_rank(few)) == 49
    assert keys(few) == set()
    shared = job(*(rank(r, [record(SUB.format(r), writes(40, 96))]) for r in range(2)))
    assert keys(shared) == set()


# --- imbalance ---------------------------------------------------------------------------------
# Ranks in one subfile, so that only the ranks can be unequal (one subfile per rank makes
# unequal ranks unequal subfiles too: both findings)


@pytest.mark.parametrize(
    ("first", "second", "found"),
    [(10, 7, True), (10, 8, False), (8, 1, False)],
    ids=["30 %", "20 %", "only 9 MiB moved"],
)
def test_bytes_imbalance_across_ranks(first: int, second: int, found: bool) -> None:
    doc = job(
        rank(0, [record(SUB.format(0), writes(first, MiB))]),
        rank(1, [record(SUB.format(0), writes(second, MiB, offset=1 << 30))]),
    )
    assert keys(doc) == ({"rank_bytes_imbalance"} if found else set())


@pytest.mark.parametrize(
    ("slow", "fast", "found"),
    [(1.0, 0.7, True), (1.0, 0.75, False), (0.4, 0.1, False)],
    ids=["30 %", "25 %", "under half a second"],
)
def test_time_imbalance_across_ranks(slow: float, fast: float, found: bool) -> None:
    doc = job(
        rank(0, [record(SUB.format(0), writes(1, MiB, seconds=slow))]),
        rank(1, [record(SUB.format(0), writes(1, MiB, seconds=fast, offset=1 << 30))]),
    )
    assert [row["io_time"] for row in pf.per_rank(doc)] == pytest.approx([slow, fast])
    assert keys(doc) == ({"rank_time_imbalance"} if found else set())


def test_subfile_imbalance_by_bytes_ignores_the_master() -> None:
    """Ranks 0 and 1 share subfile 0 (16 MiB), rank 2 has subfile 1 (8 MiB): every rank moved
    8 MiB, so only the subfiles are unequal; the master's few bytes do not count."""
    zero = rank(0, [record(SUB.format(0), writes(8, MiB)), record(MASTER, writes(3, 96))])
    one = rank(1, [record(SUB.format(0), writes(8, MiB, offset=1 << 30))])
    two = rank(2, [record(SUB.format(1), writes(8, MiB))])
    doc = job(zero, one, two)
    assert keys(doc) == {"subfile_imbalance"}
    (item,) = pf.findings(doc)
    assert "16.0 MiB in s0-0000-00000.h5 (2 ranks)" in item.evidence
    assert "8.0 MiB in s0-0000-00001.h5 (1 ranks)" in item.evidence
    balanced = job(zero, rank(1, [record(SUB.format(1), writes(8, MiB))]))
    assert keys(balanced) == set()


@pytest.mark.parametrize(("seconds", "found"), [(0.5, True), (0.71, False)])
def test_subfile_imbalance_by_time(seconds: float, found: bool) -> None:
    """Subfile 0: two ranks of half a second each; subfile 1: one rank of ``seconds`` (0.71 s:
    29 % below subfile 0's second, and the ranks' times 30 % apart at most)."""
    doc = job(
        rank(0, [record(SUB.format(0), writes(1, KiB, seconds=0.5))]),
        rank(1, [record(SUB.format(0), writes(1, KiB, seconds=0.5, offset=KiB))]),
        rank(2, [record(SUB.format(1), writes(1, KiB, seconds=seconds))]),
    )
    assert keys(doc) == ({"subfile_imbalance"} if found else set())


# --- waiting ---------------------------------------------------------------------------------


@pytest.mark.parametrize(("wait", "found"), [(2.0, True), (1.95, False)])
def test_waiting_measured_by_the_wait_phase(wait: float, found: bool) -> None:
    """Two ranks of 10 s each: 20 rank-seconds, of which 20 % is 4 s; each rank waits
    ``wait`` seconds, inside 3 s of agreement rounds (which the wait lies in: not added)."""
    phases = {"wait": {"seconds": wait, "count": 3}, "agree": {"seconds": 3.0, "count": 3}}
    ranks = [rank(r, [record(SUB.format(r), writes(1, MiB))], phases) for r in range(2)]
    doc = job(*ranks, run_time=10.0)
    assert keys(doc) == ({"waiting"} if found else set())
    if found:
        assert "measured in the wait phase" in pf.findings(doc)[0].evidence


def test_timed_phases_without_any_wait_are_no_waiting() -> None:
    """Phases timed (agreement rounds) but no rank ever waited: measured as none, not
    estimated from the ranks' I/O times."""
    phases = {"agree": {"seconds": 3.0, "count": 3}}
    doc = job(
        rank(0, [record(SUB.format(0), writes(1, MiB, seconds=5.0))], phases),
        rank(1, [record(SUB.format(0), writes(1, MiB, seconds=0.9, offset=1 << 30))], phases),
        run_time=10.0,
    )
    assert "waiting" not in keys(doc)


@pytest.mark.parametrize(("run_time", "found"), [(10.0, True), (20.0, False)])
def test_waiting_estimated_from_the_slowest_rank(run_time: float, found: bool) -> None:
    """No wait phase: rank 1 waits 4.1 s for rank 0's 5 s of I/O."""
    doc = job(
        rank(0, [record(SUB.format(0), writes(1, MiB, seconds=5.0))]),
        rank(1, [record(SUB.format(0), writes(1, MiB, seconds=0.9, offset=1 << 30))]),
        run_time=run_time,
    )
    assert keys(doc) == {"rank_time_imbalance"} | ({"waiting"} if found else set())
    if found:
        item = next(f for f in pf.findings(doc) if f.key == "waiting")
        assert item.evidence.startswith("4.100 s of the ranks' 20.000 s")
        assert "estimated" in item.evidence


# --- every finding names real plan fields -------------------------------------------------------


def test_findings_name_only_real_plan_fields() -> None:
    names = {field.name for field in PLAN_FIELDS}
    doc = job(
        rank(
            0, [record(MASTER, writes(600, 96, offset=1)), record(SUB.format(0), writes(40, MiB))]
        ),
        rank(1, [record(SUB.format(1), writes(2, MiB, seconds=2.0))]),
        run_time=3.0,
    )
    found = pf.findings(doc)
    assert {f.key for f in found} >= {"unaligned", "metadata_rank", "rank_bytes_imbalance"}
    for item in found:
        assert item.fields and set(item.fields) <= names
        for name in item.fields:
            assert f"`{name}`" in item.advice, (item.key, name)
    with pytest.raises(ValueError, match="names no plan field"):
        pf.Finding("x", "x", "x", "x", "x", ("stripe_count",))


# --- tables and series -------------------------------------------------------------------------


def test_tables_add_up_to_the_counters() -> None:
    zero = rank(0, [record(SUB.format(0), writes(3, MiB), reads=writes(2, 10))])
    one = rank(1, [record(SUB.format(0), writes(1, 200, offset=1 << 30))])
    doc = job(zero, one)
    files = pf.per_file(doc)
    assert [(f["ranks"], f["bytes_written"], f["bytes_read"]) for f in files] == [
        (2, 3 * MiB + 200, 20)
    ]
    rows = pf.per_rank(doc)
    assert [(r["writes"], r["reads"]) for r in rows] == [(3, 2), (1, 0)]
    histogram = pf.size_histogram(doc)
    assert histogram["read"][SIZE_BUCKETS.index("0_100")] == 2
    assert histogram["write"][SIZE_BUCKETS.index("100_1K")] == 1
    assert histogram["write"][SIZE_BUCKETS.index("100K_1M")] == 3
    windows = pf.rank_windows(doc)
    assert windows[0]["write"] == pytest.approx((1.0, 1.0 + 3e-6))
    assert windows[0]["read"] is not None and windows[1]["read"] is None
    assert not pf.traced(doc) and pf.rate_series(doc)["edges"] == []


def test_the_rate_over_time_keeps_every_traced_byte() -> None:
    trace = Trace(100)
    rec = PosixRecord(SUB.format(0), trace=trace)
    rec.record_write(0, 8 * MiB, 0.0, 2.0)  # spread over the first half
    rec.record_write(8 * MiB, MiB, 3.0, 3.0)  # no duration: in the interval it starts in
    rec.record_read(0, 4 * MiB, 3.5, 4.0)
    doc = job(rank(0, [{"path": rec.path, **rec.as_dict()}], trace=trace))
    series = pf.rate_series(doc, bins=8)
    width = series["edges"][1]
    assert width == pytest.approx(0.5) and len(series["write"]) == 8
    assert sum(series["write"]) * width == pytest.approx(9.0)
    assert sum(series["read"]) * width == pytest.approx(4.0)
    assert series["write"][:4] == pytest.approx([4.0] * 4)  # 8 MiB over 2 s
    assert series["write"][6] == pytest.approx(2.0)  # 1 MiB at t = 3 s, one 0.5 s interval
    assert series["read"][7] == pytest.approx(8.0)
    assert pf.trace_operations(doc)[0] == (0, "write", 8 * MiB, 0.0, 2.0)
    assert pf.dropped(doc) == 0
