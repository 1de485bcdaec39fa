"""Moving boxes of a dataset between numpy buffers and the extents that store them.

:func:`box_pieces` turns a box to write into (file offset, bytes) pieces of the caller's buffer.
:class:`BoxReader` reads boxes straight from the stored bytes, or through h5py (chunked,
compressed or foreign datasets); it checks each subfile's identity and size the first time it
reads from it, found by the name the read resolved (so that opening a file resolves no subfile
path, and no file is resolved by every rank at open), and with ``verify`` each touched piece's
checksum. :func:`hash_stored` hashes a stored piece from the file.
"""

from __future__ import annotations

import dataclasses
import os
import time
from collections.abc import Callable, Iterable

import h5py
import numpy as np

from ..errors import ChecksumError, SubfileMismatchError, UnsafePathError
from ..layout.blocks import Block
from ..layout.hyperslab import Slab, merged
from ..layout.integrity import (
    IDENTITY_BYTES,
    PieceSum,
    SubfileInfo,
    checksum,
    describe_identity,
    identity,
    new_hasher,
)
from ..layout.names import SourcePaths, names_master
from ..layout.record import DatasetLayout, FileRecord, StoredExtent
from ..layout.runs import box_runs, slab_runs
from .filters import load_plugins
from .h5 import open_shared_read
from .pool import FilePool
from .posix import IOStats, Piece, RawFile, as_bytes

#: Bytes read per call when hashing stored bytes without keeping them.
HASH_BATCH = 32 * 2**20
#: Extents whose merged pieces a reader keeps (the layouts read most recently).
MERGED_KEPT = 1024


def box_pieces(data_offset: int, extent: Block, box: Block, data: np.ndarray) -> list[Piece]:
    """The (file offset, bytes) pieces that put ``data`` (C-contiguous, shape ``box.count``)
    into the extent stored at ``data_offset``, straight from the numpy buffer."""
    raw = as_bytes(data)
    return [
        (data_offset + at, raw[taken : taken + nbytes])
        for at, taken, nbytes in box_runs(extent, box, box, data.dtype.itemsize)
    ]


def hash_stored(
    raw: RawFile, data_offset: int, extent: Block, box: Block, dtype: np.dtype, limit: int = -1
) -> str:
    """The checksum of the C-order bytes of ``box`` (its first ``limit`` bytes, if given),
    stored in the extent at ``data_offset`` of ``raw``, read in batches of
    :data:`HASH_BATCH` bytes (never the whole box in memory)."""
    return hash_boxes(raw, data_offset, extent, [box], dtype, limit)


def hash_slab(raw: RawFile, data_offset: int, extent: Block, slab: Slab, dtype: np.dtype) -> str:
    """The checksum of a slab's bytes stored in the extent (its blocks in order, each in C
    order: a piece of a learned layout), read as :func:`hash_stored` reads."""
    return hash_boxes(raw, data_offset, extent, slab.blocks(), dtype)


def hash_boxes(
    raw: RawFile,
    data_offset: int,
    extent: Block,
    boxes: Iterable[Block],
    dtype: np.dtype,
    limit: int = -1,
) -> str:
    """The checksum of the boxes' C-order bytes, one box after another (the first ``limit``
    of them, if given), stored in the extent at ``data_offset`` of ``raw``, read in batches of
    at most :data:`HASH_BATCH` bytes."""
    left = limit if limit >= 0 else -1
    hasher = new_hasher()
    buffer = np.empty(HASH_BATCH, dtype=np.uint8)
    view = buffer.data
    batch: list[Piece] = []
    used = 0

    def flush() -> None:
        nonlocal used
        raw.read_pieces(batch)
        hasher.update(view[:used])
        batch.clear()
        used = 0

    for box in boxes:
        for at, _, nbytes in box_runs(extent, box, box, dtype.itemsize):
            if left >= 0:
                nbytes, left = min(nbytes, left), left - min(nbytes, left)
            while nbytes > 0:
                take = min(nbytes, len(buffer) - used)
                batch.append((data_offset + at, view[used : used + take]))
                used, at, nbytes = used + take, at + take, nbytes - take
                if used == len(buffer):
                    flush()
    if used:
        flush()
    return hasher.hexdigest()


def identity_problem(
    raw: RawFile, relpath: str, session_uuid: str, info: SubfileInfo
) -> str | None:
    """Why the open subfile ``raw`` is not the subfile ``relpath`` the master recorded (size
    and identity: one fstat, one positioned read), or None."""
    size = os.fstat(raw.fd or -1).st_size
    if size != info.bytes:
        return (
            f"subfile {relpath} has {size} bytes, the master recorded {info.bytes}: it is not "
            "the subfile this file's writer closed (replaced, truncated or extended)"
        )
    found = bytearray(IDENTITY_BYTES)
    raw.pread_into(memoryview(found), info.identity_offset)
    if bytes(found) != identity(session_uuid, relpath):
        return (
            f"subfile {relpath} is not the one its master recorded: it holds "
            f"{describe_identity(bytes(found))}, not that of write session {session_uuid} "
            "(another run's subfile, swapped subfiles, or overwritten bytes)"
        )
    return None


#: A subfile's expected identity: (recorded relative path, session uuid, size and identity offset).
Expected = tuple[str, str, SubfileInfo]


def recorded_identities(record: FileRecord) -> dict[str, Expected]:
    """For each subfile whose writer recorded its identity (format 3), by its recorded relative
    path: (that path, session uuid, size and identity offset). No path is resolved here."""
    recorded = {}
    for session in record.sessions:
        if not session.uuid:
            continue  # no session id (before format 3): nothing to compare an identity with
        for relpath, data in session.subfile_info.items():
            recorded[relpath] = (relpath, session.uuid, SubfileInfo.from_dict(data))
    return recorded


def expected_identities(record: FileRecord, paths: SourcePaths) -> dict[str, Expected]:
    """:func:`recorded_identities` by absolute path (every recorded path resolved)."""
    expected = {}
    for relpath, found in recorded_identities(record).items():
        try:
            expected[paths.resolve(relpath)] = found
        except UnsafePathError:
            continue  # reading it raises the same error
    return expected


class BoxReader:
    """Reads boxes of datasets: straight from the stored bytes, or through h5py when needed.

    ``master_path`` is the master's final path (relative source paths are resolved from its
    folder); ``master_data_path`` is where the master's own bytes are now (a ``.partial`` file
    while a write session is open).
    """

    def __init__(
        self,
        master_path: str,
        master_data_path: str,
        stats: IOStats,
        transfer_size: int | None = None,
    ):
        self.paths = SourcePaths(master_path, master_data_path)
        self.pool = FilePool(writable=False, stats=stats, transfer_size=transfer_size)
        self._h5: h5py.File | None = None
        self.h5py_opener: Callable[[], h5py.File] = lambda: h5py.File(master_data_path, "r")
        #: h5py files this process has open for writing (a leader's subfile), by path.
        self.writer_files: dict[str, h5py.File] = {}
        self._sources: dict[str, h5py.File] = {}
        #: subfiles whose identity and size the master recorded (:meth:`expect`), by the
        #: relative path recorded; by absolute path only once a file is read under another name
        self._recorded: dict[str, Expected] | None = None  # made from _record when first asked
        self._resolved: dict[str, Expected] | None = None
        self._record: FileRecord | None = None
        self._checked: set[str] = set()
        self.check_identities = True
        #: each extent's pieces merged (:meth:`_merged`), by the id of its pieces' tuple, with
        #: the tuple itself (kept alive, so that the id stays its own)
        self._merged_runs: dict[int, tuple[tuple[PieceSum, ...], list[Slab]]] = {}

    def expect(self, record: FileRecord) -> None:
        """Check the identity and size of the subfiles ``record`` describes, each when this
        process first reads from it. Nothing is resolved here: opening costs no file-system
        call per subfile (with P ranks and P subfiles that would be P x P calls), nor parsed
        until this process first reads from a subfile."""
        self._record = record
        self._recorded = self._resolved = None
        self._checked.clear()

    def expect_more(self, record: FileRecord) -> None:
        """Add the identities of the subfiles ``record`` describes (a read session that was
        sent only some of them: layout/sharing.py) to those already expected."""
        if self._record is None:
            self._record = FileRecord()
        self._record = FileRecord(self._record.sessions + record.sessions, record.format)
        self._recorded = self._resolved = None  # a later session's entry wins, as before

    def expected_at(self, path: str) -> Expected | None:
        """The recorded identity of the file at absolute ``path``, if any: found by the name it
        was resolved from (the common case, one lookup), else among every recorded path,
        resolved once (a record naming a subfile in two spellings is still checked)."""
        record = self._record if self._record is not None else FileRecord()
        if self._recorded is None:
            self._recorded = recorded_identities(record)
        name = self.paths.name_of(path)
        if name is not None and name in self._recorded:
            return self._recorded[name]
        if self._resolved is None:
            self._resolved = expected_identities(record, self.paths)
        return self._resolved.get(path)

    def open_file(self, path: str) -> RawFile:
        """The file at ``path`` for positioned reads; a subfile whose identity or size is not
        the recorded one raises SubfileMismatchError (checked once per process)."""
        raw = self.pool.get(path)
        if path not in self._checked and self.check_identities:
            expected = self.expected_at(path)
            if expected is not None:
                relpath, session_uuid, info = expected
                problem = identity_problem(raw, relpath, session_uuid, info)
                if problem is not None:
                    raise SubfileMismatchError(problem)
            self._checked.add(path)
        return raw

    def plan(
        self,
        layout: DatasetLayout,
        itemsize: int,
        box: Block,
        out: memoryview,
        skip: frozenset[int] = frozenset(),
    ) -> tuple[dict[str, list[Piece]], list[tuple[StoredExtent, Block]], bool]:
        """How to read ``box`` into ``out`` (its C-order bytes): byte pieces per file, the
        chunked extents (read through HDF5), and whether the extents cover the whole box.
        Extents whose index is in ``skip`` count as covering but are left to the caller."""
        if layout.learned:
            return self._plan_learned(layout, itemsize, box, out)
        pieces: dict[str, list[Piece]] = {}
        chunked: list[tuple[StoredExtent, Block]] = []
        covered = 0
        for index, extent in enumerate(layout.extents):
            stored = extent.block
            common = box.intersect(stored)
            if common is None:
                continue
            covered += common.size
            if index in skip:
                continue
            if extent.chunks:
                chunked.append((extent, common))
                continue
            into = pieces.setdefault(self.paths.resolve(extent.file), [])
            into.extend(
                (extent.offset + at, out[taken : taken + nbytes])
                for at, taken, nbytes in box_runs(stored, common, box, itemsize)
            )
        return pieces, chunked, covered >= box.size

    def _plan_learned(
        self, layout: DatasetLayout, itemsize: int, box: Block, out: memoryview
    ) -> tuple[dict[str, list[Piece]], list[tuple[StoredExtent, Block]], bool]:
        """:meth:`plan` for a layout learned from the writes: each piece's part of ``box``
        from its extent (the pieces of an extent merged as the master maps them: a group's
        neighbours on disk read as one run); whether the pieces cover the whole box."""
        pieces: dict[str, list[Piece]] = {}
        chunked: list[tuple[StoredExtent, Block]] = []
        covered = 0
        for extent in layout.extents:
            stored = extent.block
            if box.intersect(stored) is None:
                continue
            for slab in self._merged(extent.pieces):
                runs = None if extent.chunks else slab_runs(slab, stored, box, itemsize)
                if runs is not None:  # every block one run: offsets computed at once
                    into = pieces.setdefault(self.paths.resolve(extent.file), [])
                    at, taken, nbytes = runs
                    into.extend(
                        (extent.offset + a, out[t : t + nbytes])
                        for a, t in zip(at.tolist(), taken.tolist())
                    )
                    covered += slab.size
                    continue
                parts = slab.within(box)
                covered += sum(part.size for part in parts)
                if extent.chunks:
                    chunked.extend((extent, part) for part in parts)
                    continue
                if parts:
                    into = pieces.setdefault(self.paths.resolve(extent.file), [])
                for part in parts:
                    into.extend(
                        (extent.offset + at, out[taken : taken + nbytes])
                        for at, taken, nbytes in box_runs(stored, part, box, itemsize)
                    )
        return pieces, chunked, covered >= box.size

    def _merged(self, pieces: tuple[PieceSum, ...]) -> list[Slab]:
        """An extent's pieces merged as the master maps them (:func:`.hyperslab.merged`),
        worked out once per layout rather than on every read of it."""
        known = self._merged_runs.get(id(pieces))
        if known is not None and known[0] is pieces:
            return known[1]
        found = merged([piece.slab for piece in pieces])
        if len(self._merged_runs) >= MERGED_KEPT:  # layouts of a session change as it writes
            self._merged_runs.clear()
        self._merged_runs[id(pieces)] = (pieces, found)
        return found

    def read_direct(
        self,
        layout: DatasetLayout,
        dtype: np.dtype,
        box: Block,
        out: np.ndarray | None = None,
        verify: bool = False,
        name: str = "",
        fill: bytes | None = None,
    ) -> np.ndarray:
        """Read ``box`` from the extents of ``layout``; unmapped parts read as zeros (fill; a
        layout learned from the writes: ``fill``, one element's bytes, when given).

        ``out`` (C-contiguous, shape ``box.count``, ``dtype``) receives the data without an
        extra allocation. With ``verify``, every checksummed piece the box touches is read
        whole and checked before its part is copied out (ChecksumError naming ``name``, the
        dataset, otherwise).
        """
        if out is None:
            out = np.empty(box.count, dtype=dtype)
        if out.size == 0:
            return out
        if layout.learned and verify:
            self.read_learned_checked(layout, dtype, box, out, name, fill)
            return out
        checked = frozenset(
            i for i, e in enumerate(layout.extents) if verify and summed(e, dtype.itemsize)
        )
        pieces, chunked, complete = self.plan(layout, dtype.itemsize, box, as_bytes(out), checked)
        if not complete:
            fill_with(out, fill)
        for path, file_pieces in pieces.items():
            self.open_file(path).read_pieces(file_pieces)
        self.read_chunked(chunked, box, out)
        for index in sorted(checked):
            self.read_checked(layout.extents[index], dtype, box, out, name)
        return out

    def read_learned_checked(
        self,
        layout: DatasetLayout,
        dtype: np.dtype,
        box: Block,
        out: np.ndarray,
        name: str,
        fill: bytes | None,
    ) -> None:
        """Read ``box`` from a layout learned from the writes, each piece it touches read whole
        and checked first (one without a checksum yet, in the write session, read as it is);
        elements no piece holds are the fill value."""
        plain = dataclasses.replace(
            layout,
            extents=tuple(
                e.changed(pieces=tuple(p for p in e.pieces if not p.checksum))
                for e in layout.extents
            ),
        )
        _, _, complete = self.plan(layout, dtype.itemsize, box, as_bytes(out))
        if not complete:
            fill_with(out, fill)
        pieces, chunked, _ = self.plan(plain, dtype.itemsize, box, as_bytes(out))
        for path, file_pieces in pieces.items():
            self.open_file(path).read_pieces(file_pieces)
        self.read_chunked(chunked, box, out)
        touched = [
            (extent, piece)
            for extent in layout.extents
            for piece in extent.pieces
            if piece.checksum and piece.slab.within(box)
        ]
        for extent, piece in touched:
            if extent.chunks:  # through HDF5, block by block
                for block, data in self.check_slab(extent, piece, dtype, name, keep=True) or ():
                    place_blocks(out, box, [(block, data)])
        stored = [(extent, piece) for extent, piece in touched if not extent.chunks]
        batch: list[tuple[StoredExtent, PieceSum]] = []
        size = 0
        for k, (extent, piece) in enumerate(stored):  # in batches, neighbours in one call
            batch.append((extent, piece))
            size += piece.slab.size * dtype.itemsize
            if size >= HASH_BATCH or k == len(stored) - 1:
                for (e, p), data in zip(batch, self._read_slabs(batch, dtype)):
                    self._compare(e, p, checksum(as_bytes(data)), name, dtype)
                    place_slab(out, box, p.slab, data)
                batch, size = [], 0

    def _read_slabs(
        self, pieces: list[tuple[StoredExtent, PieceSum]], dtype: np.dtype
    ) -> list[np.ndarray]:
        """The bytes of each piece (not chunked), its blocks in order (shape: the piece's grid
        of blocks, then the block), read with one vectored read per file."""
        found = []
        by_file: dict[str, list[Piece]] = {}
        for extent, piece in pieces:
            slab = piece.slab
            data = np.empty(slab.count + slab.block, dtype=dtype)
            found.append(data)
            view = as_bytes(data)
            into = by_file.setdefault(self.paths.resolve(extent.file), [])
            step = slab.size // max(slab.blocks_count, 1) * dtype.itemsize
            for k, block in enumerate(slab.blocks()):
                into.extend(
                    (extent.offset + at, view[k * step + t : k * step + t + n])
                    for at, t, n in box_runs(extent.block, block, block, dtype.itemsize)
                )
        for path, runs in by_file.items():
            self.open_file(path).read_pieces(runs)
        return found

    def check_slab(
        self, extent: StoredExtent, piece: PieceSum, dtype: np.dtype, name: str, keep: bool
    ) -> list[tuple[Block, np.ndarray]] | None:
        """Read a piece of a learned layout (a slab: its blocks in order) and check its
        checksum (ChecksumError naming the dataset ``name``, the file and the piece's bytes).
        Returns each block with its data with ``keep``, else None (hashed in batches)."""
        slab = piece.slab
        if extent.chunks:  # read (and decoded) by HDF5, block by block
            source = self.source_dataset(extent)
            blocks = []
            hasher = new_hasher()
            for block in slab.blocks():
                data = np.empty(block.count, dtype=dtype)
                source.read_direct(data, source_sel=block.relative_to(extent.start).slices)
                hasher.update(as_bytes(data))
                blocks.append((block, data))
            self._compare(extent, piece, hasher.hexdigest(), name, None)
            return blocks if keep else None
        if not keep:
            raw = self.open_file(self.paths.resolve(extent.file))
            found = hash_slab(raw, extent.offset, extent.block, slab, dtype)
            self._compare(extent, piece, found, name, dtype)
            return None
        data = self._read_slabs([(extent, piece)], dtype)[0]
        self._compare(extent, piece, checksum(as_bytes(data)), name, dtype)
        return list(zip(slab.blocks(), data.reshape((slab.blocks_count, *slab.block))))

    def _compare(
        self,
        extent: StoredExtent,
        piece: PieceSum,
        found: str,
        name: str,
        dtype: np.dtype | None,
    ) -> None:
        """ChecksumError unless a learned piece's bytes hash to its recorded checksum."""
        if found == piece.checksum:
            return
        span: tuple[int | None, int | None] = (None, None)
        where = ""
        if dtype is not None:
            blocks = list(piece.slab.blocks())
            first_runs = box_runs(extent.block, blocks[0], blocks[0], dtype.itemsize)
            last_runs = box_runs(extent.block, blocks[-1], blocks[-1], dtype.itemsize)
            first = extent.offset + first_runs[0][0]
            end = extent.offset + last_runs[-1][0] + last_runs[-1][2]
            span, where = (first, end - first), f" at byte offsets {first} to {end}"
        error = ChecksumError(
            f"dataset {name}: the piece {piece.slab.describe()} written by rank {piece.rank}, "
            f"stored in {extent.file or 'the master'}{where}, has checksum {found}, the "
            f"writer recorded {piece.checksum}: its bytes changed after they were written"
        )
        error.span = span
        raise error

    def read_checked(
        self, extent: StoredExtent, dtype: np.dtype, box: Block, out: np.ndarray, name: str
    ) -> None:
        """Read the part of ``box`` stored in ``extent`` into ``out`` (shape ``box.count``),
        checking the checksum of every piece it touches first."""
        within = box.intersect(extent.block)
        if within is None:
            return
        touched = [p for p in extent.pieces if box.intersect(Block(p.start, p.shape))]
        for piece in touched:
            data = self.check_piece(extent, piece, dtype, name, keep=not extent.chunks)
            if data is None:
                continue
            stored = Block(piece.start, piece.shape)
            common = box.intersect(stored)
            assert common is not None
            out[common.relative_to(box.start).slices] = data[
                common.relative_to(stored.start).slices
            ]
        if extent.chunks:
            self.read_chunked([(extent, within)], box, out)

    def check_piece(
        self, extent: StoredExtent, piece: PieceSum, dtype: np.dtype, name: str, keep: bool
    ) -> np.ndarray | None:
        """Read one piece whole and check its checksum (ChecksumError naming the dataset
        ``name``, the file, the byte offset and length). Returns the piece's data for a
        contiguous extent with ``keep``, else None (then it is hashed in batches)."""
        if extent.chunks:
            self._check_chunk(extent, piece, name)
            return None
        raw = self.open_file(self.paths.resolve(extent.file))
        stored = Block(piece.start, piece.shape)
        runs = box_runs(extent.block, stored, stored, dtype.itemsize)
        data = None
        if keep:
            data = np.empty(piece.shape, dtype=dtype)
            view = as_bytes(data)
            raw.read_pieces([(extent.offset + at, view[t : t + n]) for at, t, n in runs])
            found = checksum(view)
        else:
            found = hash_stored(raw, extent.offset, extent.block, stored, dtype)
        if found != piece.checksum:
            first = extent.offset + runs[0][0]
            length = extent.offset + runs[-1][0] + runs[-1][2] - first
            error = ChecksumError(
                f"dataset {name}: the block {stored} stored in {extent.file or 'the master'} at "
                f"byte offset {first}, length {length}, has checksum {found}, the writer "
                f"recorded {piece.checksum}: its bytes changed after they were written"
            )
            error.span = (first, length)
            raise error
        return data

    def _check_chunk(self, extent: StoredExtent, piece: PieceSum, name: str) -> None:
        source = self.source_dataset(extent)
        local = tuple(s - e for s, e in zip(piece.start, extent.start))
        try:
            _, stored = source.id.read_direct_chunk(local)
            found = checksum(stored)
        except (OSError, ValueError, KeyError) as exc:
            found = f"unreadable ({exc})"
        if found != piece.checksum:
            where = source.id.get_chunk_info_by_coord(local)
            at = "unknown" if where.byte_offset is None else where.byte_offset
            error = ChecksumError(
                f"dataset {name}: the chunk at {list(piece.start)} stored in "
                f"{extent.file or 'the master'} at byte offset {at}, length {where.size}, has "
                f"checksum {found}, the writer recorded {piece.checksum}: its bytes changed "
                "after they were written"
            )
            error.span = (where.byte_offset, where.size)
            raise error

    def read_chunked(
        self, chunked: list[tuple[StoredExtent, Block]], box: Block, out: np.ndarray
    ) -> None:
        """Read the parts of ``box`` held by chunked extents; HDF5 decompresses them here."""
        for extent, common in chunked:
            started = time.perf_counter()
            source = self.source_dataset(extent)
            local = common.relative_to(extent.start)
            within = common.relative_to(box.start)
            source.read_direct(out, source_sel=local.slices, dest_sel=within.slices)
            stats = self.pool.stats  # HDF5 reads and decompresses: counted as reading
            stats.reads += 1
            stats.bytes_read += common.size * out.itemsize
            stats.read_seconds += time.perf_counter() - started

    def source_dataset(self, extent: StoredExtent) -> h5py.Dataset:
        """The HDF5 dataset holding a chunked extent (plugins loaded, so any filter decodes)."""
        load_plugins()
        if names_master(extent.file):
            return self.h5py_dataset(extent.dataset)
        path = self.paths.resolve(extent.file)
        h5 = self.writer_files.get(path) or self._sources.get(path)
        if h5 is None:
            self.open_file(path)  # its identity and size first
            h5 = self._sources[path] = open_shared_read(path, self.pool.stats.profile, "subfile")
        return h5[extent.dataset]

    def forget_sources(self) -> None:
        """Drop the h5py handles opened for reading (another process wrote to those files)."""
        sources, self._sources = self._sources, {}
        for h5 in sources.values():
            h5.close()
        if self._h5 is not None and not any(self._h5 is w for w in self.writer_files.values()):
            self._h5.close()
            self._h5 = None

    def master(self) -> h5py.File:
        """The master, open for reading through h5py (opened on first use)."""
        if self._h5 is None:
            self._h5 = self.h5py_opener()
        return self._h5

    def h5py_dataset(self, path: str) -> h5py.Dataset:
        return self.master()[path]

    def read_h5py(self, path: str, dtype: np.dtype, box: Block) -> np.ndarray:
        """Read ``box`` through h5py (chunked, compressed, foreign virtual datasets...)."""
        if any(c == 0 for c in box.count):
            return np.zeros(box.count, dtype=dtype)
        return np.asarray(self.h5py_dataset(path)[box.slices])

    def close(self) -> None:
        self.pool.close_all()
        self.forget_sources()
        if self._h5 is not None:
            self._h5.close()
            self._h5 = None


def place_blocks(out: np.ndarray, box: Block, blocks: Iterable[tuple[Block, np.ndarray]]) -> None:
    """Copy each ``(block, data)``'s part inside ``box`` into ``out`` (the box, C order)."""
    for block, data in blocks:
        common = box.intersect(block)
        if common is not None:
            out[common.relative_to(box.start).slices] = data[common.relative_to(block.start).slices]


def place_slab(out: np.ndarray, box: Block, slab: Slab, data: np.ndarray) -> None:
    """Copy a slab's ``data`` (its grid of blocks, then the block) into ``out`` (the box
    ``box``, C order): at once through a strided view when the slab lies inside the box, else
    block by block."""
    if not slab.ndim or not box.contains(slab.bounds) or not out.flags.c_contiguous:
        grid = data.reshape((slab.blocks_count, *slab.block))
        place_blocks(out, box, zip(slab.blocks(), grid))
        return
    at = sum((s - b) * st for s, b, st in zip(slab.start, box.start, out.strides))
    view = np.lib.stride_tricks.as_strided(
        out.reshape(-1)[at // out.itemsize :],
        shape=slab.count + slab.block,
        strides=tuple(t * st for t, st in zip(slab.stride, out.strides)) + out.strides,
        writeable=True,
    )
    view[...] = data


def fill_with(out: np.ndarray, fill: bytes | None) -> None:
    """Set every element of ``out`` to the fill value (its bytes; None: zero bytes)."""
    if fill is None:
        out.reshape(-1).view(np.uint8).fill(0)  # zero bytes (fill(0) writes "0" into strings)
    else:
        out[...] = np.frombuffer(fill, dtype=out.dtype).reshape(())


def summed(extent: StoredExtent, itemsize: int) -> bool:
    """Whether checksummed pieces cover the whole extent (its bytes can all be verified)."""
    if not extent.pieces:
        return False
    if extent.chunks:
        count = 1
        for length, chunk in zip(extent.shape, extent.chunks):
            count *= -(-length // chunk)
        return len(extent.pieces) >= count
    return sum(Block(p.start, p.shape).size for p in extent.pieces) >= extent.block.size
