"""Checksums and subfile identities of a write session (docs/FORMAT.md, *Integrity*).

- While writing: a rank's whole-block write is hashed from its buffer. A direct write the
  rank makes itself is hashed by the write, slice by slice, each slice just before it is
  written (:meth:`~..io.posix.RawFile.write_hashed`: the copy then reads it from the cache);
  the others (two-phase, writing behind) in a thread that runs while the bytes are moved
  (both release the GIL); a block written piecewise
  (``dset[box] = x``, in any order, overlapping or repeated) is hashed at close from the file,
  so the checksum is always of the final bytes. Chunks are hashed by the rank that compresses
  them (:mod:`.chunks`), over the stored (filtered) bytes.
- At close (:func:`close_report` on every rank, :func:`record` on rank 0, in the commit's own
  round): every rank's checksums and each leader's subfile size and identity offset go to
  rank 0, which writes the layout records of the session's datasets and records the subfiles
  in the session entry.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from concurrent.futures import Future, ThreadPoolExecutor

from ..io.boxes import hash_stored
from ..io.posix import HASH_SLICE, RawFile
from ..layout.integrity import ALGORITHM, PieceSum, checksum, new_hasher
from .messages import PreparedWrite, Transfer
from .session import Session, Writing

_POOL: ThreadPoolExecutor | None = None
#: Writes hashing fewer bytes than this in all are hashed at once, in the calling thread:
#: xxh3 hashes 1 MiB in about 20 us, less than handing it to the thread costs (15-40 us on an
#: idle core, milliseconds when every core is busy and the thread waits for one).
INLINE_HASH_BYTES = 1 << 20
#: What a rank reports at close: its pieces (dataset, extent start, checksum) and, for a
#: leader, its subfile's (relative path, size and identity offset).
Report = tuple[list[tuple[str, tuple[int, ...], PieceSum]], tuple[str, dict[str, int]] | None]


def _pool() -> ThreadPoolExecutor:
    global _POOL
    if _POOL is None:
        _POOL = ThreadPoolExecutor(max_workers=1, thread_name_prefix="h5subfile-hash")
    return _POOL


class FedHash:
    """A hasher the write of one block feeds as it writes (``update``), counting the bytes it
    was given: a block is recorded with this checksum only if it was fed the whole block."""

    __slots__ = ("hasher", "nbytes")

    def __init__(self) -> None:
        self.hasher = new_hasher()
        self.nbytes = 0

    def update(self, data: memoryview) -> None:
        self.hasher.update(data)
        self.nbytes += data.nbytes


@dataclasses.dataclass
class Hashing:
    """The checksums of one call's writes, under way (:func:`start_hashing`)."""

    writes: Sequence[PreparedWrite]
    #: the hashers of the writes hashed as they are written, by ``id`` of the write
    fed: dict[int, FedHash]
    #: the other writes' checksums, in order (None: not hashed here, or hashed as written)
    rest: Future[list[str | None]]

    def fed_by(self, write: PreparedWrite) -> FedHash | None:
        """The hasher ``write`` must feed as it writes its bytes, or None."""
        return self.fed.get(id(write))

    def feed(self, write: PreparedWrite, hasher: FedHash) -> None:
        """``write`` (of a dataset whose layout is learned) feeds its piece's ``hasher`` as
        it writes (engine/learned.py)."""
        self.fed[id(write)] = hasher


def start_hashing(writes: Sequence[PreparedWrite], as_written: bool) -> Hashing:
    """Start hashing the writes that cover their rank's whole block (their checksum is their
    buffer's); the others get None. ``as_written``: the rank makes its writes itself (no
    write-behind queue), so its direct writes of at least :data:`~..io.posix.HASH_SLICE` bytes
    are hashed by the write (:meth:`Hashing.fed_by`; smaller ones go out with their
    neighbours in one vectored call, which slicing would split); the rest are hashed in a
    thread that runs while the bytes are moved, or at once when they are small
    (:data:`INLINE_HASH_BYTES`). Chunked writes are hashed chunk by chunk."""

    whole = [
        w.target.transfer is not Transfer.CHUNKED
        and not w.target.learned
        and w.box == w.target.block
        and w.data.size > 0
        for w in writes
    ]
    fed = {
        id(w): FedHash()
        for w, hashed in zip(writes, whole)
        if hashed
        and as_written
        and w.target.transfer is Transfer.DIRECT
        and w.data.nbytes >= HASH_SLICE
    }
    threaded = [hashed and id(w) not in fed for w, hashed in zip(writes, whole)]

    def work() -> list[str | None]:
        return [checksum(w.data) if hashed else None for w, hashed in zip(writes, threaded)]

    hashed_bytes = sum(w.data.nbytes for w, hashed in zip(writes, threaded) if hashed)
    rest = _done(work()) if hashed_bytes < INLINE_HASH_BYTES else _pool().submit(work)
    return Hashing(writes, fed, rest)


def _done(value: list[str | None]) -> Future[list[str | None]]:
    future: Future[list[str | None]] = Future()
    future.set_result(value)
    return future


def finish_hashing(session: Session, hashing: Hashing, ok: bool) -> None:
    """Wait for :func:`start_hashing`; when the writes succeeded, remember each block's
    checksum, or that the block must be hashed from the file at close (also when a write to
    be hashed as written was not fed all its bytes)."""
    sums = hashing.rest.result()
    writing = session.writing
    if not ok or writing is None:
        return
    for write, value in zip(hashing.writes, sums):
        if write.target.transfer is Transfer.CHUNKED or write.target.learned:
            continue
        fed = hashing.fed_by(write)
        if fed is not None:
            value = fed.hasher.hexdigest() if fed.nbytes == write.data.nbytes else None
        key = write.target.block.start
        if value is None:
            writing.rehash.add(write.path)
            writing.sums.get(write.path, {}).pop(key, None)
            continue
        writing.rehash.discard(write.path)
        piece = PieceSum(key, write.target.block.count, value)
        writing.sums.setdefault(write.path, {})[key] = piece


def note_chunk(writing: Writing, path: str, start: tuple[int, ...], piece: PieceSum) -> None:
    """Remember the checksum of a chunk this rank compressed (``start``: its extent's)."""
    writing.chunk_sums.setdefault(path, {})[piece.start] = (start, piece)


def _rehash(session: Session, writing: Writing) -> None:
    """Hash, from the file, the blocks this rank wrote piecewise."""
    for path in sorted(writing.rehash):
        target = writing.targets.get(path)
        info = session.catalog.nodes[path]
        if target is None or info.dtype is None or target.block.is_empty:
            continue
        if path in writing.unwritten:
            continue  # not completely written: the dataset is incomplete, no checksum
        raw = RawFile(target.file, stats=session.stats)
        try:
            value = hash_stored(raw, target.offset, target.extent, target.block, info.dtype)
        finally:
            raw.close()
        key = target.block.start
        writing.sums.setdefault(path, {})[key] = PieceSum(key, target.block.count, value)
    writing.rehash.clear()


def _report(session: Session) -> Report:
    writing = session.writing
    assert writing is not None
    _rehash(session, writing)
    pieces: list[tuple[str, tuple[int, ...], PieceSum]] = []
    for path, by_start in writing.sums.items():
        target = writing.targets.get(path)
        if target is not None:
            pieces.extend((path, target.extent.start, p) for p in by_start.values())
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
        info.layout = dataclasses.replace(layout, extents=extents, checksum=ALGORITHM)
        master.write_layout(path, info.layout)
    master.session.subfile_info = {
        relpath: sizes for _, subfile in gathered if subfile for relpath, sizes in [subfile]
    }
