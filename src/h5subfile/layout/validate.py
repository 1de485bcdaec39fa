"""Cross-checks of a dataset's layout record against what HDF5 says of the dataset (pure).

Rank 0's scan (``io/master_read.py``) collects what HDF5 says (the dataset's shape, dtype and
storage, its VDS mappings, the byte offset of data stored in the master) into
:class:`Hdf5Facts` and asks :func:`layout_problem` whether the record may be trusted;
:func:`byte_overlaps` then compares the byte ranges of every dataset stored in one file. A
record that fails is reported as a ``CorruptFileError`` naming the dataset, raised when the
dataset is read (docs/FORMAT.md, "Checks made by readers").

What is checked: the record's own digest, its dtype against the dataset's, its extents inside
the shape and not overlapping, sane offsets, counts and ranks, and the VDS mappings (or, for data
stored in the master, the master's own byte offset).
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from .blockmap import BlockMap, disjoint_on_some_axis
from .blocks import Block, first_overlap
from .dtypes import dtype_from_text
from .hyperslab import Slab, canonical, first_shared
from .integrity import PieceSum
from .names import names_master
from .record import DIGEST_KEY, DatasetLayout, Session, StoredExtent, record_digest

#: No raw data lies in the first bytes of an HDF5 file written by h5subfile: the superblock is
#: there (48 bytes for versions 2 and 3, more for older ones; h5subfile writes no user block).
MIN_DATA_OFFSET = 48
#: Byte offsets are signed 64-bit numbers in HDF5 and in ``pread``.
MAX_FILE_BYTES = 2**63


class RecordError(ValueError):
    """Why a layout record cannot be trusted (the message becomes a CorruptFileError's)."""


@dataclass(frozen=True)
class Mapping:
    """One mapping of a virtual dataset: the box ``[start, start + count)`` of the dataset comes
    from ``dataset`` in ``file`` (the whole source dataset, or a part of it)."""

    file: str
    dataset: str
    start: tuple[int, ...]
    count: tuple[int, ...]
    whole_source: bool
    box_count: int  # elements the virtual selection holds (the box's size when it is one box)
    #: the virtual and the source selections as regular hyperslabs (None when not regular;
    #: HDF5 keeps a source's shape only as far as its selection reaches)
    virtual_slab: Slab | None = None
    source_slab: Slab | None = None


@dataclass(frozen=True)
class Hdf5Facts:
    """What HDF5 says of a dataset: shape, dtype, storage ("contiguous", "chunked", "virtual",
    "compact"...), the offset of its contiguous data (``direct_offset``), its VDS mappings."""

    shape: tuple[int, ...]
    dtype: np.dtype
    storage: str
    offset: int | None = None
    mappings: tuple[Mapping, ...] = ()


def layout_problem(
    path: str,
    text: str,
    layout: DatasetLayout,
    facts: Hdf5Facts,
    sessions: Sequence[Session],
) -> str | None:
    """Why the record ``text`` (parsed as ``layout``) of dataset ``path`` cannot be trusted, or
    None. Checks the digest and the dtype (format 3 sessions), the extents (inside the shape,
    not overlapping, sane offsets and ranks) and their agreement with HDF5's storage."""
    try:
        session = _session_of(layout, sessions)
        check_digest(text, required=bool(session.uuid))
        check_dtype(layout.dtype, facts.dtype, required=bool(session.uuid))
        if layout.learned:
            check_learned(layout, facts.shape, facts.dtype.itemsize, _most_ranks(layout, sessions))
        else:
            check_extents(layout.extents, facts.shape, facts.dtype.itemsize, session.ranks)
        if facts.storage == "virtual" and layout.learned:
            check_piece_mappings(layout.extents, facts.mappings)
        elif facts.storage == "virtual":
            check_mappings(layout.extents, facts.mappings)
        else:
            check_in_master(path, layout.extents, facts)
    except RecordError as exc:
        return f"dataset {path}: the layout record is damaged or does not match the file: {exc}"
    return None


def _most_ranks(layout: DatasetLayout, sessions: Sequence[Session]) -> int:
    """The most ranks of the session that created a learned layout and of every later one,
    which may have grown it (engine/resize.py): the ranks its extents and pieces may name."""
    return max(
        s.ranks
        for s in sessions
        if type(s.id) is int and s.id >= layout.session and type(s.ranks) is int
    )


def _session_of(layout: DatasetLayout, sessions: Sequence[Session]) -> Session:
    for session in sessions:
        if session.id == layout.session and type(session.id) is int:
            if type(session.ranks) is not int or not isinstance(session.uuid, str):
                raise RecordError(f"write session {session.id} has a damaged record")
            return session
    raise RecordError(f"it names write session {layout.session}, which the file does not record")


def check_digest(text: str, required: bool) -> None:
    """The record's stored digest must be that of its content (format 3 records carry one)."""
    data = json.loads(text)
    stored = data.get(DIGEST_KEY)
    if stored is None:
        if required:
            raise RecordError("its digest is missing")
        return
    if stored != record_digest(data):
        raise RecordError("its digest does not match its content (the record was changed)")


def check_dtype(recorded: str, actual: np.dtype, required: bool) -> None:
    """The recorded element type must be the HDF5 dataset's (absent only before format 3)."""
    if not recorded:
        if required:
            raise RecordError("its dtype is missing")
        return
    try:
        expected = dtype_from_text(recorded)
    except (ValueError, TypeError, KeyError) as exc:
        raise RecordError(f"its dtype {recorded!r} is not a dtype ({exc})") from None
    if expected != actual:
        raise RecordError(f"it records dtype {expected}, but the HDF5 dataset has {actual}")


def check_extents(
    extents: Sequence[StoredExtent], shape: tuple[int, ...], itemsize: int, ranks: int
) -> None:
    """Extents lie inside ``shape``, do not overlap, have sane offsets, chunks and ranks.

    Linear in the extents plus one sort per axis: an extent passing a quick test is not
    looked at again; one failing it (or chunked) is checked step by step for the message."""
    elements = math.prod(shape)
    if len(extents) > max(elements, 1):
        raise RecordError(f"{len(extents)} extents for {elements} element(s)")
    for index, extent in enumerate(extents):
        if not _looks_sane(extent, shape, itemsize, ranks):
            _check_extent(index, extent, shape, itemsize, ranks)
    if not _disjoint(extents, len(shape)):
        found = first_overlap([e.block for e in extents])
        if found is not None:
            first, second = found
            raise RecordError(
                f"extent {second} {extents[second].block} overlaps extent {first} "
                f"{extents[first].block}"
            )


def check_learned(layout: DatasetLayout, shape: tuple[int, ...], itemsize: int, ranks: int) -> None:
    """A layout learned from the writes: its extents (every group's source of a segment: they
    may cover the same box) have sane boxes and offsets, within the maximum shape; its pieces
    lie in the dataset's shape and their extent, name ranks of the session, and no two share
    an element (what was written is read from one place only)."""
    limits = layout.maxshape or shape
    if len(limits) != len(shape):
        raise RecordError(f"its maxshape {list(limits)} does not match the shape {shape}")
    bound = tuple(n if m < 0 else max(m, n) for n, m in zip(shape, limits))
    whole = Block((0,) * len(shape), shape)
    listed: list[tuple[int, Slab]] = []
    for index, extent in enumerate(layout.extents):
        unlimited = tuple(
            max(n, s + c) if m < 0 else n
            for n, m, s, c in zip(bound, limits, extent.start, extent.shape)
        )
        _check_extent(index, extent, unlimited, itemsize, ranks)
        for piece in extent.pieces:
            listed.append((len(listed), _check_piece(index, extent, piece, whole, ranks)))
    if len(listed) > max(math.prod(shape), 1):
        raise RecordError(f"{len(listed)} pieces for {math.prod(shape)} element(s)")
    found = first_shared(listed)
    if found is not None:
        first, second = (listed[k][1] for k in found)
        raise RecordError(f"piece {second.describe()} overlaps piece {first.describe()}")


def _check_piece(
    index: int, extent: StoredExtent, piece: PieceSum, whole: Block, ranks: int
) -> Slab:
    """One piece of a learned layout: a valid slab inside the shape and its extent."""
    where = f"a piece of extent {index} {extent.block}"
    ndim = len(whole.count)
    if len(piece.start) != ndim or len(piece.shape) != ndim:
        raise RecordError(f"{where} has {len(piece.start)} axes; the dataset has {ndim}")
    if piece.count and (len(piece.count) != ndim or len(piece.stride) != ndim):
        raise RecordError(f"{where} has stride {list(piece.stride)}, count {list(piece.count)}")
    if min(piece.count + piece.shape + piece.start, default=1) < 0 or 0 in piece.shape:
        raise RecordError(f"{where} has a negative or empty start, shape or count")
    if any(c > 1 and t < b for t, c, b in zip(piece.stride, piece.count, piece.shape)):
        raise RecordError(
            f"{where} has blocks closer than their size (stride {list(piece.stride)})"
        )
    slab = piece.slab
    if slab.size == 0:
        raise RecordError(f"{where} is empty")
    bounds = slab.bounds
    if not whole.contains(bounds) or not extent.block.contains(bounds):
        raise RecordError(f"{where}, {slab.describe()}, lies outside the dataset or its extent")
    if not -1 <= piece.rank < ranks:
        raise RecordError(f"{where} names rank {piece.rank} of a {ranks}-rank session")
    return slab


def check_piece_mappings(extents: Sequence[StoredExtent], mappings: Sequence[Mapping]) -> None:
    """A learned layout's virtual dataset: its VDS mappings select exactly the pieces' elements,
    each from the same elements of its extent's source (the mapping's slab of the dataset from
    the same slab shifted by the extent's corner): what h5subfile reads is what HDF5 reads.
    Masters map each piece on its own (before format 4's merged mappings) or a run of pieces
    of one source that make one regular hyperslab as one mapping (:func:`.hyperslab.merged`);
    either is checked without assuming how the runs were chosen: every piece lies in one
    mapping of its source, and the mappings of each source hold no more elements than its
    pieces (the pieces being disjoint, the two then select the same elements)."""
    recorded = sorted(
        (_file(e.file), e.dataset, _slab_key(p.slab), _slab_key(p.slab.shifted(e.start)))
        for e in extents
        for p in e.pieces
    )
    virtual = sorted(_mapping_key(index, mapping) for index, mapping in enumerate(mappings))
    if recorded == virtual:
        return
    if len(virtual) >= len(recorded):  # no fewer mappings than pieces: one per piece, unmerged
        _compare(recorded, virtual, "piece(s)", lambda where: Slab(*where[0]).describe())
    _check_merged(extents, virtual)


def _mapping_key(
    index: int, mapping: Mapping
) -> tuple[str, str, tuple[tuple[int, ...], ...], tuple[tuple[int, ...], ...]]:
    if mapping.virtual_slab is None or mapping.source_slab is None:
        raise RecordError(
            f"VDS mapping {index} ({mapping.file}:{mapping.dataset}) is not a regular hyperslab"
        )
    return (
        _file(mapping.file),
        mapping.dataset,
        _slab_key(mapping.virtual_slab),
        _slab_key(mapping.source_slab),
    )


def _check_merged(
    extents: Sequence[StoredExtent],
    virtual: list[tuple[str, str, tuple[tuple[int, ...], ...], tuple[tuple[int, ...], ...]]],
) -> None:
    """:func:`check_piece_mappings` where the mappings are fewer than the pieces."""
    by_source: dict[tuple[str, str, tuple[int, ...]], list[Slab]] = {}
    for file, dataset, where, source in virtual:
        slab, from_slab = Slab(*where), Slab(*source)
        corner = tuple(v - s for v, s in zip(slab.start, from_slab.start))
        if _slab_key(slab.shifted(corner)) != source:
            raise RecordError(
                f"the virtual dataset maps {slab.describe()} from {file or 'the master'}:"
                f"{dataset} {from_slab.describe()}, a selection of another shape"
            )
        by_source.setdefault((file, dataset, corner), []).append(slab)
    sources = {(_file(e.file), e.dataset, tuple(e.start)): e for e in extents}
    for (file, dataset, corner), held in by_source.items():
        if (file, dataset, corner) not in sources:
            raise RecordError(
                f"the virtual dataset maps {held[0].describe()} to {file or 'the master'}:"
                f"{dataset}, the record does not"
            )
    for key, extent in sources.items():
        held = by_source.get(key, [])
        unheld = _first_unheld([p.slab for p in extent.pieces], held)
        if unheld is not None:
            raise RecordError(
                f"the record maps {unheld.describe()} to {key[0] or 'the master'}:{key[1]}, "
                "the virtual dataset does not"
            )
        mapped, written = sum(s.size for s in held), sum(p.slab.size for p in extent.pieces)
        if mapped > written:
            raise RecordError(
                f"the virtual dataset maps {mapped} element(s) from {key[0] or 'the master'}:"
                f"{key[1]}, its pieces hold {written}"
            )


def _first_unheld(pieces: list[Slab], held: list[Slab]) -> Slab | None:
    """The first of ``pieces`` no slab of ``held`` holds whole, or None: a sweep along the
    first axis (by bounds), so that each piece is compared only with the slabs around it."""
    if not pieces or not pieces[0].ndim:
        return None if held or not pieces else pieces[0]
    spans = sorted(
        (((s.bounds.start[0], s.bounds.stop[0]), s) for s in held), key=lambda entry: entry[0]
    )
    active: list[tuple[int, Slab]] = []
    k = 0
    for piece in sorted(pieces, key=lambda p: p.bounds.start[0]):
        lo = piece.bounds.start[0]
        while k < len(spans) and spans[k][0][0] <= lo:
            active.append((spans[k][0][1], spans[k][1]))
            k += 1
        active = [(stop, slab) for stop, slab in active if stop > lo]
        if not any(slab.holds(piece) for _, slab in active):
            return piece
    return None


def _slab_key(slab: Slab) -> tuple[tuple[int, ...], ...]:
    """A slab as comparable numbers, normalised (a box as one block)."""
    slab = canonical(slab)
    return (slab.start, slab.stride, slab.count, slab.block)


def _looks_sane(extent: StoredExtent, shape: tuple[int, ...], itemsize: int, ranks: int) -> bool:
    """The checks of :func:`_check_extent` for a contiguous extent, without messages."""
    start, count = extent.start, extent.shape
    if len(start) != len(shape) or len(count) != len(shape) or extent.chunks:
        return False
    if min(start, default=0) < 0 or min(count, default=1) < 1:
        return False
    if any(s + c > n for s, c, n in zip(start, count, shape)):
        return False
    end = extent.offset + math.prod(count) * itemsize
    if extent.offset < MIN_DATA_OFFSET or end >= MAX_FILE_BYTES:
        return False
    listed = extent.ranks
    return len(listed) <= ranks and (not listed or (min(listed) >= 0 and max(listed) < ranks))


def _check_extent(
    index: int, extent: StoredExtent, shape: tuple[int, ...], itemsize: int, ranks: int
) -> None:
    where = f"extent {index} {extent.block}"
    _check_box(where, extent, shape)
    if extent.chunks:
        if len(extent.chunks) != len(shape) or min(extent.chunks, default=1) < 1:
            raise RecordError(f"{where} has chunk shape {extent.chunks}")
        if extent.offset != -1:
            raise RecordError(f"{where} is chunked but has offset {extent.offset}, not -1")
    else:
        _check_offset(where, extent.offset, extent.nbytes(itemsize))
    if len(extent.ranks) > ranks or any(not 0 <= r < ranks for r in extent.ranks):
        raise RecordError(f"{where} names ranks {list(extent.ranks)} of a {ranks}-rank session")


def _disjoint(extents: Sequence[StoredExtent], ndim: int) -> bool:
    """Whether no two extents (inside the shape, non-empty) can share an element: along some
    axis their intervals are disjoint (numpy; False when unsure)."""
    if len(extents) < 2 or ndim == 0:
        return len(extents) < 2
    try:
        starts = np.array([e.start for e in extents], dtype=np.int64)
        counts = np.array([e.shape for e in extents], dtype=np.int64)
    except (OverflowError, ValueError):
        return False
    return disjoint_on_some_axis(BlockMap(starts, counts))


def _check_box(where: str, extent: StoredExtent, shape: tuple[int, ...]) -> None:
    if len(extent.start) != len(shape) or len(extent.shape) != len(shape):
        raise RecordError(f"{where} has {len(extent.start)} axes; the dataset has {len(shape)}")
    if min(extent.start + extent.shape, default=0) < 0:
        raise RecordError(f"{where} has a negative start or size")
    if any(s + c > n for s, c, n in zip(extent.start, extent.shape, shape)):
        raise RecordError(f"{where} lies outside the dataset's shape {shape}")
    if math.prod(extent.shape) == 0:
        raise RecordError(f"{where} is empty")


def _check_offset(where: str, offset: int, nbytes: int) -> None:
    if offset < MIN_DATA_OFFSET:
        raise RecordError(f"{where} has offset {offset}, inside the file's superblock or before it")
    if offset + nbytes >= MAX_FILE_BYTES:
        raise RecordError(f"{where} ends at byte {offset + nbytes}, beyond any file")


def _file(relpath: str) -> str:
    return "" if names_master(relpath) else relpath


def _key(
    file: str, dataset: str, start: Sequence[int], count: Sequence[int]
) -> tuple[str, str, tuple[int, ...], tuple[int, ...]]:
    return (_file(file), dataset, tuple(start), tuple(count))


def check_mappings(extents: Sequence[StoredExtent], mappings: Sequence[Mapping]) -> None:
    """Each extent is one VDS mapping (same file, source dataset and box, the whole source
    mapped) and each mapping is one extent: what h5subfile reads is what HDF5 reads."""
    for index, mapping in enumerate(mappings):
        where = f"VDS mapping {index} ({mapping.file}:{mapping.dataset})"
        box = Block(mapping.start, mapping.count)
        if mapping.box_count != box.size:
            raise RecordError(f"{where} selects {mapping.box_count} elements, not one box")
        if not mapping.whole_source:
            raise RecordError(f"{where} maps a part of its source onto {box}, not all of it")
    recorded = sorted(_key(e.file, e.dataset, e.start, e.shape) for e in extents)
    virtual = sorted(_key(m.file, m.dataset, m.start, m.count) for m in mappings)
    _compare(recorded, virtual, "extent(s)", lambda where: str(Block(*where)))


def _compare(
    recorded: list[tuple[Any, ...]],
    virtual: list[tuple[Any, ...]],
    what: str,
    describe: Callable[[tuple[Any, ...]], str],
) -> None:
    """Each recorded ``(file, dataset, *where)`` is one of the virtual dataset's mappings and
    each mapping one of them (both sorted), else RecordError naming one that differs
    (``describe(where)``)."""
    if recorded == virtual:
        return
    extra = sorted(set(recorded) - set(virtual)) or sorted(set(virtual) - set(recorded))
    if len(recorded) != len(virtual) or not extra:
        raise RecordError(
            f"it records {len(recorded)} {what}, the virtual dataset has {len(virtual)} mapping(s)"
        )
    side = "the record" if extra[0] in recorded else "the virtual dataset"
    file, dataset = extra[0][:2]
    raise RecordError(
        f"{side} maps {describe(extra[0][2:])} to {file or 'the master'}:{dataset}, the other "
        "does not"
    )


def check_in_master(path: str, extents: Sequence[StoredExtent], facts: Hdf5Facts) -> None:
    """A dataset that is not virtual is its own storage: at most one extent, the whole dataset
    in the master, at the offset HDF5 gives (contiguous) or read through HDF5 (chunked)."""
    if not extents:  # never written: reads as fill values, as HDF5 reads it if it has no data
        if facts.offset is not None or facts.storage != "contiguous":
            raise RecordError(f"it records no data, but HDF5 stores the dataset {facts.storage}")
        return
    if len(extents) > 1:
        raise RecordError(f"{len(extents)} extents for a dataset that is not virtual")
    (extent,) = extents
    if not names_master(extent.file) or extent.dataset != path:
        raise RecordError(
            f"its extent is {extent.file}:{extent.dataset}, but the dataset is not virtual"
        )
    if extent.start != (0,) * len(facts.shape) or extent.shape != facts.shape:
        raise RecordError(f"its extent {extent.block} is not the whole dataset {facts.shape}")
    if extent.chunks:
        if facts.storage != "chunked":
            raise RecordError(f"it records chunks, but HDF5 stores the dataset {facts.storage}")
    elif facts.offset != extent.offset:
        found = "no direct offset" if facts.offset is None else f"offset {facts.offset}"
        raise RecordError(f"it records offset {extent.offset}; HDF5 has {found}")


@dataclass(frozen=True)
class ByteRange:
    """The bytes ``[start, stop)`` of ``file`` that dataset ``path`` reads."""

    file: str
    start: int
    stop: int
    path: str


def byte_ranges(path: str, layout: DatasetLayout, itemsize: int) -> list[ByteRange]:
    """The byte ranges a dataset's contiguous extents read (chunked ones are HDF5's)."""
    return [
        ByteRange(_file(e.file), e.offset, e.offset + e.nbytes(itemsize), path)
        for e in layout.extents
        if not e.chunks and e.nbytes(itemsize) > 0
    ]


def byte_overlaps(ranges: Sequence[ByteRange]) -> list[tuple[ByteRange, ByteRange]]:
    """Pairs of ranges of one file that share bytes (an extent moved onto another's data)."""
    found = []
    ordered = sorted(ranges, key=lambda r: (r.file, r.start, r.stop))
    reach: ByteRange | None = None  # the range reaching furthest so far in this file
    for current in ordered:
        if reach is not None and reach.file == current.file and current.start < reach.stop:
            found.append((reach, current))
        if reach is None or reach.file != current.file or current.stop > reach.stop:
            reach = current
    return found
