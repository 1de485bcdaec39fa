"""What each rank knows of the datasets whose layout is learned from the writes (engine/learned.py
says how they are stored and synchronised): pure bookkeeping, no communication.

- :class:`LearnedTarget`: this rank's part of one such dataset (its group's sources, its
  pieces); :func:`note_write` accounts for one write and says which hasher it feeds.
- :class:`Book` (rank 0): every rank's pieces of every such dataset, and their layouts.
- :func:`read_layout`: what an independent read in the write session knows (its own writes,
  and every rank's as of the last sync); beyond that it refuses to guess
  (:func:`refuse_unknown`).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..errors import FileModeError, IncompleteFileError, OverlapError
from ..io.boxes import hash_slab
from ..io.posix import RawFile
from ..layout.blocks import Block
from ..layout.hyperslab import Run, Slab, first_shared
from ..layout.integrity import FedHash, PieceSum
from ..layout.record import DatasetLayout, StoredExtent
from ..layout.regions import subtract
from ..layout.runs import listed_apart
from ..layout.selection import ReadPiece
from .messages import WriteTarget

#: A piece as ranks report it: (its source file as recorded, the source dataset, the piece).
Reported = tuple[str, str, PieceSum]


@dataclass
class Written:
    """One piece this rank is writing: its extent (index in its target's ``extents``), the run
    of boxes, and the hasher its bytes are fed to (None: hashed from the file at close)."""

    extent: int
    run: Run
    hasher: FedHash | None

    def bounds(self) -> Block:
        slab = self.run.slab.bounds
        if self.run.whole:
            return slab
        nxt = self.run.next_block()
        start = tuple(min(a, b) for a, b in zip(slab.start, nxt.start))
        stop = tuple(max(a, b) for a, b in zip(slab.stop, nxt.stop))
        return Block(start, tuple(b - a for a, b in zip(start, stop)))

    def slabs(self) -> list[Slab]:
        """What the piece holds: its whole blocks, then the written part of the next one."""
        found = [self.run.slab] if self.run.complete else []
        found.extend(Slab.of_box(box) for box in self.run.partial())
        return found

    def boxes_within(self, box: Block) -> list[Block]:
        """The parts of what this piece holds inside ``box``."""
        return [part for slab in self.slabs() for part in slab.within(box)]


@dataclass
class LearnedTarget:
    """This rank's part of a dataset whose layout is learned: its group's sources (one per
    segment: ``stored`` as recorded, ``extents`` where this rank writes them), what it wrote,
    whether that changed since the last sync."""

    path: str
    dtype: np.dtype
    stored: list[StoredExtent]
    extents: list[WriteTarget]
    pieces: list[Written] = field(default_factory=list)
    changed: bool = False
    #: why a write of this rank failed (the dataset is then published incomplete)
    failed: str = ""
    #: writes so far (tells a read whether its cached layout is still this rank's view)
    version: int = 0
    cached: tuple[int, int, DatasetLayout] | None = None
    #: each piece's bounds, in the order of ``pieces``, once they are more than
    #: :data:`FEW_PIECES` (None before): a write then looks for the pieces it may touch in
    #: them at once, not piece by piece
    bounds: _Bounds | None = None
    #: a dataset of an earlier session grown in this one (engine/resize.py): its layout's first
    #: ``kept`` extents are that session's, closed, their pieces kept as recorded; ``floor``
    #: is its shape then, which this session's sources lie beyond
    kept: int = 0
    floor: tuple[int, ...] = ()

    def touching(self, k: int, box: Block) -> list[Written]:
        """This rank's pieces in extent ``k`` that share an element with ``box``: looked
        at one by one when they are few (a rank's writes that continue each other are one
        piece), else found with numpy first."""
        if self.bounds is None:
            candidates: Iterable[Written] = (
                w for w in self.pieces if w.bounds().intersect(box) is not None
            )
        else:
            candidates = (self.pieces[i] for i in self.bounds.meeting(box))
        return [w for w in candidates if w.extent == k and w.boxes_within(box)]

    def take_pieces(self) -> list[Written]:
        """This rank's pieces, which it no longer holds (to be added again, or not)."""
        pieces, self.pieces, self.bounds = self.pieces, [], None
        return pieces

    def add_piece(self, written: Written) -> None:
        self.pieces.append(written)
        if self.bounds is not None:
            self.bounds.add(written)
        elif len(self.pieces) > FEW_PIECES:
            self.bounds = _Bounds()
            for each in self.pieces:
                self.bounds.add(each)

    def grown(self, index: int) -> None:
        """Piece ``index`` grew: its bounds again."""
        if self.bounds is not None:
            self.bounds.set(index, self.pieces[index])

    def parts(self, box: Block) -> list[tuple[int, Block]]:
        """The extents (segments) ``box`` falls in, with its part in each."""
        found = []
        for k, target in enumerate(self.extents):
            common = box.intersect(target.extent)
            if common is not None:
                found.append((k, common))
        return found

    def index_of(self, target: WriteTarget) -> int:
        """The index of the extent a write targets (its chunk work may have been added)."""
        return next(
            k
            for k, t in enumerate(self.extents)
            if t.file == target.file and t.extent == target.extent
        )

    def add_extents(self, stored: Iterable[StoredExtent], targets: Iterable[WriteTarget]) -> None:
        """Sources added to the group by a resize."""
        self.stored.extend(stored)
        self.extents.extend(targets)


#: Up to this many pieces, a write compares itself with each in Python (a few microseconds
#: each); beyond, numpy finds the pieces it may touch first (tens of microseconds, whatever
#: their number).
FEW_PIECES = 8


class _Bounds:
    """Each piece's bounds and, for a piece whose blocks step along one axis, that axis'
    pattern (its axis, first start, step, count, block length), as growing int64 arrays: the
    pieces a box may touch are found at once, with numpy, not piece by piece (a rank writing
    at random makes many pieces, some of whose blocks are far apart)."""

    FIELDS = 5  # axis, start, step, count, block

    def __init__(self) -> None:
        self.lows: np.ndarray | None = None
        self.highs: np.ndarray | None = None
        self.steps: np.ndarray | None = None
        self.count = 0

    def add(self, written: Written) -> None:
        box = written.bounds()
        if self.lows is None or self.count == len(self.lows):
            grown = max(8, 2 * self.count)
            lows = np.empty((grown, len(box.start)), dtype=np.int64)
            highs, steps = np.empty_like(lows), np.empty((grown, self.FIELDS), dtype=np.int64)
            if self.lows is not None and self.highs is not None and self.steps is not None:
                lows[: self.count] = self.lows[: self.count]
                highs[: self.count] = self.highs[: self.count]
                steps[: self.count] = self.steps[: self.count]
            self.lows, self.highs, self.steps = lows, highs, steps
        self.set(self.count, written)
        self.count += 1

    def set(self, index: int, written: Written) -> None:
        assert self.lows is not None and self.highs is not None and self.steps is not None
        box = written.bounds()
        self.lows[index] = box.start
        self.highs[index] = box.stop
        run = written.run
        if run.axis < 0 or not run.whole:
            self.steps[index] = (-1, 0, 1, 1, 0)  # its bounds say all
        else:
            a = run.axis
            self.steps[index] = (a, run.origin[a], run.step, run.complete, run.block[a])

    def meeting(self, box: Block) -> list[int]:
        """The indices of the pieces that may share an element with ``box``: their bounds meet
        it, and so do their blocks along the axis they step along."""
        if self.lows is None or self.highs is None or self.steps is None or box.is_empty:
            return []
        n = self.count
        lo, hi = np.asarray(box.start, dtype=np.int64), np.asarray(box.stop, dtype=np.int64)
        meet = np.all(self.lows[:n] < hi, axis=1) & np.all(self.highs[:n] > lo, axis=1)
        found = np.flatnonzero(meet)
        steps = self.steps[found]
        stepping = steps[:, 0] >= 0
        if stepping.any():
            axis, start, step, count, block = (steps[stepping, f] for f in range(self.FIELDS))
            low, high = lo[axis], hi[axis]
            first = np.maximum(0, -(-(low - start - block + 1) // step))
            last = np.minimum(count - 1, (high - 1 - start) // step)
            keep = np.ones(len(found), dtype=bool)
            keep[stepping] = first <= last
            found = found[keep]
        return [int(i) for i in found]


def note_write(target: LearnedTarget, k: int, box: Block, fresh: bool = False) -> FedHash | None:
    """Account for this rank writing ``box`` into extent ``k``; returns the hasher the write
    must feed with the box's bytes in C order, or None: then the piece is hashed from the
    file at close (a write over bytes this rank wrote before, other than the same box again,
    which replaces the box's bytes as h5py does). ``fresh``: the caller knows that ``box``
    touches none of this rank's pieces."""
    target.changed = True
    target.version += 1
    hit = [] if fresh else target.touching(k, box)
    if not hit:
        last = next(
            (i for i in range(len(target.pieces) - 1, -1, -1) if target.pieces[i].extent == k), None
        )
        if last is not None and target.pieces[last].run.extend(box):
            target.grown(last)
            return target.pieces[last].hasher
        written = Written(k, Run(box), FedHash())
        target.add_piece(written)
        return written.hasher
    run = hit[0].run
    if (
        len(hit) == 1
        and run.axis < 0
        and run.whole
        and (run.origin, run.block)
        == (
            box.start,
            box.count,
        )
    ):
        hit[0].hasher = FedHash()  # the same box again: its new bytes
        return hit[0].hasher
    left = [box]
    for written in hit:
        written.hasher = None
        for part in written.boxes_within(box):
            left = subtract(left, part)
    for part in left:
        target.add_piece(Written(k, Run(part), None))
    return None


def note_progression(target: LearnedTarget, k: int, boxes: Sequence[Block]) -> FedHash | None:
    """Account for one call writing ``boxes`` (touching none of this rank's pieces) into extent
    ``k`` as one piece, when they are alike and step regularly along one axis, in order
    (``d[rank::size] = x``); returns the hasher every box feeds in turn, or None (the boxes are
    then noted one by one)."""
    shapes = {box.count for box in boxes}
    if len(boxes) < 2 or len(shapes) != 1:
        return None
    block = next(iter(shapes))
    apart = np.diff(np.array([box.start for box in boxes], dtype=np.int64), axis=0)
    axes = np.flatnonzero(np.any(apart != 0, axis=0))
    if len(axes) != 1:
        return None
    axis = int(axes[0])
    step = int(apart[0, axis])
    if step <= block[axis] or np.any(apart[:, axis] != step):
        return None
    run = Run(boxes[0])
    run.axis, run.step, run.complete = axis, step, len(boxes)
    written = Written(k, run, FedHash())
    target.changed = True
    target.version += 1
    target.add_piece(written)
    return written.hasher


def note_failure(target: LearnedTarget, error: BaseException) -> None:
    """A write of this rank failed: what it wrote may be partly stored (published incomplete)."""
    if not target.failed:
        target.failed = f"{type(error).__name__}: {error}"


def reported(
    target: LearnedTarget, rank: int, hashed: dict[int, list[str]] | None = None
) -> list[Reported]:
    """This rank's pieces; checksums from ``hashed`` (by piece index, one per slab of
    :meth:`Written.slabs`) when given, else from the hashers fed as the bytes were written
    ("" where none holds the piece's final bytes)."""
    found = []
    for index, written in enumerate(target.pieces):
        stored = target.stored[written.extent]
        slabs = written.slabs()
        fed = written.hasher if written.run.whole and len(slabs) == 1 else None
        for j, slab in enumerate(slabs):
            if hashed is not None:
                checksum = hashed[index][j]
            else:
                checksum = "" if fed is None else fed.hasher.hexdigest()
            found.append((stored.file, stored.dataset, PieceSum.of_slab(slab, checksum, rank)))
    return found


def final_checksums(target: LearnedTarget, stats: object) -> dict[int, list[str]]:
    """At close: each piece's checksums, those not fed whole as they were written read from
    the file (its final bytes). Nothing is read for a dataset a write of this rank failed
    (published incomplete); a compressed dataset's piece written over again (refused by its
    leader) fails it the same way."""
    hashed: dict[int, list[str]] = {}
    for index, written in enumerate(target.pieces):
        slabs = written.slabs()
        if written.hasher is not None and written.run.whole and len(slabs) == 1:
            hashed[index] = [written.hasher.hasher.hexdigest()]
            continue
        extent = target.extents[written.extent]
        if not target.failed and extent.offset < 0:
            target.failed = "a compressed piece was written over again"
        if target.failed:
            hashed[index] = [""] * len(slabs)
            continue
        raw = RawFile(extent.file, stats=stats)  # type: ignore[arg-type]
        try:
            hashed[index] = [
                hash_slab(raw, extent.offset, extent.extent, slab, target.dtype) for slab in slabs
            ]
        finally:
            raw.close()
    return hashed


def clip_layout(layout: DatasetLayout, inside: Block) -> DatasetLayout:
    """``layout`` with every piece cut to ``inside`` (a dataset made smaller): what lies
    beyond is no longer the dataset's, and reads as the fill value if it grows back."""
    extents = []
    for extent in layout.extents:
        pieces: list[PieceSum] = []
        for piece in extent.pieces:
            if inside.contains(piece.slab.bounds):
                pieces.append(piece)
                continue
            pieces.extend(
                PieceSum.of_slab(Slab.of_box(box), "", piece.rank)
                for box in piece.slab.within(inside)
            )
        extents.append(extent.changed(pieces=tuple(pieces)))
    return dataclasses.replace(layout, extents=tuple(extents))


class Book:
    """Rank 0: every rank's reported pieces of every dataset whose layout is learned."""

    def __init__(self) -> None:
        self.pieces: dict[str, dict[int, list[Reported]]] = {}
        #: why a write of a dataset failed, by dataset, with the rank ("rank 2: OSError: ...")
        self.failed: dict[str, str] = {}
        #: by dataset and rank, the pieces (indices in the rank's list) whose checksum was read
        #: from the file at close, not taken from the bytes the rank passed: they prove nothing
        #: about what it wrote, so they are never copies (:func:`copied`)
        self.read_back: dict[str, dict[int, frozenset[int]]] = {}
        #: :meth:`listed` of each dataset since its last update (checked, then laid out)
        self._listing: dict[str, tuple[list[tuple[int, str, str, PieceSum]], set[int]]] = {}
        #: datasets whose pieces :meth:`check` found apart since their last change
        self._apart: set[str] = set()

    def update(
        self,
        path: str,
        rank: int,
        pieces: list[Reported],
        failed: str = "",
        read_back: frozenset[int] = frozenset(),
    ) -> None:
        known = self.pieces.setdefault(path, {})
        reads = self.read_back.setdefault(path, {})
        if known.get(rank) is not pieces or reads.get(rank) != read_back:
            known[rank] = pieces  # the same report again (the close's, once chosen from) keeps
            reads[rank] = read_back  # its listing and its check
            self._listing.pop(path, None)
            self._apart.discard(path)
        if failed and path not in self.failed:
            self.failed[path] = f"rank {rank}: {failed}"

    def forget(self, path: str) -> None:
        self.pieces.pop(path, None)
        self.failed.pop(path, None)
        self.read_back.pop(path, None)
        self._listing.pop(path, None)
        self._apart.discard(path)

    def listed(self, path: str) -> tuple[list[tuple[int, str, str, PieceSum]], set[int]]:
        """Every rank's pieces of ``path``, lowest rank first, and those that repeat an
        earlier rank's (:func:`copied`)."""
        known = self._listing.get(path)
        if known is not None:
            return known
        listed = []
        proven = []
        read_back = self.read_back.get(path, {})
        for rank, found in sorted(self.pieces.get(path, {}).items()):
            unsure = read_back.get(rank, frozenset())
            for k, (file, dataset, piece) in enumerate(found):
                listed.append((rank, file, dataset, piece))
                proven.append(k not in unsure)
        known = self._listing[path] = (listed, copied([entry[3] for entry in listed], proven))
        return known

    def check(self, path: str) -> None:
        """Refuse two ranks' pieces sharing an element: OverlapError naming the dataset, the
        ranks and their regions (the same on every rank, as the caller's answer)."""
        if path in self._apart:
            return
        found, copies = self.listed(path)
        listed = [(rank, piece) for k, (rank, _, _, piece) in enumerate(found) if k not in copies]
        if listed_apart([piece.slab for _, piece in listed]):
            self._apart.add(path)  # one sort: no overlap, whatever the number of pieces
            return
        shared = first_shared([(rank, piece.slab) for rank, piece in listed])
        if shared is None:
            self._apart.add(path)
            return
        (a, first), (b, second) = listed[shared[0]], listed[shared[1]]
        common = describe_common(first.slab, second.slab)
        raise OverlapError(
            f"rank {b} region {second.slab.describe()} overlaps rank {a} region "
            f"{first.slab.describe()} in dataset {path}{common}: two ranks wrote the same "
            "elements (HDF5 leaves which one is stored undefined; h5subfile refuses it). "
            "Let one rank write each element"
        )

    def layout(
        self,
        path: str,
        base: DatasetLayout,
        kept: int = 0,
        checksum: str | None = None,
        complete: bool | None = None,
    ) -> DatasetLayout:
        """``base`` (the dataset's whole layout: every extent) with every rank's pieces; the
        first ``kept`` extents (an earlier session's) keep theirs. ``complete`` (None: unless
        a rank's write of it failed) and ``checksum`` (the algorithm of the pieces'
        checksums; None: ``base``'s) as given."""
        by_source: dict[tuple[str, str], list[PieceSum]] = {}
        found, copies = self.listed(path)
        for k, (_, file, dataset, piece) in enumerate(found):
            if k not in copies:
                by_source.setdefault((file, dataset), []).append(piece)
        extents = base.extents[:kept] + tuple(
            e.changed(pieces=tuple(by_source.get((e.file, e.dataset), ())))
            for e in base.extents[kept:]
        )
        return dataclasses.replace(
            base,
            extents=extents,
            complete=path not in self.failed if complete is None else complete,
            checksum=base.checksum if checksum is None else checksum,
        )


def copied(pieces: Sequence[PieceSum], proven: Sequence[bool] | None = None) -> set[int]:
    """Indices of the pieces that repeat an earlier one: the same elements with the same
    checksum, written by another rank (every rank writing the same coordinates, as parallel
    HDF5 programs do). Their bytes are the same, so the file keeps the first (the lowest rank's,
    as listed) and no choice is left undefined. Only checksums of the bytes the ranks passed
    count (``proven``, default all): one read back from the file at close is that of whatever
    the file holds, the same for two ranks that wrote different bytes to one place; without
    checksums nothing is a copy."""
    first: dict[tuple[Any, ...], int] = {}
    copies = set()
    for k, piece in enumerate(pieces):
        if not piece.checksum or (proven is not None and not proven[k]):
            continue
        key = (piece.start, piece.shape, piece.stride, piece.count, piece.checksum)
        if key in first and pieces[first[key]].rank != piece.rank:
            copies.add(k)
        first.setdefault(key, k)
    return copies


def own_view_without_copies(layout: DatasetLayout, rank: int, kept: int = 0) -> DatasetLayout:
    """A rank's read view: ``layout`` without the other ranks' pieces that its own repeat
    (:func:`copied`), so that it reads what it wrote from where it wrote it (as for any
    element, what another rank writes there since the last sync may show; a rank that writes
    other values over a copy is refused at the next sync). The first ``kept`` extents (an
    earlier session's) are as recorded."""

    def key(piece: PieceSum) -> tuple[Any, ...]:
        return (piece.start, piece.shape, piece.stride, piece.count, piece.checksum)

    mine = {
        key(p) for e in layout.extents[kept:] for p in e.pieces if p.rank == rank and p.checksum
    }
    if not mine:
        return layout
    extents = layout.extents[:kept] + tuple(
        extent.changed(
            pieces=tuple(p for p in extent.pieces if p.rank == rank or key(p) not in mine)
        )
        for extent in layout.extents[kept:]
    )
    return dataclasses.replace(layout, extents=extents)


def describe_common(a: Slab, b: Slab) -> str:
    """``(both hold [4:5, 0:3])``: the first element region two slabs share, for messages."""
    for block in a.blocks():
        for part in b.within(block):
            return f" (both hold {part})"
    return ""


def with_own_pieces(
    layout: DatasetLayout, rank: int, own: list[Reported], kept: int = 0
) -> DatasetLayout:
    """``layout`` (every rank's pieces as of the last sync) with this rank's replaced by its
    pieces now (but in the first ``kept`` extents, an earlier session's)."""
    by_source: dict[tuple[str, str], list[PieceSum]] = {}
    for file, dataset, piece in own:
        by_source.setdefault((file, dataset), []).append(piece)
    extents = layout.extents[:kept] + tuple(
        e.changed(
            pieces=tuple(p for p in e.pieces if p.rank != rank)
            + tuple(by_source.get((e.file, e.dataset), ()))
        )
        for e in layout.extents[kept:]
    )
    return dataclasses.replace(layout, extents=extents)


def read_layout(
    target: LearnedTarget, synced: DatasetLayout, rank: int, path: str
) -> DatasetLayout:
    """What an independent read on this rank knows of the dataset: every rank's pieces as of
    the last sync, this rank's as they are now (cached until this rank writes or syncs).
    Raises IncompleteFileError where a write of it failed (on this rank, or on any as of the
    last sync: what it stored is unknown), OverlapError where this rank wrote elements
    another rank had written (known from the last sync; the next sync refuses it too)."""
    if target.failed or not synced.complete:
        why = target.failed or "on another rank, as the last File.flush() or collective read told"
        raise IncompleteFileError(
            f"{path}: a write of it failed ({why}), so what it stored is unknown; this "
            "session publishes it incomplete"
        )
    cached = target.cached
    if cached is not None and cached[0] == target.version and cached[1] == id(synced):
        return cached[2]
    layout = with_own_pieces(synced, rank, reported(target, rank), target.kept)
    layout = own_view_without_copies(layout, rank, target.kept)
    listed = [(p.rank, p.slab) for e in layout.extents for p in e.pieces]
    shared = first_shared(listed)  # only this rank's can meet another's: the others' were checked
    if shared is not None:
        (a, first), (b, second) = sorted(
            (listed[shared[0]], listed[shared[1]]), key=lambda x: x[0] != rank
        )
        raise OverlapError(
            f"rank {a} region {first.describe()} overlaps rank {b} region {second.describe()} "
            f"in dataset {path}{describe_common(first, second)}: rank {b} wrote those elements "
            "before the last File.flush(), and this rank wrote them since (HDF5 leaves which "
            "one is stored undefined; h5subfile refuses it, and so will the next flush or "
            "close on every rank). Let one rank write each element"
        )
    target.cached = (target.version, id(synced), layout)
    return layout


def covered(layout: DatasetLayout, box: Block, axes: Sequence[range | np.ndarray]) -> int:
    """Elements of the selection ``axes`` (the indices it takes along each axis, inside
    ``box``) that the pieces of ``layout`` hold (they hold no element twice)."""
    return sum(
        piece.slab.count_in(axes)
        for extent in layout.extents
        for piece in extent.pieces
        if piece.slab.bounds.intersect(box) is not None
    )


def refuse_unknown(layout: DatasetLayout, path: str, pieces: Iterable[ReadPiece]) -> None:
    """An independent read in the write session may read only what this rank knows was
    written: its own writes and every rank's as of the last sync. Elsewhere it cannot tell
    an element never written (the fill value) from one another rank wrote since, so it
    refuses rather than guess. Only the elements selected count (a strided read of a
    strided write reads between them nothing it needs)."""
    for piece in pieces:
        box = piece.box
        if not box.size:
            continue
        axes = piece.selected()
        wanted = math.prod(len(a) for a in axes)
        if wanted and covered(layout, box, axes) < wanted:
            raise FileModeError(
                f"{path}: {box} holds elements that neither this rank wrote nor any rank had "
                "written at the last File.flush(): another rank may have written them since, "
                "which this rank cannot know without asking; call File.flush() (collective) "
                "first, or read collectively (with d.collective:), or after closing the file "
                "(where elements never written read as the fill value)"
            )
