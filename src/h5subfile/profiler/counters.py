"""Per-rank I/O profile: Darshan's POSIX counters per file, a bounded DXT-style trace and phase
timers (docs/PROFILING.md).

Pure: no MPI and no file access. The callers (``RawFile``, the HDF5 log reader, the claim
helpers) read the clock around each system call and hand the times in; every counter follows
the definition of Darshan's POSIX module, cited in docs/PROFILING.md. One *operation* is one
system call: a vectored call of many buffers is one operation of their total length.
"""

from __future__ import annotations

import re
import time
from bisect import bisect_left
from collections import deque
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import numpy as np

#: The environment variable that profiles any application unchanged: the profiles' folder.
PROFILE_ENV = "H5SUBFILE_PROFILE"
#: The trace's bound per rank: ``N`` (the first N operations kept) or ``N:last`` (the last N).
TRACE_ENV = "H5SUBFILE_PROFILE_TRACE"

#: Darshan's size buckets (POSIX_SIZE_{READ,WRITE}_<bucket>), smallest first.
SIZE_BUCKETS = (
    "0_100",
    "100_1K",
    "1K_10K",
    "10K_100K",
    "100K_1M",
    "1M_4M",
    "4M_10M",
    "10M_100M",
    "100M_1G",
    "1G_PLUS",
)
#: The inclusive upper bound (bytes) of every bucket but the last: 100 is decimal, K = 1024.
BUCKET_LIMITS = (100, 1 << 10, 10 << 10, 100 << 10, 1 << 20, 4 << 20, 10 << 20, 100 << 20, 1 << 30)

_FOUR = ("1", "2", "3", "4")
#: Darshan's integer POSIX counters (log format version 4), in Darshan's order.
COUNTERS: tuple[str, ...] = tuple(
    "POSIX_" + name
    for name in (
        "OPENS FILENOS DUPS READS WRITES SEEKS STATS MMAPS FSYNCS FDSYNCS RENAME_SOURCES "
        "RENAME_TARGETS RENAMED_FROM MODE BYTES_READ BYTES_WRITTEN MAX_BYTE_READ "
        "MAX_BYTE_WRITTEN CONSEC_READS CONSEC_WRITES SEQ_READS SEQ_WRITES RW_SWITCHES "
        "MEM_NOT_ALIGNED MEM_ALIGNMENT FILE_NOT_ALIGNED FILE_ALIGNMENT MAX_READ_TIME_SIZE "
        "MAX_WRITE_TIME_SIZE"
    ).split()
    + [f"SIZE_READ_{b}" for b in SIZE_BUCKETS]
    + [f"SIZE_WRITE_{b}" for b in SIZE_BUCKETS]
    + [f"STRIDE{i}_STRIDE" for i in _FOUR]
    + [f"STRIDE{i}_COUNT" for i in _FOUR]
    + [f"ACCESS{i}_ACCESS" for i in _FOUR]
    + [f"ACCESS{i}_COUNT" for i in _FOUR]
    + "FASTEST_RANK FASTEST_RANK_BYTES SLOWEST_RANK SLOWEST_RANK_BYTES".split()
)
#: Darshan's floating-point POSIX counters (seconds), in Darshan's order.
FCOUNTERS: tuple[str, ...] = tuple(
    "POSIX_F_" + name
    for name in (
        "OPEN_START_TIMESTAMP READ_START_TIMESTAMP WRITE_START_TIMESTAMP CLOSE_START_TIMESTAMP "
        "OPEN_END_TIMESTAMP READ_END_TIMESTAMP WRITE_END_TIMESTAMP CLOSE_END_TIMESTAMP "
        "READ_TIME WRITE_TIME META_TIME MAX_READ_TIME MAX_WRITE_TIME FASTEST_RANK_TIME "
        "SLOWEST_RANK_TIME VARIANCE_RANK_TIME VARIANCE_RANK_BYTES"
    ).split()
)
C = {name: i for i, name in enumerate(COUNTERS)}
F = {name: i for i, name in enumerate(FCOUNTERS)}

#: Darshan's default memory alignment (bytes) for POSIX_MEM_NOT_ALIGNED.
MEM_ALIGNMENT = 8
#: The most opens and accesses a record keeps to merge two streams in time order (beyond it
#: the streams' sequence counters are counted apart; docs/PROFILING.md).
MAX_EVENTS = 100_000
#: The phases of h5subfile's own work that a profile times (docs/PROFILING.md, *Phases*).
PHASES = (
    "agree",
    "create",
    "transfer",
    "exchange",
    "compress",
    "rehash",
    "commit",
    "fsync",
    "wait",
    # writing behind (async_writes): the caller's time in the write calls that went each way
    "direct",
    "copy",
    "zero_copy",
)

READ, WRITE = "read", "write"
#: Counter and fcounter indices of one kind of access (read or write).
_KIND: dict[str, dict[str, int]] = {
    kind: {
        "ops": C[f"POSIX_{tag}S"],
        "bytes": C["POSIX_BYTES_READ" if kind == READ else "POSIX_BYTES_WRITTEN"],
        "max_byte": C["POSIX_MAX_BYTE_READ" if kind == READ else "POSIX_MAX_BYTE_WRITTEN"],
        "consec": C[f"POSIX_CONSEC_{tag}S"],
        "seq": C[f"POSIX_SEQ_{tag}S"],
        "bucket": C[f"POSIX_SIZE_{tag}_0_100"],
        "max_size": C[f"POSIX_MAX_{tag}_TIME_SIZE"],
        "start": F[f"POSIX_F_{tag}_START_TIMESTAMP"],
        "end": F[f"POSIX_F_{tag}_END_TIMESTAMP"],
        "time": F[f"POSIX_F_{tag}_TIME"],
        "max_time": F[f"POSIX_F_MAX_{tag}_TIME"],
    }
    for kind, tag in ((READ, "READ"), (WRITE, "WRITE"))
}


#: The same indexes in one tuple per kind, in the order :meth:`PosixRecord._access` unpacks them
#: (one unpacking per recorded call instead of a dict lookup per counter).
_ACCESS: dict[str, tuple[int, ...]] = {
    kind: tuple(
        k[name]
        for name in (
            "ops",
            "bytes",
            "max_byte",
            "consec",
            "seq",
            "bucket",
            "max_size",
            "start",
            "end",
            "time",
            "max_time",
        )
    )
    for kind, k in _KIND.items()
}
_MEM_NOT_ALIGNED = C["POSIX_MEM_NOT_ALIGNED"]
_FILE_ALIGNMENT = C["POSIX_FILE_ALIGNMENT"]
_FILE_NOT_ALIGNED = C["POSIX_FILE_NOT_ALIGNED"]
_RW_SWITCHES = C["POSIX_RW_SWITCHES"]


def size_bucket(length: int) -> int:
    """Index in :data:`SIZE_BUCKETS` of an operation of ``length`` bytes (bounds inclusive)."""
    return bisect_left(BUCKET_LIMITS, length)


class Trace:
    """A bounded DXT-style trace of one rank: (path, kind, offset, length, start, end) tuples.

    ``keep="first"`` keeps the first ``limit`` operations, ``keep="last"`` a ring of the last
    ``limit``; :attr:`dropped` counts the others.
    """

    def __init__(self, limit: int, keep: str = "first"):
        if limit < 0:
            raise ValueError(f"trace limit must be >= 0, not {limit}")
        if keep not in ("first", "last"):
            raise ValueError(f"trace keep must be 'first' or 'last', not {keep!r}")
        self.limit = limit
        self.keep = keep
        self.total = 0
        self.records: deque[tuple[str, str, int, int, float, float]] | list[Any]
        self.records = deque(maxlen=limit) if keep == "last" else []

    def add(self, entry: tuple[str, str, int, int, float, float]) -> None:
        self.total += 1
        if self.keep == "last" or len(self.records) < self.limit:
            self.records.append(entry)

    @property
    def dropped(self) -> int:
        return self.total - len(self.records)

    def as_dict(self) -> dict[str, Any]:
        return {
            "limit": self.limit,
            "keep": self.keep,
            "dropped": self.dropped,
            "records": [list(entry) for entry in self.records],
        }


class PosixRecord:
    """Darshan's POSIX counters of one file on one rank, and the state its definitions need
    (the last byte read and written, the last kind of access, the ends of the last timed
    operations). Times given to the ``record_*`` methods are on the profile's clock; they are
    stored as seconds since the profile's origin."""

    __slots__ = (
        "path",
        "counters",
        "fcounters",
        "origin",
        "trace",
        "last_byte",
        "last_kind",
        "last_end",
        "events",
    )

    def __init__(
        self, path: str, origin: float = 0.0, trace: Trace | None = None, mem_alignment: int = 8
    ):
        self.path = path
        self.counters = [0] * len(COUNTERS)
        self.fcounters = [0.0] * len(FCOUNTERS)
        self.counters[C["POSIX_MMAPS"]] = -1  # not instrumented (Darshan writes -1 then)
        self.counters[C["POSIX_MEM_ALIGNMENT"]] = mem_alignment
        self.origin = origin
        self.trace = trace
        self.last_byte = {READ: 0, WRITE: 0}
        self.last_kind = ""
        self.last_end = {READ: 0.0, WRITE: 0.0, "meta": 0.0}
        #: (start, kind, offset, length) of every open ("open", 0, 0) and access, kept when
        #: another stream's operations on the file are to be merged in (``keep_events``)
        self.events: list[tuple[float, str, int, int]] | None = None

    def keep_events(self) -> None:
        """Keep this record's opens and accesses from now on, so that :meth:`absorb` can
        count the sequence counters over both streams in time order (as Darshan sees one)."""
        if self.events is None and not self.counters[C["POSIX_OPENS"]]:
            self.events = []

    def _timer(self, index: int, timer: str, start: float, end: float) -> None:
        """Darshan's timer without overlap: add ``end - max(start, last end)`` (never less
        than 0: an operation inside an earlier one adds nothing)."""
        last = self.last_end[timer]
        self.fcounters[index] += max(0.0, end - (start if start > last else last))
        if end > last:
            self.last_end[timer] = end

    def _stamp(self, first: str, last: str, start: float, end: float) -> None:
        f = self.fcounters
        i = F[first]
        if f[i] == 0 or f[i] > start:
            f[i] = start
        f[F[last]] = end

    def record_open(self, start: float, end: float, file_alignment: int = 0) -> None:
        """A successful open: resets the offsets CONSEC/SEQ compare against (as Darshan's
        open does); ``file_alignment`` (bytes, 0 = unknown) becomes POSIX_FILE_ALIGNMENT."""
        start, end = start - self.origin, end - self.origin
        self.last_byte = {READ: 0, WRITE: 0}
        self.counters[C["POSIX_OPENS"]] += 1
        if self.events is not None:
            self._event(start, "open", 0, 0)
        if file_alignment:
            self.counters[C["POSIX_FILE_ALIGNMENT"]] = file_alignment
        self._stamp("POSIX_F_OPEN_START_TIMESTAMP", "POSIX_F_OPEN_END_TIMESTAMP", start, end)
        self._timer(F["POSIX_F_META_TIME"], "meta", start, end)

    def record_mode(self, mode: int) -> None:
        """The permission bits of an open that created the file (``O_CREAT``), as Darshan
        keeps them in POSIX_MODE."""
        self.counters[C["POSIX_MODE"]] = mode

    def record_rename_to(
        self, target: PosixRecord, source_id: int, file_alignment: int = 0
    ) -> None:
        """This file renamed to ``target``'s path: POSIX_RENAME_SOURCES here, and on the target
        POSIX_RENAME_TARGETS, POSIX_RENAMED_FROM (the source's record id, ``source_id``) and,
        when not known yet, POSIX_FILE_ALIGNMENT (``file_alignment``, the block size)."""
        self.counters[C["POSIX_RENAME_SOURCES"]] += 1
        target.counters[C["POSIX_RENAME_TARGETS"]] += 1
        target.counters[C["POSIX_RENAMED_FROM"]] = source_id
        alignment = C["POSIX_FILE_ALIGNMENT"]
        target.counters[alignment] = target.counters[alignment] or file_alignment

    def record_stat(self, start: float, end: float) -> None:
        self.counters[C["POSIX_STATS"]] += 1
        self._timer(F["POSIX_F_META_TIME"], "meta", start - self.origin, end - self.origin)

    def record_close(self, start: float, end: float) -> None:
        """A close: like an open, it resets the offsets CONSEC/SEQ compare against (Darshan's
        close wrapper does)."""
        start, end = start - self.origin, end - self.origin
        self.last_byte = {READ: 0, WRITE: 0}
        if self.events is not None:
            self._event(start, "close", 0, 0)
        self._stamp("POSIX_F_CLOSE_START_TIMESTAMP", "POSIX_F_CLOSE_END_TIMESTAMP", start, end)
        self._timer(F["POSIX_F_META_TIME"], "meta", start, end)

    def record_fsync(self, start: float, end: float) -> None:
        """An fsync: counted in POSIX_FSYNCS, its time in POSIX_F_WRITE_TIME (as Darshan)."""
        self.counters[C["POSIX_FSYNCS"]] += 1
        self._timer(F["POSIX_F_WRITE_TIME"], WRITE, start - self.origin, end - self.origin)

    def record_read(
        self, offset: int, length: int, start: float, end: float, aligned: bool = True
    ) -> None:
        """One read system call of ``length`` bytes (as returned) at byte ``offset``;
        ``aligned``: every buffer's address was a multiple of POSIX_MEM_ALIGNMENT."""
        self._access(READ, offset, length, start, end, aligned)

    def record_write(
        self, offset: int, length: int, start: float, end: float, aligned: bool = True
    ) -> None:
        """One write system call; see :meth:`record_read`."""
        self._access(WRITE, offset, length, start, end, aligned)

    def _access(
        self, kind: str, offset: int, length: int, start: float, end: float, aligned: bool
    ) -> None:
        start, end = start - self.origin, end - self.origin
        if self.events is not None:
            self._event(start, kind, offset, length)
        ops, nbytes, max_byte, consec, seq, bucket, max_size, first, final, time_, max_time = (
            _ACCESS[kind]
        )
        c, f = self.counters, self.fcounters
        last = self.last_byte[kind]
        if offset > last:
            c[seq] += 1
        if offset == last + 1:
            c[consec] += 1
        self.last_byte[kind] = offset + length - 1
        if c[max_byte] < offset + length - 1:
            c[max_byte] = offset + length - 1
        c[nbytes] += length
        c[ops] += 1
        c[bucket + bisect_left(BUCKET_LIMITS, length)] += 1
        if not aligned:
            c[_MEM_NOT_ALIGNED] += 1
        alignment = c[_FILE_ALIGNMENT]
        if alignment > 0 and offset % alignment:
            c[_FILE_NOT_ALIGNED] += 1
        if self.last_kind and self.last_kind != kind:
            c[_RW_SWITCHES] += 1
        self.last_kind = kind
        if f[first] == 0 or f[first] > start:
            f[first] = start
        f[final] = end
        if f[max_time] < end - start:
            f[max_time] = end - start
            c[max_size] = length
        self._timer(time_, kind, start, end)
        if self.trace is not None:
            self.trace.add((self.path, kind, offset, length, start, end))

    def _event(self, start: float, kind: str, offset: int, length: int) -> None:
        assert self.events is not None
        if len(self.events) >= MAX_EVENTS:
            self.events = None  # too many to keep: the streams are counted apart
            return
        self.events.append((start, kind, offset, length))

    def _merge_sequences(self, other: PosixRecord) -> None:
        """CONSEC, SEQ and RW_SWITCHES counted again over both records' operations in time
        order (opens and closes resetting the last bytes), as Darshan counts one file's operations
        whoever makes them; both records must have kept their events."""
        assert self.events is not None and other.events is not None
        self.events = sorted(self.events + other.events, key=lambda e: e[0])
        c = self.counters
        for kind in (READ, WRITE):
            c[_KIND[kind]["consec"]] = c[_KIND[kind]["seq"]] = 0
        c[C["POSIX_RW_SWITCHES"]] = 0
        last_byte, last_kind = {READ: 0, WRITE: 0}, ""
        for _, kind, offset, length in self.events:
            if kind in ("open", "close"):
                last_byte = {READ: 0, WRITE: 0}
                continue
            k = _KIND[kind]
            c[k["seq"]] += offset > last_byte[kind]
            c[k["consec"]] += offset == last_byte[kind] + 1
            last_byte[kind] = offset + length - 1
            c[C["POSIX_RW_SWITCHES"]] += bool(last_kind) and last_kind != kind
            last_kind = kind
        self.last_byte, self.last_kind = last_byte, last_kind

    def absorb(self, other: PosixRecord) -> None:
        """Add the counters of another record of the same file on this rank (HDF5's operations,
        counted apart from RawFile's so that each stream's timers see its operations in
        order): sums, the larger highest byte and slowest operation, the earlier start and the
        later end of each timestamp pair."""
        c, f, o, of = self.counters, self.fcounters, other.counters, other.fcounters
        for name, i in C.items():
            if name in ("POSIX_MAX_BYTE_READ", "POSIX_MAX_BYTE_WRITTEN"):
                c[i] = max(c[i], o[i])
            elif name in (
                "POSIX_FILE_ALIGNMENT",
                "POSIX_MEM_ALIGNMENT",
                "POSIX_MMAPS",
                "POSIX_MODE",
                "POSIX_RENAMED_FROM",
            ):
                c[i] = c[i] or o[i]
            elif not name.startswith("POSIX_MAX_") or not name.endswith("_TIME_SIZE"):
                c[i] += o[i]
        for kind in ("READ", "WRITE"):
            if of[F[f"POSIX_F_MAX_{kind}_TIME"]] > f[F[f"POSIX_F_MAX_{kind}_TIME"]]:
                f[F[f"POSIX_F_MAX_{kind}_TIME"]] = of[F[f"POSIX_F_MAX_{kind}_TIME"]]
                c[C[f"POSIX_MAX_{kind}_TIME_SIZE"]] = o[C[f"POSIX_MAX_{kind}_TIME_SIZE"]]
        for name, i in F.items():
            if name.endswith("_START_TIMESTAMP"):
                f[i] = min((v for v in (f[i], of[i]) if v != 0), default=0.0)
            elif name.endswith("_END_TIMESTAMP"):
                f[i] = max(f[i], of[i]) if f[i] and of[i] else f[i] or of[i]
            elif name.endswith(("_READ_TIME", "_WRITE_TIME", "_META_TIME")) and "MAX" not in name:
                f[i] += of[i]
        if self.events is not None and other.events is not None:
            self._merge_sequences(other)
        else:
            self.events = None  # one stream not kept whole: each counted apart from now on

    def as_dict(self) -> dict[str, Any]:
        """The counters by name (``counters``: ints, ``fcounters``: seconds)."""
        return {
            "counters": dict(zip(COUNTERS, self.counters)),
            "fcounters": dict(zip(FCOUNTERS, self.fcounters)),
        }


class Phases:
    """Seconds and interval counts of h5subfile's own phases on one rank (inclusive: a phase
    entered inside another is timed in both; re-entered while running, it is timed once)."""

    def __init__(self, clock: Callable[[], float] = time.monotonic):
        self.clock = clock
        self.seconds: dict[str, float] = {}
        self.counts: dict[str, int] = {}
        self._running: set[str] = set()

    def add(self, name: str, seconds: float, count: int = 1) -> None:
        """Add ``count`` intervals of ``seconds`` in all to phase ``name``."""
        if name not in PHASES:
            raise ValueError(f"unknown phase {name!r}; phases are {', '.join(PHASES)}")
        self.seconds[name] = self.seconds.get(name, 0.0) + seconds
        self.counts[name] = self.counts.get(name, 0) + count

    @contextmanager
    def timed(self, name: str) -> Iterator[None]:
        """Time the ``with`` body as one interval of phase ``name``."""
        if name in self._running:
            yield
            return
        self._running.add(name)
        started = self.clock()
        try:
            yield
        finally:
            self._running.discard(name)
            self.add(name, self.clock() - started)

    def as_dict(self) -> dict[str, dict[str, float]]:
        return {
            name: {"seconds": self.seconds[name], "count": self.counts[name]}
            for name in PHASES
            if name in self.counts
        }


class Profile:
    """One rank's profile: a :class:`PosixRecord` per file (by absolute path), the trace (when
    ``trace_limit`` > 0) and the phases. ``origin``: the clock's reading that timestamps are
    counted from (the session's open)."""

    def __init__(
        self,
        rank: int = 0,
        clock: Callable[[], float] = time.monotonic,
        origin: float | None = None,
        trace_limit: int = 0,
        keep: str = "first",
        mem_alignment: int = MEM_ALIGNMENT,
    ):
        self.rank = rank
        self.clock = clock
        self.origin = clock() if origin is None else origin
        self.trace = Trace(trace_limit, keep) if trace_limit > 0 else None
        self.phases = Phases(clock)
        self.mem_alignment = mem_alignment
        self.records: dict[str, PosixRecord] = {}
        self.unparsed = 0  # HDF5 log lines that could not be read (docs/PROFILING.md)
        #: HDF5 files opened with the log driver: (path, log file, the open's start, created)
        self.hdf5_logs: list[tuple[str, str, float, bool]] = []

    def record(self, path: str) -> PosixRecord:
        """The record of ``path`` (absolute), made on first use."""
        rec = self.records.get(path)
        if rec is None:
            rec = self.records[path] = PosixRecord(
                path, self.origin, self.trace, self.mem_alignment
            )
        return rec

    def aligned(self, *buffers: memoryview) -> bool:
        """Whether every buffer's address is a multiple of the memory alignment."""
        return all(_address(b) % self.mem_alignment == 0 for b in buffers)

    @staticmethod
    def address(buffer: memoryview) -> int:
        """The address of a buffer's first byte (for :meth:`aligned_at`)."""
        return _address(buffer)

    def aligned_at(self, address: int) -> bool:
        """Whether ``address`` is a multiple of the memory alignment (a slice of a buffer is
        at the buffer's :meth:`address` plus its offset: no lookup per slice)."""
        return address % self.mem_alignment == 0

    def as_dict(self) -> dict[str, Any]:
        """Plain data (picklable, JSON-ready) for the gather at close."""
        return {
            "rank": self.rank,
            "records": [{"path": path, **rec.as_dict()} for path, rec in self.records.items()],
            "phases": self.phases.as_dict(),
            "trace": self.trace.as_dict() if self.trace is not None else None,
            "unparsed": self.unparsed,
        }


def _address(buffer: memoryview) -> int:
    """The address of a buffer's first byte (numpy reads it from the buffer protocol)."""
    return int(np.frombuffer(buffer, dtype=np.uint8).ctypes.data) if len(buffer) else 0


#: One operation line of HDF5's log driver (LOG_LOC_IO with LOG_TIME_IO), e.g.
#: ``      2048-     10047 (      8000 bytes) (H5FD_MEM_DRAW) Written (0.000070s @ 30355.1)``
_LOG_LINE = re.compile(
    r"^\s*(\d+)-\s*(\d+)\s+\(\s*(\d+) bytes\)\s+\((\w+)\)\s+(Read|Written)"
    r"\s+\(([\d.eE+-]+)s @ ([\d.eE+-]+)\)\s*$"
)
#: Lines of the log that carry no operation to count.
_LOG_SKIP = re.compile(
    r"^(Open took|Close took|Total |Dumping |\s*Address|\s*$|Flavor|Opened|Closed)"
)


def replay_hdf5_log(record: PosixRecord, text: str) -> int:
    """Feed the operations HDF5's log driver wrote for one open of ``record``'s file into it
    (reads and writes with their offsets, lengths and times; ``Stat took`` as one stat whose
    time is already inside the open's). Returns how many lines could not be read."""
    unparsed = 0
    for line in text.splitlines():
        match = _LOG_LINE.match(line)
        if match:
            first, last, length, _, verb, took, at = match.groups()
            start = float(at)
            end = start + float(took)
            if int(last) - int(first) + 1 != int(length):
                unparsed += 1
            elif verb == "Read":
                record.record_read(int(first), int(length), start, end)
            else:
                record.record_write(int(first), int(length), start, end)
        elif line.startswith("Stat took"):
            record.counters[C["POSIX_STATS"]] += 1
        elif not _LOG_SKIP.match(line):
            unparsed += 1
    return unparsed
