"""Write-behind (``File(..., async_writes=True)``): one background thread per write session
performs the session's writes in the order they were submitted, while the caller goes on.

- **Ownership.** :meth:`WriteBehind.submit` copies the pieces' bytes into memory the queue
  owns before it returns, so the caller may reuse or change its buffers at once; buffers the
  library made for the write and never touches again are handed over without a copy
  (``owned=True``: two-phase windows, compressed chunks). The copies go into one ring buffer
  of ``limit`` bytes, reused for the session's life: its pages are faulted in once, not on
  every step (a fresh buffer per write costs more in page faults than the copy itself:
  docs/BENCHMARKS-HISTORY.md, *Write patterns against their baselines, before and after*),
  by a thread of their own as the session opens (:meth:`WriteBehind.prepare`), or by the
  first copy.
- **Hashing.** A write may come with a hasher (:meth:`WriteBehind.submit`): the background
  thread feeds it each slice of the copy just before writing that slice (as
  :meth:`~.posix.RawFile.write_hashed` does in the caller), so the caller's share is the copy
  alone; the copy is the caller's bytes at the call, so the checksum is of them. Written
  from the caller's arrays (``owned``, ``async_zero_copy``), the checksum is of the bytes as
  written, and one byte in :data:`SAMPLE_STRIDE` is taken at the call and compared once
  they are written: a difference (the caller changed an array too early) marks the hasher
  (``changed_early``), so that the block is recorded as not holding what was passed.
- **Bound.** The queue holds at most ``limit`` bytes (copied or handed over, not yet written):
  a submit waits while its bytes would go beyond it. A write larger than the whole buffer is
  cut into parts that each fit, queued one after the other.
- **Errors.** The first error met in the background is kept, mapped into the hierarchy
  (:func:`~h5subfile.errors.as_error`) with the file named; no later job is attempted (its
  bytes are dropped) and every job not done is listed by :meth:`WriteBehind.lost`, so that the
  session leaves out what they held. :meth:`WriteBehind.error` looks without waiting,
  :meth:`WriteBehind.wait` drains the queue first; a submit after an error raises it.
- **Files** are opened in the background, on their first write (``opener``), so a file that
  cannot be opened is a background error like a failed write.
- **Counting.** The background writes go through :class:`~.posix.RawFile`, counted in the
  session's ``IOStats`` (and profile) as ever; while the queue is in use the caller does no
  positioned I/O of its own on the session's counters (reads wait for the queue first), so
  no count is updated from two threads. The caller's time in :meth:`~WriteBehind.submit` and
  :meth:`~WriteBehind.wait` (copying, waiting for room or for the writes) is
  ``IOStats.async_wait_seconds``.

One thread submits (the rank's own); positioned writes release the GIL, so the caller's work
overlaps them.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..errors import as_error, keep_errno
from .posix import IOStats, Piece, RawFile

#: Seconds :meth:`WriteBehind.stop` waits for the job under way to end (it cannot be cut).
STOP_WAIT = 30.0
#: Writing behind from the caller's arrays with a hasher, one byte in this many is copied at
#: the call and compared once the bytes are written (a prime: the bytes sampled walk through
#: every byte of an element). Checking them costs a few milliseconds per 256 MiB, where
#: hashing the arrays at the call costs the caller a hash of every byte (its row in
#: docs/BENCHMARKS.md, *Writing behind, chosen call by call*: more than the sample's check).
SAMPLE_STRIDE = 4093


@dataclass(frozen=True)
class Lost:
    """What a job that failed or was dropped did not store in ``file``: byte ``ranges``
    ([start, end) each), or the chunks of source ``dataset`` in it, or (neither) anything
    this session wrote there."""

    file: str
    ranges: tuple[tuple[int, int], ...] = ()
    dataset: str = ""


@dataclass(frozen=True)
class _Job:
    run: Callable[[], None]
    nbytes: int  # counted against the bound until the job is done
    lost: tuple[Lost, ...]
    file: str  # named in the error if it fails
    ring: int = 0  # bytes of the ring buffer the job holds (its copy, and a gap skipped)


def split(pieces: Sequence[Piece], limit: int) -> list[list[Piece]]:
    """The pieces in parts of at most ``limit`` bytes each, in order (a piece larger than
    what is left of a part is cut); empty pieces are dropped."""
    parts: list[list[Piece]] = []
    current: list[Piece] = []
    size = 0
    for offset, data in pieces:
        done = 0
        while done < len(data):
            if size == limit:
                parts.append(current)
                current, size = [], 0
            take = min(len(data) - done, limit - size)
            current.append((offset + done, data[done : done + take]))
            size += take
            done += take
    if current:
        parts.append(current)
    return parts


def byte_ranges(pieces: Sequence[Piece]) -> tuple[tuple[int, int], ...]:
    """The [start, end) ranges the pieces cover, neighbours merged."""
    ranges: list[tuple[int, int]] = []
    for offset, data in sorted(pieces, key=lambda piece: piece[0]):
        end = offset + len(data)
        if ranges and offset <= ranges[-1][1]:
            ranges[-1] = (ranges[-1][0], max(end, ranges[-1][1]))
        else:
            ranges.append((offset, end))
    return tuple(ranges)


def _copied(part: Sequence[Piece], ring: np.ndarray, at: int) -> list[Piece]:
    """The part's pieces, their bytes copied into ``ring`` from byte ``at`` on."""
    view = ring.data
    copied: list[Piece] = []
    for offset, data in part:
        length = len(data)
        ring[at : at + length] = np.frombuffer(data, dtype=np.uint8)
        copied.append((offset, view[at : at + length]))
        at += length
    return copied


def kept_error(
    exc: BaseException, file: str, how: str = "in the background: async_writes"
) -> BaseException:
    """``exc``, met by a write to ``file`` made after the call that asked for it (``how``), as
    the error of the hierarchy it maps to, saying where and how (errno kept)."""
    mapped = as_error(exc)
    where = "" if file in str(mapped) else f", writing {file}"
    error = type(mapped)(f"{mapped}{where} ({how})")
    keep_errno(error, getattr(mapped, "errno", None))
    error.__cause__ = exc
    return error


class WriteBehind:
    """The write-behind queue of one write session on one rank (see the module's docstring).

    Parameters
    ----------
    limit
        The most bytes held at once (bytes).
    opener
        Opens a file by path for writing (called in the background, on its first write).
    stats
        Where the caller's time in submit and wait is counted (``async_wait_seconds``).
    """

    def __init__(self, limit: int, opener: Callable[[str], RawFile], stats: IOStats) -> None:
        if limit < 1:
            raise ValueError(f"write-behind limit must be positive, not {limit}")
        self.limit = limit
        self.opener = opener
        self.stats = stats
        self.high_water = 0  # the most bytes held at once so far
        self._cond = threading.Condition()
        self._jobs: deque[_Job] = deque()
        self._held = 0
        self._error: BaseException | None = None
        self._lost: list[Lost] = []
        self._closing = False  # no more jobs: the thread ends once the queue is empty
        self._dropping = False  # queued jobs are dropped, not run (abandon)
        self._thread: threading.Thread | None = None
        #: where copies go (allocated on the first copy), the next copy's place, and the ring's
        #: bytes held by jobs not done (FIFO: jobs end in the order they were queued)
        self._ring: np.ndarray | None = None
        self._ring_at = 0
        self._ring_held = 0
        #: the thread waits while the caller hands over one call's writes (:meth:`holding`)
        self._holding = False
        #: the caller's time waiting for room (in ``async_wait_seconds`` too)
        self.room_seconds = 0.0
        #: told each background write's bytes and seconds (:meth:`~.ways.Ways.wrote`)
        self.on_written: Callable[[int, float], None] | None = None
        self._preparing: threading.Thread | None = None

    # the caller's side ------------------------------------------------------------------------
    def submit(
        self,
        target: RawFile | str,
        pieces: Sequence[Piece],
        owned: bool = False,
        hasher: Any = None,
    ) -> None:
        """Queue a positioned write of ``pieces`` to ``target`` (a file, or a path opened in the
        background); returns once the queue holds their bytes (copied unless ``owned``: then
        the caller never touches those buffers again). ``hasher`` (``update(bytes)``): fed the
        pieces' bytes in order, in the background, each slice just before it is written.
        Waits while the queue is full; raises the error kept from an earlier job."""
        started = time.perf_counter()
        try:
            path = target if isinstance(target, str) else target.path
            for part in split(pieces, self.limit):
                nbytes = sum(len(data) for _, data in part)
                at, ring = self._reserve(nbytes, copy=not owned)
                try:
                    held = part if owned else _copied(part, self._ring_buffer(), at)
                except BaseException:
                    self._release(nbytes, ring)
                    raise
                sample = _sample(part) if owned and hasher is not None else None
                write = _writer(self.opener, target, held, hasher, sample)
                self._push(_Job(write, nbytes, (Lost(path, byte_ranges(held)),), path, ring))
        finally:
            self.stats.async_wait_seconds += time.perf_counter() - started

    @contextlib.contextmanager
    def holding(self) -> Iterator[None]:
        """While the caller hands over one call's writes, the thread writes none of them (its
        writes would take a core from the caller's copies); it starts when the call's last
        write is queued, or when a submit must wait for room."""
        with self._cond:
            self._holding = True
        try:
            yield
        finally:
            with self._cond:
                self._holding = False
                self._cond.notify_all()

    def prepare(self) -> None:
        """Fault the ring in now, in a thread of its own, so that no copy pays for it (a
        page fault costs more than the copy of its page: the first copy into a fresh buffer
        against a copy into a touched one, docs/BENCHMARKS.md, *Writing behind, chosen call
        by call*)."""
        if self._ring is not None or self._preparing is not None:
            return
        self._preparing = threading.Thread(
            target=self._fault_in, name="h5subfile-write-behind-ring", daemon=True
        )
        self._preparing.start()

    @property
    def ready(self) -> bool:
        """Whether the ring is faulted in (:meth:`prepare`), so that a copy costs a copy."""
        return self._ring is not None and (
            self._preparing is None or not self._preparing.is_alive()
        )

    def _fault_in(self) -> None:
        ring = np.empty(self.limit, dtype=np.uint8)
        ring.fill(0)  # numpy lets go of the GIL for this: the caller goes on
        self._ring = ring

    def submit_call(
        self, work: Callable[[], None], nbytes: int, lost: tuple[Lost, ...], file: str
    ) -> None:
        """Queue ``work`` (it writes ``file``, holding ``nbytes`` bytes the caller handed over,
        counted against the bound; ``lost``: what it stores, should it fail or be dropped)."""
        started = time.perf_counter()
        try:
            nbytes = min(nbytes, self.limit)  # one job larger than the buffer still goes
            self._reserve(nbytes)
            self._push(_Job(work, nbytes, lost, file))
        finally:
            self.stats.async_wait_seconds += time.perf_counter() - started

    def wait(self) -> BaseException | None:
        """Wait until every queued job is done; the kept error, if any (not raised)."""
        started = time.perf_counter()
        with self._cond:
            self._holding = False  # the writes waited for must run
            self._cond.notify_all()
            while self._jobs and self._alive():
                self._cond.wait(0.5)
            self._drop_if_dead()
            error = self._error
        self.stats.async_wait_seconds += time.perf_counter() - started
        return error

    def error(self) -> BaseException | None:
        """The first error met in the background so far (None), without waiting."""
        return self._error

    def lost(self) -> list[Lost]:
        """What the jobs that failed or were dropped did not store."""
        with self._cond:
            return list(self._lost)

    @property
    def held(self) -> int:
        """Bytes held now (queued or being written)."""
        return self._held

    def close(self) -> None:
        """Wait for the queued jobs, then end the thread (a later submit raises)."""
        self.wait()
        self._end(drop=False, timeout=None)

    def stop(self, timeout: float = STOP_WAIT) -> bool:
        """Drop the queued jobs and end the thread (abandoning the session): waits at most
        ``timeout`` seconds for the job under way. Returns whether the thread ended."""
        return self._end(drop=True, timeout=timeout)

    # inside -----------------------------------------------------------------------------------
    def _reserve(self, nbytes: int, copy: bool = False) -> tuple[int, int]:
        """Wait for room for ``nbytes`` more bytes (and, for a ``copy``, for a place in the
        ring); returns the place's offset in the ring and the ring bytes it takes (the copy,
        and the end of the ring skipped when the copy does not fit there)."""
        waited = time.perf_counter()
        with self._cond:
            while self._error is None and not self._fits(nbytes, copy):
                if self._holding:  # the thread must make room: no longer held
                    self._holding = False
                    self._cond.notify_all()
                if not self._alive():
                    self._drop_if_dead()
                    break
                self._cond.wait(0.5)
            self.room_seconds += time.perf_counter() - waited
            if self._error is not None:
                raise self._error
            if self._closing:
                raise RuntimeError("the write-behind queue is closed")
            self._held += nbytes
            self.high_water = max(self.high_water, self._held)
            if not copy:
                return 0, 0
            at, taken = self._ring_place(nbytes)
            self._ring_at, self._ring_held = at + nbytes, self._ring_held + taken
            return at, taken

    def _fits(self, nbytes: int, copy: bool) -> bool:
        """Under the lock: whether ``nbytes`` more fit the bound (a job always fits an empty
        queue) and, for a copy, the ring's free part."""
        if self._held and self._held + nbytes > self.limit:
            return False
        return not copy or self._ring_place(nbytes)[1] <= self.limit - self._ring_held

    def _ring_place(self, nbytes: int) -> tuple[int, int]:
        """Under the lock: where the next copy of ``nbytes`` goes in the ring, and the ring
        bytes it takes. The ring's held bytes run from its oldest job's copy to ``_ring_at``;
        a copy that would pass the ring's end goes to its start, the end skipped."""
        if self._ring_held == 0:
            self._ring_at = 0
        at = self._ring_at
        if at + nbytes > self.limit:
            return 0, self.limit - at + nbytes
        return at, nbytes

    def _ring_buffer(self) -> np.ndarray:
        """The ring (one caller thread submits: allocated by it on its first copy, unless
        :meth:`prepare` faults it in; a copy waits for that to end)."""
        if self._preparing is not None:
            self._preparing.join()
        if self._ring is None:
            self._ring = np.empty(self.limit, dtype=np.uint8)
        return self._ring

    def _release(self, nbytes: int, ring: int = 0) -> None:
        with self._cond:
            self._held -= nbytes
            self._ring_held -= ring
            self._cond.notify_all()

    def _push(self, job: _Job) -> None:
        with self._cond:
            self._jobs.append(job)
            if self._thread is None:
                self._thread = threading.Thread(
                    target=self._run, name="h5subfile-write-behind", daemon=True
                )
                self._thread.start()
            self._cond.notify_all()

    def _alive(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    def _drop_if_dead(self) -> None:
        """Under the lock: jobs left by a thread that ended (never expected) are lost."""
        if self._jobs and not self._alive():
            if self._error is None:
                self._error = RuntimeError("the write-behind thread ended with writes queued")
            while self._jobs:
                job = self._jobs.popleft()
                self._held -= job.nbytes
                self._ring_held -= job.ring
                self._lost.extend(job.lost)

    def _end(self, drop: bool, timeout: float | None) -> bool:
        with self._cond:
            self._closing = True
            self._dropping = self._dropping or drop
            thread = self._thread
            self._cond.notify_all()
        if thread is None:
            return True
        thread.join(timeout)
        return not thread.is_alive()

    def _run(self) -> None:
        """The background thread: run the jobs in order; after an error, drop the rest."""
        while True:
            with self._cond:
                while (not self._jobs or self._holding) and not self._closing:
                    self._cond.wait()
                if not self._jobs:
                    return
                job = self._jobs[0]
                skip = self._error is not None or self._dropping
            failure: BaseException | None = None
            if not skip:
                started = time.perf_counter()
                try:
                    job.run()
                except BaseException as exc:  # noqa: BLE001 - kept, raised by the caller
                    failure = exc
                if failure is None and self.on_written is not None:
                    self.on_written(job.nbytes, time.perf_counter() - started)
            with self._cond:
                self._jobs.popleft()
                self._held -= job.nbytes
                self._ring_held -= job.ring
                if failure is not None and self._error is None:
                    self._error = kept_error(failure, job.file)
                if skip or failure is not None:
                    self._lost.extend(job.lost)
                self._cond.notify_all()


def _sample(pieces: Sequence[Piece]) -> list[np.ndarray]:
    """One byte in :data:`SAMPLE_STRIDE` of each piece, copied now."""
    return [np.frombuffer(data, np.uint8)[::SAMPLE_STRIDE].copy() for _, data in pieces]


def _unchanged(pieces: Sequence[Piece], sample: list[np.ndarray]) -> bool:
    """Whether the pieces still hold the bytes :func:`_sample` took."""
    return all(
        np.array_equal(np.frombuffer(data, np.uint8)[::SAMPLE_STRIDE], taken)
        for (_, data), taken in zip(pieces, sample)
    )


def _writer(
    opener: Callable[[str], RawFile],
    target: RawFile | str,
    pieces: list[Piece],
    hasher: Any = None,
    sample: list[np.ndarray] | None = None,
) -> Callable[[], None]:
    def write() -> None:
        raw = opener(target) if isinstance(target, str) else target
        if hasher is None:
            raw.write_pieces(pieces)
            return
        raw.write_hashed(pieces, hasher)
        if sample is not None and not _unchanged(pieces, sample):
            hasher.changed_early = True  # the caller changed its arrays too early

    return write


class QueuedFile:
    """A file of a write-behind pool (:class:`~.pool.FilePool`): ``write_pieces`` hands the
    pieces to the queue and returns; the file is opened and written in the background."""

    def __init__(self, path: str, queue: WriteBehind) -> None:
        self.path = path
        self.queue = queue

    def write_pieces(self, pieces: list[Piece], owned: bool = False) -> None:
        """Queue the pieces (copied unless ``owned``: see :meth:`WriteBehind.submit`)."""
        self.queue.submit(self.path, pieces, owned)

    def write_hashed(self, pieces: list[Piece], hasher: Any, owned: bool = False) -> None:
        """Queue the pieces (a copy unless ``owned``), ``hasher`` fed them in the background
        as they are written (:meth:`WriteBehind.submit`)."""
        self.queue.submit(self.path, pieces, owned, hasher=hasher)
