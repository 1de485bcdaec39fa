"""Checksums and subfile identities of a write session (docs/FORMAT.md, *Integrity*).

- While writing, every byte is hashed once, from the caller's buffer, as it is written:
  a rank's whole-block write from its buffer; a direct write the rank makes itself slice by
  slice, each slice just before it is written (:meth:`~..io.posix.RawFile.write_hashed`: the
  copy then reads it from the cache); the others (two-phase, writing behind) in a thread that
  runs while the bytes are moved (both release the GIL). A block written piecewise
  (``dset[box] = x``) feeds one streaming hasher per block (:class:`BlockStream`) while each
  piece starts where the last ended in the block's C order (rows after rows, IOR's
  transfers); a piece out of that order or written again makes the block fall back to being
  hashed from the file at close (counted in ``IOStats.rehash_bytes`` and the profile's
  ``rehash`` phase), so the checksum is always of the final bytes. Chunks are hashed by the
  rank that compresses them (:mod:`.chunks`), over the stored (filtered) bytes.
- At close (:func:`close_report` on every rank, :func:`record` on rank 0, in the commit's own
  round): every rank's checksums and each leader's subfile size and identity offset go to
  rank 0, which writes the layout records of the session's datasets and records the subfiles
  in the session entry.
- The plan's ``checksums=False`` turns all of it off: the session's datasets are recorded
  without checksums (verify reports "no checksums").
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Sequence
from concurrent.futures import Future, ThreadPoolExecutor

import numpy as np

from ..io.boxes import hash_stored
from ..io.posix import HASH_SLICE, RawFile
from ..layout.integrity import (
    ALGORITHM,
    BlockStream,
    FedHash,
    FedSum,
    PieceSum,
    checksum,
    disowned,
)
from .messages import PreparedWrite, Transfer, WriteTarget
from .session import Session, Writing

_POOL: ThreadPoolExecutor | None = None
#: Writes hashing fewer bytes than this in all are hashed at once, in the calling thread:
#: hashing them costs less than handing them to the thread, which waits for a core when every
#: core is busy (hashing speed: docs/BENCHMARKS.md, *Cost of the checksums*).
INLINE_HASH_BYTES = 1 << 20
#: What a rank reports at close: its pieces (dataset, extent start, checksum) and, for a
#: leader, its subfile's (relative path, size and identity offset).
Report = tuple[list[tuple[str, tuple[int, ...], PieceSum]], tuple[str, dict[str, int]] | None]


def _pool() -> ThreadPoolExecutor:
    global _POOL
    if _POOL is None:
        _POOL = ThreadPoolExecutor(max_workers=1, thread_name_prefix="h5subfile-hash")
    return _POOL


@dataclasses.dataclass
class Hashing:
    """The checksums of one call's writes, under way (:func:`start_hashing`)."""

    writes: Sequence[PreparedWrite]
    #: the hashers of the writes hashed as they are written, by ``id`` of the write
    fed: dict[int, FedHash]
    #: the other writes' checksums, in order (None: not hashed here, or hashed as written)
    rest: Future[list[str | None]] | Ready
    #: the streams this call's pieces continued (broken if the call fails)
    streams: list[BlockStream] = dataclasses.field(default_factory=list)
    #: writing behind without a copy: the writes whose bytes are hashed from the file at
    #: close (their stream broke), by ``id``; they are copied, so that what is hashed then is
    #: what the caller passed
    copied: set[int] = dataclasses.field(default_factory=set)
    #: the streams this call broke after their first bytes were hashed from the caller's
    #: arrays, with the write that broke each (:func:`check_broken_streams`)
    broke: list[tuple[PreparedWrite, BlockStream]] = dataclasses.field(default_factory=list)

    def fed_by(self, write: PreparedWrite) -> FedHash | None:
        """The hasher ``write`` must feed as it writes its bytes, or None."""
        return self.fed.get(id(write))

    def feed(self, write: PreparedWrite, hasher: FedHash) -> None:
        """``write`` (of a dataset whose layout is learned) feeds its piece's ``hasher`` as
        it writes (engine/learned.py)."""
        self.fed[id(write)] = hasher


def start_hashing(
    writes: Sequence[PreparedWrite],
    as_written: bool,
    streams: dict[str, BlockStream] | None = None,
    queued: bool = False,
    from_arrays: bool = False,
) -> Hashing:
    """Start hashing this call's writes. Writes that cover their rank's whole block get their
    buffer's checksum; writes of part of a block feed the block's stream in ``streams`` (by
    dataset; None: a dict of this call's own) when they continue it, else break it; chunked
    writes and writes of datasets whose layout is learned are hashed elsewhere.

    ``as_written``: the writer of the direct writes hashes the bytes as it writes them
    (:meth:`Hashing.fed_by`): the rank itself, or with ``queued`` the write-behind thread,
    from its copy. Then whole blocks of at least :data:`~..io.posix.HASH_SLICE` bytes are fed
    slice by slice (smaller ones go out with their neighbours in one vectored call, which
    slicing would split), and so are the pieces of a stream: the large ones; with ``queued``
    all of them, so that the thread feeds each stream in order (a piece the queue cannot
    feed breaks its stream). The other whole blocks are hashed in a thread that runs while
    the bytes are moved, or at once when they are small (:data:`INLINE_HASH_BYTES`); the other
    pieces of a stream now, in order (writing behind without a copy: every piece, at the
    call, so that the checksum is of what the caller passed).

    ``from_arrays``: writing behind from the caller's arrays (``async_zero_copy``), whole
    direct blocks of at least a hash slice are fed by the queue as it writes them too, and
    checked against a sample taken at the call (``io/writebehind.py``, *Hashing*): hashing
    them at the call took the caller longer than the copy it saves."""
    if streams is None:
        streams = {}
    fed: dict[int, FedHash] = {}
    continued: list[BlockStream] = []
    copied: set[int] = set()
    broke: list[tuple[PreparedWrite, BlockStream]] = []
    threaded: list[int] = []  # whole blocks hashed from their buffers, by index
    threaded_bytes = 0
    for i, w in enumerate(writes):
        target, data = w.target, w.data
        if target.learned or target.transfer is Transfer.CHUNKED or not data.size:
            continue
        direct = as_written and target.transfer is Transfer.DIRECT
        large = data.nbytes >= HASH_SLICE
        if w.box == target.block:
            behind = from_arrays and target.transfer is Transfer.DIRECT
            if (direct or behind) and large:
                fed[id(w)] = FedHash()
            else:
                threaded.append(i)
                threaded_bytes += data.nbytes
            continue
        stream = streams.get(w.path)
        if stream is None:
            stream = streams[w.path] = BlockStream(target.block.size * data.itemsize)
        # the queue's thread feeds a stream only through direct writes, in its order
        fed_by_queue = queued and as_written
        if not stream.continues(target.block, w.box, data.itemsize) or (
            fed_by_queue and not direct
        ):
            if not as_written:  # no copy: hashed from the file at close, so copied now
                copied.add(id(w))
                if not stream.broken and stream.claimed:
                    broke.append((w, stream))
            stream.broken = True
            continue
        stream.claimed += data.nbytes
        continued.append(stream)
        if direct and (large or queued):
            fed[id(w)] = stream
        else:
            stream.update(data)
    if not threaded:
        return Hashing(writes, fed, Ready([None] * len(writes)), continued, copied, broke)

    def work() -> list[str | None]:
        sums: list[str | None] = [None] * len(writes)
        for i in threaded:
            sums[i] = checksum(writes[i].data)
        return sums

    rest = Ready(work()) if threaded_bytes < INLINE_HASH_BYTES else _pool().submit(work)
    return Hashing(writes, fed, rest, continued, copied, broke)


def piece_written(writing: Writing, write: PreparedWrite) -> None:
    """A piece of a block written (with checksums): the block's earlier whole-block checksum
    no longer holds, and its stream decides at close."""
    writing.sums.get(write.path, {}).pop(write.target.block.start, None)


def check_broken_streams(session: Session, hashing: Hashing) -> None:
    """Writing behind without a copy, for each stream this call broke: once this rank's
    queued writes are done, compare the bytes the file holds before the break with their
    checksum taken from the caller's arrays at their calls. A difference means the caller
    changed an array before it was written (breaking ``async_zero_copy``'s contract): the
    block then records that checksum (:attr:`BlockStream.changed`), which ``verify`` reports,
    since hashing the file at close would take the changed bytes as written."""
    writing = session.writing
    assert writing is not None
    if writing.pool.wait() is not None:
        return  # the queued writes failed: the error is raised at the next collective call
    for write, stream in hashing.broke:
        target = write.target
        found = _hash_from_file(session, target, write.data.dtype, stream.claimed)
        if found != stream.hasher.hexdigest():
            stream.changed = stream.hasher.hexdigest()


def no_hashing(writes: Sequence[PreparedWrite]) -> Hashing:
    """The hashing of a call of a session without checksums (the plan's ``checksums=False``)."""
    return Hashing(writes, {}, Ready([None] * len(writes)))


class Ready:
    """Checksums computed at once (a finished ``Future`` without its locks: small writes
    are hashed in the caller)."""

    __slots__ = ("value",)

    def __init__(self, value: list[str | None]) -> None:
        self.value = value

    def result(self) -> list[str | None]:
        return self.value

    def done(self) -> bool:
        return True


def finish_hashing(session: Session, hashing: Hashing, ok: bool) -> None:
    """Wait for :func:`start_hashing`; when the writes succeeded, remember each whole block's
    checksum (a block written whole again starts its stream anew; one fed as it is written is
    read at close), or, for a piece of a block, that the block's earlier checksum no longer
    holds. A call that failed breaks the streams it continued."""
    sums = hashing.rest.result()
    writing = session.writing
    if not ok:
        for stream in hashing.streams:
            stream.broken = True
    if not ok or writing is None or not writing.checksums:
        return
    for write, value in zip(hashing.writes, sums):
        target = write.target
        if target.transfer is Transfer.CHUNKED or target.learned or not write.data.size:
            continue
        key = target.block.start
        if write.box != target.block:
            piece_written(writing, write)
            continue
        writing.streams.pop(write.path, None)
        fed = hashing.fed_by(write)
        found: PieceSum | FedSum
        if fed is not None:
            found = FedSum(target.block.count, fed, write.data.nbytes)
        else:
            assert value is not None
            found = PieceSum(key, target.block.count, value)
        writing.sums.setdefault(write.path, {})[key] = found


def note_chunk(writing: Writing, path: str, start: tuple[int, ...], piece: PieceSum) -> None:
    """Remember the checksum of a chunk this rank compressed (``start``: its extent's)."""
    writing.chunk_sums.setdefault(path, {})[piece.start] = (start, piece)


def _finish_streams(session: Session, writing: Writing) -> None:
    """The checksums of the blocks this rank wrote piecewise: a stream's digest when its
    pieces came in order and covered the block, else hashed from the file (counted in
    ``IOStats.rehash_bytes``, ``rehash_seconds``). A block not completely written gets none:
    its dataset is incomplete."""
    for path in sorted(writing.streams):
        stream = writing.streams[path]
        target = writing.targets.get(path)
        info = session.catalog.nodes[path]
        if target is None or info.dtype is None or target.block.is_empty:
            continue
        if path in writing.unwritten:
            continue  # not completely written: the dataset is incomplete, no checksum
        key = target.block.start
        if stream.complete:
            value = stream.hasher.hexdigest()
        elif stream.changed is not None:
            value = stream.changed  # what the caller passed: the stored bytes differ
        else:
            value = _hash_from_file(session, target, info.dtype)
        writing.sums.setdefault(path, {})[key] = PieceSum(key, target.block.count, value)
    writing.streams.clear()
    for path, by_start in writing.sums.items():
        for key, found in by_start.items():
            if isinstance(found, FedSum):
                by_start[key] = _fed_sum(session, path, key, found)


def _fed_sum(session: Session, path: str, key: tuple[int, ...], found: FedSum) -> PieceSum:
    """The checksum of a whole block fed as it was written: its hasher's, when it was fed
    the whole block, else the block's bytes hashed from the file."""
    if found.hasher.nbytes == found.nbytes:
        value = found.hasher.hasher.hexdigest()
        if found.hasher.changed_early:
            value = disowned(value)  # the stored bytes are not those passed
        return PieceSum(key, found.count, value)
    writing = session.writing
    assert writing is not None
    target = writing.targets[path]
    dtype = session.catalog.nodes[path].dtype
    assert target is not None and dtype is not None
    return PieceSum(key, found.count, _hash_from_file(session, target, dtype))


def _hash_from_file(session: Session, target: WriteTarget, dtype: np.dtype, limit: int = -1) -> str:
    """The checksum of this rank's block as stored (its first ``limit`` bytes in C order)."""
    stats = session.stats
    started, read_before = time.perf_counter(), stats.bytes_read
    raw = RawFile(target.file, stats=stats)
    try:
        return hash_stored(raw, target.offset, target.extent, target.block, dtype, limit)
    finally:
        raw.close()
        stats.rehashes += 1
        stats.rehash_seconds += time.perf_counter() - started
        stats.rehash_bytes += stats.bytes_read - read_before


def _report(session: Session) -> Report:
    writing = session.writing
    assert writing is not None
    if writing.checksums:
        _finish_streams(session, writing)
    pieces: list[tuple[str, tuple[int, ...], PieceSum]] = []
    for path, by_start in writing.sums.items():
        target = writing.targets.get(path)
        if target is not None:
            pieces.extend(
                (path, target.extent.start, p)
                for p in by_start.values()
                if isinstance(p, PieceSum)  # all are, once the streams are finished
            )
    for path, chunks in writing.chunk_sums.items():
        pieces.extend((path, start, p) for start, p in chunks.values())
    subfile = None
    leader = writing.leader
    if leader is not None and leader.subfile is not None:
        subfile = (leader.relpath, leader.subfile.info().to_dict())
    return pieces, subfile


def close_report(session: Session) -> tuple[Report | None, BaseException | None]:
    """At close, once this rank's files are closed: what it sends rank 0 (its checksums and,
    for a leader, its subfile's size and identity offset), or the error that kept it from
    making it (agreed by the caller's round)."""
    try:
        return _report(session), None
    except Exception as exc:  # noqa: BLE001 - agreed on every rank by the caller
        return None, exc


def record(session: Session, gathered: list[Report]) -> None:
    """Rank 0, in the close's round: every rank's :func:`close_report` into the master: the
    pieces' checksums into the layout records of this session's datasets (written here, once),
    each subfile's size and identity offset into the session's entry."""
    writing = session.writing
    assert writing is not None and writing.root is not None
    master = writing.root.master
    pieces: dict[str, dict[tuple[int, ...], list[PieceSum]]] = {}
    for rank_pieces, _ in gathered:
        for path, extent_start, piece in rank_pieces:
            pieces.setdefault(path, {}).setdefault(extent_start, []).append(piece)
    for path, info in session.catalog.nodes.items():
        layout = info.layout
        if layout is None or layout.session != writing.number or not layout.extents:
            continue
        if layout.learned:
            continue  # its pieces are every rank's writes (engine/learned.py)
        found = pieces.get(path, {})
        extents = tuple(
            e.changed(pieces=tuple(sorted(found.get(e.start, ()), key=lambda p: p.start)))
            for e in layout.extents
        )
        info.layout = dataclasses.replace(
            layout, extents=extents, checksum=ALGORITHM if writing.checksums else ""
        )
        master.write_layout(path, info.layout)
    master.session.subfile_info = {
        relpath: sizes for _, subfile in gathered if subfile for relpath, sizes in [subfile]
    }
