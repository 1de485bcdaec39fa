"""The one small layer through which every data byte passes: open, positioned write,
positioned read, sync, close. Every call is counted in :class:`IOStats`, so it can be traced.

Linux moves at most about 2 GiB per system call; each call here moves at most
:data:`MAX_TRANSFER` bytes and loops, so a single read or write of any size works.

:class:`RawFile` merges the pieces of one call that are neighbours on disk into one vectored
call (``pwritev``/``preadv``) of at most ``transfer_size`` bytes (a data file's writes: at most
:data:`WRITE_SLICE` unless the plan sets it); :meth:`RawFile.write_hashed` writes in slices of
:data:`HASH_SLICE`, each hashed just before it is written. In a profiled session each system
call is also recorded in the session's profile (:mod:`h5subfile.profiler.counters`).
"""

from __future__ import annotations

import errno
import os
import stat
import time
from dataclasses import dataclass, field, fields
from typing import Any, Protocol

import numpy as np

from ..errors import MissingFileError, TruncatedFileError
from ..profiler.counters import PosixRecord, Profile
from .causes import os_error
from .regular import open_regular

#: The largest number of bytes passed to one pread/pwrite system call.
MAX_TRANSFER = 1 << 30
#: The most buffers passed to one pwritev/preadv call (Linux's IOV_MAX is 1024).
MAX_BUFFERS = 1024
#: Bytes hashed, then written, at a time by :meth:`RawFile.write_hashed`. Small enough that
#: the slice is still in the core's cache (a few MiB of L2) when the write copies it into the
#: page cache, so hashing costs little and the copy is quick, which shortens the time the
#: file's write lock is held when ranks share the file; above 1 MiB, so that the writes fall
#: in the profile's (and Darshan's) 1M-4M size bucket, not among the small requests.
HASH_SLICE = 1280 << 10
#: The largest write system call to h5subfile's data files when the plan sets no
#: ``transfer_size`` (reads are not cut): in larger calls, steps written into the page cache
#: take longer and are more often slow (docs/BENCHMARKS.md, *Write system call sizes*). Above a
#: hash slice plus a file-system block, so that :meth:`RawFile.write_hashed` makes one call per
#: slice.
WRITE_SLICE = 1536 << 10

#: A piece of positioned I/O: (byte offset in the file, the bytes or the buffer to fill).
Piece = tuple[int, memoryview]


class PieceWriter(Protocol):
    """What writers are handed: a :class:`RawFile`, or a file of a write-behind pool."""

    def write_pieces(self, pieces: list[Piece], owned: bool = False) -> None: ...

    def write_hashed(self, pieces: list[Piece], hasher: Any, owned: bool = False) -> None: ...


def coalesce(pieces: list[Piece], limit: int) -> list[tuple[int, list[memoryview]]]:
    """Group pieces that are neighbours on disk into vectored calls of at most ``limit`` bytes
    (and :data:`MAX_BUFFERS` buffers); a piece larger than ``limit`` is cut."""
    if len(pieces) == 1 and len(pieces[0][1]) <= limit:  # the common case: one write
        return [(pieces[0][0], [pieces[0][1]])]
    calls: list[tuple[int, list[memoryview]]] = []
    end, size = -1, 0
    for offset, data in sorted(pieces, key=lambda piece: piece[0]):
        done = 0
        while done < len(data):
            if offset + done == end and size < limit and len(calls[-1][1]) < MAX_BUFFERS:
                take = min(len(data) - done, limit - size)
                calls[-1][1].append(data[done : done + take])
            else:
                take = min(len(data) - done, limit)
                calls.append((offset + done, [data[done : done + take]]))
                size = 0
            size += take
            done += take
            end = offset + done
    return calls


@dataclass
class IOStats:
    """Counters of the data I/O done through :class:`RawFile` (bytes, calls, seconds)."""

    writes: int = 0
    reads: int = 0
    bytes_written: int = 0
    bytes_read: int = 0
    write_seconds: float = 0.0
    read_seconds: float = 0.0
    syncs: int = 0
    sync_seconds: float = 0.0
    #: time compressing chunks (and decompressing them when reading, inside HDF5)
    compress_seconds: float = 0.0
    #: time moving data between ranks (two-phase I/O, chunk parts, compressed chunks)
    exchange_seconds: float = 0.0
    #: with write-behind (``async_writes``): the caller's time handing writes over (copying
    #: their bytes, waiting for room in the buffer) and waiting for them to be done (flush,
    #: reads, close); the writes themselves, in the background, are ``write_seconds``
    async_wait_seconds: float = 0.0
    #: blocks written piecewise out of order (or written again) hashed from the file at close,
    #: the bytes read back for it (also in ``bytes_read``) and the time it took
    rehashes: int = 0
    rehash_bytes: int = 0
    rehash_seconds: float = 0.0
    #: the session writes behind: its writes are in the background (``write_seconds``), the
    #: caller's share of them is ``async_wait_seconds``
    write_behind: bool = field(default=False, repr=False, compare=False)
    #: where every system call of :class:`RawFile` is also recorded with its offset, length and
    #: times (docs/PROFILING.md); None (the default) costs one test per call
    profile: Profile | None = field(default=None, repr=False, compare=False)

    @property
    def foreground_write_seconds(self) -> float:
        """The caller's time in data writes: the writes themselves, or, writing behind, the
        time handing them over and waiting for them (``async_wait_seconds``)."""
        return self.async_wait_seconds if self.write_behind else self.write_seconds

    @property
    def data_write_seconds(self) -> float:
        """Everything the data path of a write took the caller: writes (writing behind: the
        time handing them over and waiting for them), compression, exchanges."""
        return self.foreground_write_seconds + self.compress_seconds + self.exchange_seconds

    @property
    def data_read_seconds(self) -> float:
        return self.read_seconds + self.compress_seconds + self.exchange_seconds

    def as_dict(self) -> dict[str, float]:
        return {
            f.name: getattr(self, f.name)
            for f in fields(self)
            if f.name not in ("profile", "write_behind")
        }


class FileCalls:
    """Plain system calls on files that are not :class:`RawFile` (claim files, probes), each
    recorded in ``profile`` when there is one, under the path the file was opened by, as
    Darshan's POSIX module records them (an ``fstat`` is a stat; a failed open is not
    counted). Without a profile each method is the ``os`` call."""

    def __init__(self, profile: Profile | None = None):
        self.profile = profile
        self._files: dict[int, tuple[PosixRecord, int]] = {}  # fd -> (record, file offset)

    def open(self, path: str, flags: int, mode: int = 0o777, what: str = "") -> int:
        """``what`` (the file's role, e.g. "claim file"): the file must be a regular one
        (:func:`open_regular`: a FIFO or device is refused without blocking)."""
        if self.profile is None:
            return open_regular(path, flags, what, mode) if what else os.open(path, flags, mode)
        started = self.profile.clock()
        fd = open_regular(path, flags, what, mode) if what else os.open(path, flags, mode)
        record = self.profile.record(os.path.abspath(path))
        record.record_open(started, self.profile.clock(), block_size(path))
        if flags & os.O_CREAT:
            record.record_mode(mode)
        self._files[fd] = (record, 0)
        return fd

    def write(self, fd: int, data: bytes) -> int:
        found = self._files.get(fd)
        if found is None or self.profile is None:
            return os.write(fd, data)
        started = self.profile.clock()
        written = os.write(fd, data)
        found[0].record_write(found[1], written, started, self.profile.clock())
        self._files[fd] = (found[0], found[1] + written)
        return written

    def read(self, fd: int, length: int) -> bytes:
        found = self._files.get(fd)
        if found is None or self.profile is None:
            return os.read(fd, length)
        started = self.profile.clock()
        data = os.read(fd, length)
        if data:  # Darshan counts a read at the end of the file too; its length is 0
            found[0].record_read(found[1], len(data), started, self.profile.clock())
        self._files[fd] = (found[0], found[1] + len(data))
        return data

    def fstat(self, fd: int) -> os.stat_result:
        found = self._files.get(fd)
        if found is None or self.profile is None:
            return os.fstat(fd)
        started = self.profile.clock()
        status = os.fstat(fd)
        found[0].record_stat(started, self.profile.clock())
        return status

    def fsync(self, fd: int) -> None:
        found = self._files.get(fd)
        if found is None or self.profile is None:
            os.fsync(fd)
            return
        started = self.profile.clock()
        os.fsync(fd)
        found[0].record_fsync(started, self.profile.clock())

    def close(self, fd: int) -> None:
        found = self._files.pop(fd, None)
        if found is None or self.profile is None:
            os.close(fd)
            return
        started = self.profile.clock()
        os.close(fd)
        found[0].record_close(started, self.profile.clock())


def probe_file(path: str, profile: Profile | None = None) -> tuple[int | None, OSError | None]:
    """``(size, None)`` for a regular file this process can open for reading, else
    ``(None, why)``: missing (FileNotFoundError), unreadable (PermissionError...), or not a
    regular file (a folder, a FIFO: EINVAL). Opens and closes it (never blocks); its open,
    stat and close are recorded in ``profile`` when given."""
    calls = FileCalls(profile)
    try:
        fd = calls.open(path, os.O_RDONLY | os.O_NONBLOCK)
    except OSError as exc:
        return None, exc
    try:
        status = calls.fstat(fd)
    finally:
        calls.close(fd)
    if not stat.S_ISREG(status.st_mode):
        return None, OSError(errno.EINVAL, "not a regular file", path)
    return status.st_size, None


def fsync_path(path: str, profile: Profile | None = None) -> None:
    """fsync a file or folder by name (its open, fsync and close recorded in ``profile``)."""
    if profile is not None:
        _fsync_profiled(path, profile)
        return
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _fsync_profiled(path: str, profile: Profile) -> None:
    record = profile.record(os.path.abspath(path))
    clock = profile.clock
    started = clock()
    fd = os.open(path, os.O_RDONLY)
    record.record_open(started, clock(), block_size(path))
    try:
        started = clock()
        os.fsync(fd)
        record.record_fsync(started, clock())
    finally:
        started = clock()
        os.close(fd)
        record.record_close(started, clock())


def as_bytes(array: np.ndarray) -> memoryview:
    """A flat byte view of a C-contiguous array (no copy)."""
    if not array.flags.c_contiguous:
        raise ValueError("as_bytes needs a C-contiguous array")
    return array.reshape(-1).view(np.uint8).data


class RawFile:
    """An open file for positioned I/O.

    Parameters
    ----------
    path
        The file. It must exist (subfiles and masters are created by HDF5 first).
    writable
        Open for writing too.
    create
        Create the file if it does not exist (benchmarks; h5subfile's own files are created by HDF5).
    stats
        Where to count the I/O; a private one if None.
    """

    def __init__(
        self,
        path: str,
        writable: bool = False,
        stats: IOStats | None = None,
        create: bool = False,
        transfer_size: int | None = None,
        write_size: int | None = None,
    ):
        self.path = path
        self.stats = stats if stats is not None else IOStats()
        self.transfer_size = min(transfer_size or MAX_TRANSFER, MAX_TRANSFER)
        #: the largest write system call (``transfer_size`` unless smaller)
        self.write_size = min(write_size or self.transfer_size, self.transfer_size)
        flags = os.O_RDWR if writable else os.O_RDONLY
        if create:
            flags |= os.O_CREAT
        profile = self.stats.profile
        started = time.monotonic() if profile is not None else 0.0
        try:  # a FIFO or device is refused, not waited on
            self.fd: int | None = open_regular(path, flags, "data file", 0o644)
        except FileNotFoundError:
            raise MissingFileError(f"{path} does not exist") from None
        #: this file's profile record (None when not profiling)
        self.record: PosixRecord | None = None
        if profile is not None:
            self.record = profile.record(os.path.abspath(path))
            self.record.record_open(started, time.monotonic(), block_size(path))

    def pwrite(self, data: memoryview, offset: int) -> None:
        """Write all of ``data`` at byte ``offset`` (in calls of at most ``transfer_size``)."""
        self.write_pieces([(offset, data)])

    def write_pieces(self, pieces: list[Piece], owned: bool = False) -> None:
        """Write every (offset, bytes) piece; neighbours on disk go out in one vectored call
        (``owned``: whether the caller gives the buffers up, which matters only to a
        write-behind file, :class:`~.writebehind.QueuedFile`)."""
        started = time.perf_counter()
        calls, nbytes = self._vectored(pieces, os.pwritev, self._wrote_nothing, self.write_size)
        self.stats.writes += calls
        self.stats.bytes_written += nbytes
        self.stats.write_seconds += time.perf_counter() - started

    def write_hashed(self, pieces: list[Piece], hasher: Any, owned: bool = False) -> None:
        """Write every (offset, bytes) piece, in order, in slices (:func:`slice_ends`), each
        given to ``hasher.update`` just before it is written: the hash is of the bytes in the
        pieces' order, and each slice is copied from the cache the hashing left it in
        (``owned``: as for :meth:`write_pieces`).
        Ranks sharing a file take turns on its write lock; each hashes its next slice while
        another holds the lock."""
        started = time.perf_counter()
        calls = nbytes = 0
        block = block_size(self.path)
        profile = self.stats.profile
        for offset, data in pieces:
            at = 0
            base = profile.address(data) if profile is not None else 0
            for end in slice_ends(offset, len(data), block):
                part = data[at:end]
                hasher.update(part)
                made, moved = self._vectored(
                    [(offset + at, part)],
                    os.pwritev,
                    self._wrote_nothing,
                    self.write_size,
                    base + at if base else 0,
                )
                calls, nbytes, at = calls + made, nbytes + moved, end
        self.stats.writes += calls
        self.stats.bytes_written += nbytes
        self.stats.write_seconds += time.perf_counter() - started

    def pread_into(self, buffer: memoryview, offset: int) -> None:
        """Fill all of ``buffer`` from byte ``offset``; a short file raises TruncatedFileError."""
        self.read_pieces([(offset, buffer)])

    def read_pieces(self, pieces: list[Piece]) -> None:
        """Fill every (offset, buffer) piece; neighbours on disk come in one vectored call."""
        started = time.perf_counter()
        calls, nbytes = self._vectored(pieces, os.preadv, self._truncated, self.transfer_size)
        self.stats.reads += calls
        self.stats.bytes_read += nbytes
        self.stats.read_seconds += time.perf_counter() - started

    def _vectored(
        self, pieces: list[Piece], call: Any, failed: Any, limit: int, address: int = 0
    ) -> tuple[int, int]:
        """Run ``call`` (os.pwritev or os.preadv) over the pieces coalesced into calls of at
        most ``limit`` bytes until every byte moved; ``failed(at, end)`` raises when a call
        moves nothing. Returns (calls, bytes). ``address`` (profiled, one piece): its buffer's
        address, known to the caller (0: looked up)."""
        assert self.fd is not None
        calls = moved = 0
        record = self.record
        for offset, buffers in coalesce(pieces, limit):
            total = sum(len(b) for b in buffers)
            done = 0
            while done < total:
                try:
                    if record is None:
                        count = call(self.fd, _remaining(buffers, done), offset + done)
                    else:
                        count = self._profiled(
                            record, call, _remaining(buffers, done), offset + done, address + done
                        )
                except OSError as exc:  # the system call's: it names no file
                    doing = "write" if call is os.pwritev else "read"
                    raise os_error(exc, self.path, doing) from exc
                if count <= 0:
                    failed(offset + done, offset + total)
                done += count
                calls += 1
            moved += total
        return calls, moved

    def _profiled(
        self, record: PosixRecord, call: Any, buffers: list[memoryview], at: int, address: int
    ) -> int:
        """One vectored system call, recorded as one operation (Darshan counts a preadv or
        pwritev as one read or write of the bytes it returned). ``address``: the first
        buffer's, when the caller knows it and there is one buffer (else 0)."""
        profile = self.stats.profile
        assert profile is not None
        if address and len(buffers) == 1:
            aligned = profile.aligned_at(address)
        else:
            aligned = profile.aligned(*buffers)
        started = time.monotonic()
        count = int(call(self.fd, buffers, at))
        ended = time.monotonic()
        if count >= 0:
            kind = record.record_write if call is os.pwritev else record.record_read
            kind(at, count, started, ended, aligned)
        return count

    def _wrote_nothing(self, at: int, end: int) -> None:
        raise OSError(f"pwrite to {self.path} at offset {at} wrote nothing")

    def _truncated(self, at: int, end: int) -> None:
        raise TruncatedFileError(
            f"{self.path} ends at byte {at} but data is expected up to byte {end}: the file is "
            "truncated"
        )

    def sync(self) -> None:
        assert self.fd is not None
        start = time.perf_counter()
        started = time.monotonic() if self.record is not None else 0.0
        try:
            os.fsync(self.fd)
        except OSError as exc:
            raise os_error(exc, self.path, "sync") from exc
        if self.record is not None:
            self.record.record_fsync(started, time.monotonic())
        self.stats.syncs += 1
        self.stats.sync_seconds += time.perf_counter() - start

    def close(self) -> None:
        if self.fd is not None:
            started = time.monotonic() if self.record is not None else 0.0
            os.close(self.fd)
            self.fd = None
            if self.record is not None:
                self.record.record_close(started, time.monotonic())


#: File system block sizes by folder, for POSIX_FILE_ALIGNMENT (asked once per folder)
_BLOCK_SIZES: dict[str, int] = {}


def block_size(path: str) -> int:
    """The block size (bytes) of the file system holding ``path`` (``statvfs`` of its folder,
    which adds no system call on the file itself); 0 if unknown."""
    folder = os.path.dirname(os.path.abspath(path))
    size = _BLOCK_SIZES.get(folder)
    if size is None:
        try:
            size = int(os.statvfs(folder).f_bsize)
        except OSError:
            size = 0
        _BLOCK_SIZES[folder] = size
    return size


def slice_ends(offset: int, length: int, block: int) -> list[int]:
    """Where the slices of a piece of ``length`` bytes at file ``offset`` end (relative to the
    piece) when it is written a slice at a time: each slice at least :data:`HASH_SLICE` bytes
    (unless the piece is smaller), ending on a multiple of the file system's ``block`` (0:
    unknown), so that every slice after the first starts aligned; the last slice takes what
    would be left under a slice."""
    grain = max(block, 1)
    ends: list[int] = []
    at = 0
    while True:
        end = -(-(offset + at + HASH_SLICE) // grain) * grain - offset
        if end + HASH_SLICE > length:
            ends.append(length)
            return ends
        ends.append(end)
        at = end


def _remaining(buffers: list[memoryview], done: int) -> list[memoryview]:
    """The buffers after the first ``done`` bytes (after a short vectored call)."""
    if done == 0:
        return buffers
    rest = []
    for buffer in buffers:
        if done >= len(buffer):
            done -= len(buffer)
            continue
        rest.append(buffer[done:])
        done = 0
    return rest
