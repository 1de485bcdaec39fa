"""What a job's profile says, for the report (docs/PROFILING.md, *Report*): the tables and
series its pictures draw (bytes and time per rank and per file, the access-size histogram,
each rank's time windows, the trace's operations and the aggregate rate over time) and the
*findings*: problems a user can act on, each with the measured evidence, why it matters and
the plan field to change. Pure: a profile document (``reduce_profiles``, ``from_json``) in,
plain data out.

Each finding's threshold is a named constant of this module (``SMALL_SHARE``,
``IMBALANCE``...).
"""

from __future__ import annotations

import os
import statistics
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ..plan import PLAN_FIELDS
from .counters import BUCKET_LIMITS, SIZE_BUCKETS

MiB = 1 << 20

#: Small operations: at most 1 MiB (Darshan's buckets 0_100 to 100K_1M), below which a
#: parallel file system's per-request cost dominates the transfer (Drishti's "small requests").
SMALL_BUCKETS = SIZE_BUCKETS[: BUCKET_LIMITS.index(MiB) + 1]
#: A kind of access (reads, writes) is reported for small operations when at least
#: SMALL_MIN_OPS of its operations are small and they are at least this share of them:
#: Drishti's default thresholds (1000 requests, 10 %). Fewer small operations cost too little
#: to be worth tuning.
SMALL_SHARE = 0.1
SMALL_MIN_OPS = 1000
#: Unaligned file accesses are reported when at least this share of the job's operations start
#: off the file system's block (Drishti's default, 10 %) and the job made at least
#: UNALIGNED_MIN_OPS operations: a handful of HDF5 metadata accesses are always unaligned.
UNALIGNED_SHARE = 0.1
UNALIGNED_MIN_OPS = 100
#: HDF5's metadata accesses (superblock, object headers, heaps, B-tree nodes) are at most
#: 1 KiB (Darshan's buckets 0_100 and 100_1K): with opens and stats they make a rank's
#: metadata operations.
METADATA_BUCKETS = SIZE_BUCKETS[:2]
#: One rank does most metadata when it makes at least half of the job's metadata operations
#: and at least METADATA_FACTOR times as many as the median other rank (so that two ranks that
#: share the work evenly are not reported), out of at least METADATA_MIN_OPS: below that, the
#: metadata costs too little to be worth moving.
METADATA_SHARE = 0.5
METADATA_FACTOR = 4.0
METADATA_MIN_OPS = 50
#: Imbalance: (largest - smallest) / largest of the ranks' (or subfiles') bytes or I/O time at
#: least this (Drishti's default for imbalanced accesses, 30 %)...
IMBALANCE = 0.3
#: ...when the job moved at least this many bytes (for bytes)...
IMBALANCE_MIN_BYTES = 16 * MiB
#: ...or when the largest I/O time is at least this many seconds (for time): shorter times
#: vary by more than 30 % from run to run on a loaded machine.
IMBALANCE_MIN_SECONDS = 0.5
#: Time lost waiting is reported when it is at least this share of the ranks' run time (the
#: run time times the number of ranks).
WAIT_SHARE = 0.2

_FIELDS = {field.name for field in PLAN_FIELDS}


@dataclass(frozen=True)
class Finding:
    """One problem found: ``key`` (stable, for scripts), ``title``, the measured ``evidence``,
    ``why`` it matters, the ``advice`` and the plan ``fields`` it names."""

    key: str
    title: str
    evidence: str
    why: str
    advice: str
    fields: tuple[str, ...]

    def __post_init__(self) -> None:
        unknown = [name for name in self.fields if name not in _FIELDS]
        if unknown:
            raise ValueError(f"finding {self.key!r} names no plan field {unknown}")


# ---------------------------------------------------------------------------------------------
# What the pictures draw


def rank_records(doc: dict[str, Any]) -> list[dict[str, Any]]:
    """The per-rank records (a shared record, rank -1, repeats their sums)."""
    return [rec for rec in doc["records"] if rec["rank"] >= 0]


def _grouped(doc: dict[str, Any], key: str) -> dict[Any, list[dict[str, Any]]]:
    """The per-rank records by ``key`` (``rank`` or ``id``), in one pass."""
    groups: dict[Any, list[dict[str, Any]]] = {}
    for rec in rank_records(doc):
        groups.setdefault(rec[key], []).append(rec)
    return groups


def _sum(records: list[dict[str, Any]], *names: str) -> int:
    return int(sum(rec["counters"][name] for rec in records for name in names))


def _fsum(records: list[dict[str, Any]], *names: str) -> float:
    return float(sum(rec["fcounters"][name] for rec in records for name in names))


def size_histogram(doc: dict[str, Any]) -> dict[str, list[int]]:
    """Operations per Darshan size bucket (:data:`SIZE_BUCKETS`), for ``read`` and ``write``,
    over every rank's records."""
    records = rank_records(doc)
    return {
        kind: [_sum(records, f"POSIX_SIZE_{kind.upper()}_{b}") for b in SIZE_BUCKETS]
        for kind in ("read", "write")
    }


def _totals(records: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "bytes_read": _sum(records, "POSIX_BYTES_READ"),
        "bytes_written": _sum(records, "POSIX_BYTES_WRITTEN"),
        "reads": _sum(records, "POSIX_READS"),
        "writes": _sum(records, "POSIX_WRITES"),
        "read_time": _fsum(records, "POSIX_F_READ_TIME"),
        "write_time": _fsum(records, "POSIX_F_WRITE_TIME"),
        "meta_time": _fsum(records, "POSIX_F_META_TIME"),
        "metadata_ops": _sum(records, "POSIX_OPENS", "POSIX_STATS")
        + sum(
            _sum(records, f"POSIX_SIZE_{kind}_{b}")
            for kind in ("READ", "WRITE")
            for b in METADATA_BUCKETS
        ),
    }


def per_rank(doc: dict[str, Any]) -> list[dict[str, Any]]:
    """Per rank (every rank of the profile, one without I/O too): bytes read and written,
    operations, read, write and meta seconds, metadata operations, phases and ``io_time``
    (read + write + meta)."""
    by_rank = _grouped(doc, "rank")
    rows = []
    for row in doc["ranks"]:
        mine = _totals(by_rank.get(row["rank"], []))
        mine["io_time"] = mine["read_time"] + mine["write_time"] + mine["meta_time"]
        rows.append({"rank": row["rank"], **mine, "phases": row.get("phases", {})})
    return rows


def is_subfile(path: str) -> bool:
    """Whether ``path`` is a subfile (in a master's ``<stem>.subfiles`` folder)."""
    return os.path.basename(os.path.dirname(path)).endswith(".subfiles")


def per_file(doc: dict[str, Any]) -> list[dict[str, Any]]:
    """Per file, in the profile's order: its path, the ranks that opened it, and the totals of
    :func:`per_rank` over them."""
    by_id = _grouped(doc, "id")
    rows = []
    for f in doc["files"]:
        mine = by_id.get(f["id"], [])
        totals = _totals(mine)
        totals["io_time"] = totals["read_time"] + totals["write_time"] + totals["meta_time"]
        rows.append({"id": f["id"], "path": f["path"], "ranks": len(mine), **totals})
    return rows


def rank_windows(doc: dict[str, Any]) -> list[dict[str, Any]]:
    """What the counters say of each rank's timeline (no trace needed): the first open's start
    and last close's end (``open``, ``close``), the first and last write (``write``: start,
    end, or None) and read, over its files; seconds since the profile's start."""
    by_rank = _grouped(doc, "rank")
    rows = []
    for row in doc["ranks"]:
        mine = [rec["fcounters"] for rec in by_rank.get(row["rank"], [])]
        out: dict[str, Any] = {"rank": row["rank"]}
        for key, first, last in (
            ("open", "OPEN_START", "OPEN_END"),
            ("close", "CLOSE_START", "CLOSE_END"),
            ("write", "WRITE_START", "WRITE_END"),
            ("read", "READ_START", "READ_END"),
        ):
            starts = [f[f"POSIX_F_{first}_TIMESTAMP"] for f in mine]
            ends = [f[f"POSIX_F_{last}_TIMESTAMP"] for f in mine]
            started = [s for s in starts if s > 0]
            out[key] = (min(started), max(ends)) if started and max(ends) > 0 else None
        rows.append(out)
    return rows


def traced(doc: dict[str, Any]) -> bool:
    """Whether any rank kept a trace."""
    return any(row.get("trace") is not None for row in doc["ranks"])


def trace_operations(doc: dict[str, Any]) -> list[tuple[int, str, int, float, float]]:
    """Every traced operation: (rank, kind, length, start, end)."""
    return [
        (row["rank"], entry[1], int(entry[3]), float(entry[4]), float(entry[5]))
        for row in doc["ranks"]
        if row.get("trace") is not None
        for entry in row["trace"]["records"]
    ]


def dropped(doc: dict[str, Any]) -> int:
    """Operations the ranks' traces did not keep."""
    return sum(row["trace"]["dropped"] for row in doc["ranks"] if row.get("trace") is not None)


def rate_series(doc: dict[str, Any], bins: int = 100) -> dict[str, Any]:
    """The job's aggregate rate over time from the trace: ``edges`` (``bins`` + 1 times, from 0
    to the last operation's end) and MiB/s of ``read`` and ``write`` in each interval, each
    operation's bytes spread evenly over its duration (an operation of no measurable duration
    counts in the interval it starts in)."""
    ops = trace_operations(doc)
    end = max((op[4] for op in ops), default=0.0)
    if not ops or end <= 0:
        return {"edges": [], "read": [], "write": []}
    width = end / bins
    moved = {"read": [0.0] * bins, "write": [0.0] * bins}
    for _, kind, length, start, stop in ops:
        series = moved[kind]
        first = min(int(start / width), bins - 1)
        if stop <= start:
            series[first] += length
            continue
        last = min(int(stop / width), bins - 1)
        for i in range(first, last + 1):
            overlap = min(stop, (i + 1) * width) - max(start, i * width)
            series[i] += length * max(overlap, 0.0) / (stop - start)
    return {
        "edges": [i * width for i in range(bins + 1)],
        **{kind: [b / width / MiB for b in series] for kind, series in moved.items()},
    }


# ---------------------------------------------------------------------------------------------
# Findings


def _pct(part: float, whole: float) -> str:
    return f"{100.0 * part / whole:.0f} %" if whole else "0 %"


def _spread(values: list[float]) -> float:
    """(largest - smallest) / largest; 0 when the largest is 0."""
    top = max(values, default=0.0)
    return (top - min(values)) / top if top > 0 else 0.0


def small_accesses(doc: dict[str, Any], kind: str) -> Finding | None:
    """Many ``kind`` (``read`` or ``write``) operations of at most 1 MiB."""
    counts = dict(zip(SIZE_BUCKETS, size_histogram(doc)[kind]))
    total = sum(counts.values())
    small = sum(counts[b] for b in SMALL_BUCKETS)
    if small < SMALL_MIN_OPS or small < SMALL_SHARE * total:
        return None
    top = max(SMALL_BUCKETS, key=lambda b: counts[b])
    plural = f"{kind}s"
    return Finding(
        key=f"small_{plural}",
        title=f"Small {plural}",
        evidence=f"{small} of {total} {plural} ({_pct(small, total)}) moved at most 1 MiB; "
        f"the most common size was {top.replace('_', '-')} bytes ({counts[top]} {plural})",
        why="each system call pays the file system's per-request cost (a round trip to a "
        "server on a parallel file system), which small requests do not amortise",
        advice="if `transfer_size` is set below 1 MiB, raise it (every call is cut at it); "
        f"otherwise `aggregators` (two-phase I/O): A ranks per subfile {kind} the others' "
        "pieces together, in requests of up to `buffer_size` bytes"
        + (" (`read_collective`, `read_partition`)" if kind == "read" else ""),
        fields=("transfer_size", "aggregators", "buffer_size"),
    )


def unaligned(doc: dict[str, Any]) -> Finding | None:
    """Many operations starting off the file system's block."""
    records = rank_records(doc)
    ops = _sum(records, "POSIX_READS", "POSIX_WRITES")
    off = _sum(records, "POSIX_FILE_NOT_ALIGNED")
    if ops < UNALIGNED_MIN_OPS or off < UNALIGNED_SHARE * ops:
        return None
    sizes = sorted({rec["counters"]["POSIX_FILE_ALIGNMENT"] for rec in records} - {0})
    block = " or ".join(str(s) for s in sizes) or "unknown"
    return Finding(
        key="unaligned",
        title="Unaligned file accesses",
        evidence=f"{off} of {ops} operations ({_pct(off, ops)}) started at an offset that is "
        f"not a multiple of the file system's block ({block} bytes)",
        why="an access that starts inside a block makes the file system read, modify and "
        "write whole blocks (or stripes, and their locks on a parallel file system), and two "
        "ranks writing one block contend for it; HDF5's own metadata accesses are always "
        "unaligned, but they are few",
        advice="`alignment`: set it to the block or stripe size (a power of two, e.g. 1m on "
        "Lustre or GPFS) so that every dataset's data starts on a boundary; a rank's block "
        "inside a shared dataset starts where the previous rank's ends, so keep blocks a "
        "multiple of it (or one rank per subfile: `subfiles` 'rank'); a `transfer_size` that is "
        "a multiple of it keeps the cuts aligned",
        fields=("alignment", "subfiles", "transfer_size"),
    )


def metadata_on_one_rank(doc: dict[str, Any]) -> Finding | None:
    """One rank making most of the job's metadata operations (opens, stats, accesses of at
    most 1 KiB: HDF5's metadata)."""
    rows = per_rank(doc)
    total = sum(row["metadata_ops"] for row in rows)
    if len(rows) < 2 or total < METADATA_MIN_OPS:
        return None
    top = max(rows, key=lambda row: (row["metadata_ops"], -row["rank"]))
    others = statistics.median(row["metadata_ops"] for row in rows if row is not top)
    if top["metadata_ops"] < METADATA_SHARE * total or top["metadata_ops"] < (
        METADATA_FACTOR * others
    ):
        return None
    return Finding(
        key="metadata_rank",
        title=f"Rank {top['rank']} does most of the metadata I/O",
        evidence=f"rank {top['rank']} made {top['metadata_ops']} of the job's {total} "
        f"metadata operations ({_pct(top['metadata_ops'], total)}: opens, stats and accesses "
        f"of at most 1 KiB) against a median of {others:g} on the other ranks, and spent "
        f"{top['meta_time']:.4f} s in opens, stats and closes",
        why="metadata accesses are small and latency-bound, and the other ranks wait for this "
        "one at the next collective call; rank 0 writes the master at a write session's close "
        "and scans it at a read session's open (its groups, attributes and one virtual-dataset "
        "mapping per subfile and dataset), each subfile's leader writes its subfile's HDF5 "
        "metadata",
        advice="`subfiles` / `ranks_per_subfile` (chosen when the file is written): fewer "
        "subfiles mean fewer mappings in the master that rank 0 writes and reads (and more, "
        "smaller subfiles spread the subfiles' own metadata over more leaders); creating a "
        "step's datasets in one call rather than one by one saves rounds",
        fields=("subfiles", "ranks_per_subfile"),
    )


def rank_bytes_imbalance(doc: dict[str, Any]) -> Finding | None:
    """Ranks moving very different amounts of data."""
    rows = per_rank(doc)
    moved = [row["bytes_read"] + row["bytes_written"] for row in rows]
    if len(rows) < 2 or sum(moved) < IMBALANCE_MIN_BYTES or _spread(moved) < IMBALANCE:
        return None
    most, least = rows[moved.index(max(moved))], rows[moved.index(min(moved))]
    return Finding(
        key="rank_bytes_imbalance",
        title="Ranks move unequal amounts of data",
        evidence=f"rank {most['rank']} moved {max(moved) / MiB:.1f} MiB and rank "
        f"{least['rank']} {min(moved) / MiB:.1f} MiB: the smallest is "
        f"{_pct(max(moved) - min(moved), max(moved))} below the largest",
        why="a collective write or read ends when its slowest rank ends: the ranks with less "
        "data wait for the one with the most",
        advice="`aggregators` (two-phase I/O): A ranks per subfile write equal domains of the "
        "file whatever each rank holds, so the writing is balanced even when the data is not; "
        "or balance the application's decomposition",
        fields=("aggregators",),
    )


def rank_time_imbalance(doc: dict[str, Any]) -> Finding | None:
    """Ranks spending very different times in I/O."""
    rows = per_rank(doc)
    times = [row["io_time"] for row in rows]
    if len(rows) < 2 or max(times) < IMBALANCE_MIN_SECONDS or _spread(times) < IMBALANCE:
        return None
    slow, fast = rows[times.index(max(times))], rows[times.index(min(times))]
    return Finding(
        key="rank_time_imbalance",
        title="Ranks spend unequal time in I/O",
        evidence=f"rank {slow['rank']} spent {max(times):.3f} s in I/O (reads, writes, opens, "
        f"stats, closes, fsyncs) and rank {fast['rank']} {min(times):.3f} s: "
        f"{_pct(max(times) - min(times), max(times))} less",
        why="the other ranks wait for the slowest at the next collective call: its extra time "
        "is lost on every other rank",
        advice="`subfiles` / `ranks_per_subfile`: ranks crowded on one subfile (or one "
        "storage target) are slower, so spread them over more subfiles; `aggregators` "
        "evens out the bytes each writer moves; compare the per-rank pictures for the slow "
        "ranks' files",
        fields=("subfiles", "ranks_per_subfile", "aggregators"),
    )


def subfile_imbalance(doc: dict[str, Any]) -> Finding | None:
    """Subfiles holding very different amounts of data, or taking very different times."""
    rows = [row for row in per_file(doc) if is_subfile(row["path"])]
    if len(rows) < 2:
        return None
    moved = [row["bytes_read"] + row["bytes_written"] for row in rows]
    times = [row["io_time"] for row in rows]
    by_bytes = sum(moved) >= IMBALANCE_MIN_BYTES and _spread(moved) >= IMBALANCE
    by_time = max(times) >= IMBALANCE_MIN_SECONDS and _spread(times) >= IMBALANCE
    if not (by_bytes or by_time):
        return None
    name = {id(row): os.path.basename(row["path"]) for row in rows}
    most, least = rows[moved.index(max(moved))], rows[moved.index(min(moved))]
    slow, fast = rows[times.index(max(times))], rows[times.index(min(times))]
    return Finding(
        key="subfile_imbalance",
        title="Subfiles are unequal",
        evidence=f"{len(rows)} subfiles: {max(moved) / MiB:.1f} MiB in {name[id(most)]} "
        f"({most['ranks']} ranks) against {min(moved) / MiB:.1f} MiB in {name[id(least)]} "
        f"({least['ranks']} ranks); {max(times):.3f} s of I/O on {name[id(slow)]} against "
        f"{min(times):.3f} s on {name[id(fast)]}",
        why="a subfile with more ranks or more data finishes last, and the job waits for it",
        advice="`subfiles` / `ranks_per_subfile`: choose a number of subfiles that divides the "
        "rank count (or ranks per subfile that divides it), so that every subfile has as many "
        "ranks; with 'node', nodes running different rank counts give unequal subfiles",
        fields=("subfiles", "ranks_per_subfile"),
    )


def waiting(doc: dict[str, Any]) -> Finding | None:
    """A large share of the ranks' time lost waiting for each other: measured by the ``wait``
    phase when the ranks' phases were timed (``agree`` present: every collective call has one;
    ``wait`` lies inside it and is absent when no rank ever waited), else estimated as what
    every rank waits for the slowest one's I/O (sum over ranks of slowest I/O time - own I/O
    time)."""
    rows = per_rank(doc)
    run_time = float(doc.get("run_time", 0.0))
    if len(rows) < 2 or run_time <= 0:
        return None
    phased = [row["phases"].get("wait", {}).get("seconds", 0.0) for row in rows]
    measured = any(name in row["phases"] for row in rows for name in ("wait", "agree"))
    slowest = max(row["io_time"] for row in rows)
    lost = sum(phased) if measured else sum(slowest - row["io_time"] for row in rows)
    whole = run_time * len(rows)
    if lost < WAIT_SHARE * whole:
        return None
    how = (
        "measured in the wait phase (polling collective rounds other ranks had not reached)"
        if measured
        else "estimated as the time each rank waits for the slowest rank's I/O "
        f"({slowest:.3f} s); the wait and agree phases were not measured"
    )
    return Finding(
        key="waiting",
        title="Time lost waiting for other ranks",
        evidence=f"{lost:.3f} s of the ranks' {whole:.3f} s ({len(rows)} ranks x "
        f"{run_time:.3f} s of run time, {_pct(lost, whole)}) went to waiting, {how}",
        why="a rank waiting in a collective call does no work: the job runs at the pace of "
        "its slowest rank",
        advice="balance the ranks: `subfiles` / `ranks_per_subfile` (spread the ranks over "
        "more, equal subfiles) and `aggregators` (balanced writers); see the imbalance "
        "findings and the per-rank pictures for which ranks are slow",
        fields=("subfiles", "ranks_per_subfile", "aggregators"),
    )


#: Every check, in the order the report lists its findings.
CHECKS: tuple[Callable[[dict[str, Any]], Finding | None], ...] = (
    lambda doc: small_accesses(doc, "write"),
    lambda doc: small_accesses(doc, "read"),
    unaligned,
    metadata_on_one_rank,
    rank_bytes_imbalance,
    rank_time_imbalance,
    subfile_imbalance,
    waiting,
)


def findings(doc: dict[str, Any]) -> list[Finding]:
    """Every finding the profile supports, in :data:`CHECKS` order."""
    return [found for check in CHECKS if (found := check(doc)) is not None]
