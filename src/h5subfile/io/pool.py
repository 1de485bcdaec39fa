"""A session's open data files (:class:`FilePool`): opened on first use, closed together; their
writers are the files themselves, :class:`CombinedFile` (consecutive small writes combined in
one buffer) or, writing behind, the queue's :class:`~.writebehind.QueuedFile`."""

from __future__ import annotations

import contextlib
import time
from collections.abc import Collection, Iterator
from typing import Any

import numpy as np

from .posix import WRITE_SLICE, IOStats, Piece, PieceWriter, RawFile
from .ways import COPY, DIRECT, ZERO_COPY, Ways
from .writebehind import Lost, QueuedFile, WriteBehind, kept_error

#: Writes smaller than this that continue the one before them in the same file are combined in
#: a buffer of :data:`WRITE_SLICE` bytes (at most the plan's ``buffer_size``) and written in one
#: call (:class:`FilePool`): fewer calls, each holding a shared file's write lock once
#: (docs/BENCHMARKS-HISTORY.md, *Write patterns against their baselines, before and after*,
#: the 64 KiB row).
COMBINE_BELOW = 256 << 10


#: The context of a write call of a pool without a queue: written by the caller.
_IN_CALLER = contextlib.nullcontext(DIRECT)


class FilePool:
    """Open :class:`RawFile` objects by path, opened on first use and closed together.

    ``write_behind`` (bytes; writable pools): the pool's writers hand their writes to a
    :class:`~.writebehind.WriteBehind` queue holding at most that many bytes; its thread opens
    and writes the files, and :meth:`sync_all`, :meth:`close_all` wait for it first;
    :meth:`choose_ways` lets each call (:meth:`call`) write behind or directly, whichever
    costs the caller less (:class:`~.ways.Ways`; else every call writes behind).
    ``transfer_size``: the largest system call (None: writes of at most :data:`WRITE_SLICE`,
    reads up to :data:`MAX_TRANSFER`).

    ``combine`` (bytes; writable pools without write-behind): small writes that continue the
    one before them in the same file are copied into a buffer of that many bytes and written
    in one call once it is full, or at the next write that does not continue them, or at
    :meth:`wait` (every read and every collective call of the session waits), :meth:`sync_all`
    and :meth:`close_all`. A failed combined write is kept as write-behind keeps its errors:
    raised by the call that made it, returned by :meth:`error` and :meth:`wait` from then on,
    its bytes listed by :meth:`lost`.
    """

    def __init__(
        self,
        writable: bool,
        stats: IOStats,
        transfer_size: int | None = None,
        write_behind: int | None = None,
        combine: int | None = None,
    ):
        self.writable = writable
        self.stats = stats
        self.transfer_size = transfer_size
        self._files: dict[str, RawFile] = {}
        #: the write-behind queue (None: writes are made by the caller)
        self.queue = WriteBehind(write_behind, self.get, stats) if write_behind else None
        #: writing behind, how each call goes (None: every call behind)
        self.ways: Ways | None = None
        self.direct = False  # the call under way writes directly (:meth:`call`)
        self._queued: dict[str, QueuedFile] = {}
        self._combiners: dict[str, CombinedFile] = {}
        self.combine = 0 if write_behind or not combine else min(combine, WRITE_SLICE)
        self._combine_error: BaseException | None = None
        self._combine_lost: list[Lost] = []

    def get(self, path: str) -> RawFile:
        """The open file at ``path`` (opened now if needed). With write-behind, only the
        queue's thread calls it until the queue is drained."""
        handle = self._files.get(path)
        if handle is None:
            handle = self._files[path] = RawFile(
                path,
                self.writable,
                self.stats,
                transfer_size=self.transfer_size,
                write_size=self.transfer_size or WRITE_SLICE,
            )
        return handle

    def writer(self, path: str) -> PieceWriter:
        """What writes to ``path``: the file itself, a :class:`CombinedFile` combining small
        writes (``combine``), or with write-behind a :class:`~.writebehind.QueuedFile` whose
        writes go through the queue."""
        if self.queue is None or self.direct:
            if not self.combine:
                return self.get(path)
            combined = self._combiners.get(path)
            if combined is None:
                combined = self._combiners[path] = CombinedFile(path, self)
            return combined
        queued = self._queued.get(path)
        if queued is None:
            queued = self._queued[path] = QueuedFile(path, self.queue)
        return queued

    def choose_ways(self, zero_copy: bool, always: bool) -> None:
        """Writing behind, let each call choose its way (:class:`~.ways.Ways`): behind from
        the caller's arrays (``zero_copy``) or from a copy (whose ring is faulted in now, in
        the background), or directly; ``always``: every call behind."""
        if self.queue is None:
            return
        self.ways = Ways(ZERO_COPY if zero_copy else COPY, always)
        self.queue.on_written = self.ways.wrote
        if not zero_copy:
            self.queue.prepare()

    def call(self, nbytes: int, choose: bool = True) -> contextlib.AbstractContextManager[str]:
        """One write call of ``nbytes`` (writing behind): its way, chosen by :attr:`ways`
        (``choose``; else behind). Writing directly, the queue is drained first (its writes
        come first, and no two threads write at once); the call's time is the caller's (counted in
        ``async_wait_seconds``, and by :attr:`ways`). Writing behind, the queue's thread
        writes nothing of the call until it has handed over all of it
        (:meth:`~.writebehind.WriteBehind.holding`). Without a queue, nothing (a shared
        context: no cost per call)."""
        if self.queue is None or self.ways is None:
            return _IN_CALLER
        return self._call(self.queue, self.ways, nbytes, choose)

    @contextlib.contextmanager
    def _call(self, queue: WriteBehind, ways: Ways, nbytes: int, choose: bool) -> Iterator[str]:
        way = ways.choose(nbytes, queue.held, queue.ready) if choose else ways.behind
        if way == DIRECT:
            queue.wait()  # its error is kept, and raised at the next collective call
        started, room = time.perf_counter(), queue.room_seconds
        self.direct = way == DIRECT
        try:
            with queue.holding():
                yield way
        finally:
            self.direct = False
            seconds = time.perf_counter() - started
            if way == DIRECT:
                self.stats.async_wait_seconds += seconds
            ways.called(way, nbytes, seconds - (queue.room_seconds - room))

    @property
    def writes_in_caller(self) -> bool:
        """Whether writes are made by the caller (no write-behind queue, or this call writes
        directly): :meth:`get`'s files are then the writers."""
        return self.queue is None or self.direct

    @property
    def zero_copy(self) -> bool:
        """Whether this call's writes go behind from the caller's arrays (``async_zero_copy``,
        and writing behind)."""
        return not self.writes_in_caller and self.ways is not None and self.ways.behind == ZERO_COPY

    def wait(self) -> BaseException | None:
        """Write the combined writes and wait for the queued ones (if any); the first error
        either met, or None."""
        self.flush_combined()
        if self._combine_error is not None:
            return self._combine_error
        return None if self.queue is None else self.queue.wait()

    def error(self) -> BaseException | None:
        """The first error met by the queued or combined writes so far, without waiting."""
        if self._combine_error is not None:
            return self._combine_error
        return None if self.queue is None else self.queue.error()

    def lost(self) -> list[Lost]:
        """What the queued or combined writes that failed (or were dropped) did not store."""
        return (self.queue.lost() if self.queue is not None else []) + self._combine_lost

    def flush_combined(self) -> None:
        """Write every file's combined writes; a failure is kept (:meth:`error`)."""
        for combined in self._combiners.values():
            try:
                combined.flush()
            except Exception:  # noqa: BLE001 - kept by the file, returned by error()
                pass

    def sync_all(self, later: Collection[str] = ()) -> None:
        """Wait for the writes, then fsync every file but those in ``later`` (paths the
        caller fsyncs itself once more is written to them: one fsync per file)."""
        self.wait()
        for path, handle in self._files.items():
            if path not in later:
                handle.sync()

    def close_all(self) -> None:
        self.flush_combined()
        if self.queue is not None:
            self.queue.close()
        files, self._files = self._files, {}
        for handle in files.values():
            handle.close()

    def abandon(self) -> None:
        """Close without waiting for queued writes (they are dropped, as are the combined
        ones); a file the queue's thread may still be writing (it did not end in time) is
        left open."""
        for combined in self._combiners.values():
            combined.drop()
        if self.queue is not None and not self.queue.stop():
            return
        self.close_all()


class CombinedFile:
    """A file of a :class:`FilePool` whose small writes that continue each other are combined
    in one buffer and written in one call (see :class:`FilePool`, ``combine``)."""

    def __init__(self, path: str, pool: FilePool) -> None:
        self.path = path
        self.pool = pool
        pool.get(path)  # opened now, as a writer is (before any hashing starts)
        self.buffer = np.empty(pool.combine, dtype=np.uint8)  # reused: faulted in once
        self.start = 0  # the file offset of the buffer's first byte
        self.used = 0

    def write_pieces(self, pieces: list[Piece], owned: bool = False) -> None:
        """Combine one small piece that continues the buffer (or starts it), else write the
        buffer, then the pieces. After a failed combined write nothing more is written: its
        error is raised."""
        if self.pool._combine_error is not None:
            raise self.pool._combine_error
        if len(pieces) == 1:
            offset, data = pieces[0]
            length = len(data)
            if length < COMBINE_BELOW and length <= len(self.buffer):
                if self.used and (
                    offset != self.start + self.used or self.used + length > len(self.buffer)
                ):
                    self.flush()  # not its continuation, or no room: a new buffer
                if not self.used:
                    self.start = offset
                self.buffer[self.used : self.used + length] = np.frombuffer(data, np.uint8)
                self.used += length
                if self.used == len(self.buffer):
                    self.flush()
                return
        self.flush()
        self.pool.get(self.path).write_pieces(pieces)

    def write_hashed(self, pieces: list[Piece], hasher: Any, owned: bool = False) -> None:
        self.flush()
        self.pool.get(self.path).write_hashed(pieces, hasher)

    def flush(self) -> None:
        """Write the buffer (one call); an error is kept by the pool and raised."""
        if not self.used:
            return
        start, used = self.start, self.used
        self.used = 0
        pool = self.pool
        if pool._combine_error is not None:  # an earlier failure: nothing more is written
            pool._combine_lost.append(Lost(self.path, ((start, start + used),)))
            raise pool._combine_error
        try:
            pool.get(self.path).write_pieces([(start, self.buffer.data[:used])])
        except Exception as exc:
            how = f"bytes {start}-{start + used} of small writes combined into one call"
            kept = kept_error(exc, self.path, how)
            pool._combine_error = kept
            pool._combine_lost.append(Lost(self.path, ((start, start + used),)))
            raise kept from exc

    def drop(self) -> None:
        """Forget the buffer's bytes (the session is abandoned)."""
        self.used = 0
